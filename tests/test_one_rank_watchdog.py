"""One rank's NCCL watchdog timeout, alone or with the lines its watchdog prints after it (#33 item
5): a hang section and a hang claim that say who waits (rank, pid), in what (the collective, its
number, size and group), how long, how far its group got and where the collective was called;
that the rank it waits for is unknown from one rank's log, and what to collect to name it.

The lines keep the shapes of public reports (numbers changed); the formats are ProcessGroupNCCL.cpp's
(the timeout line; the work-status line in its three versions' words; getNCCLWatchdogTimeoutErrorMsg's
dump signal; WorkNCCL::printTraceback's `Stack trace of the failed collective: ` with `#K function from
file:line` lines, or its `... not found, potentially because FlightRecorder is disabled`)."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import triage_text


# torch 2.7+ (a tensor-parallel server's rank 3, 2025): the status line in 2.7's words, the
# dump signal from this rank, the collective's Python call from the flight recorder.
TORCH27 = """\
[rank3]:[E710 18:00:32.426182607 ProcessGroupNCCL.cpp:757] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=59958, OpType=ALLREDUCE, NumelIn=8388608, NumelOut=8388608, Timeout(ms)=1800000) ran for 1800077 milliseconds before timing out.
[rank3]:[E710 18:00:32.426302794 ProcessGroupNCCL.cpp:2395] [PG ID 0 PG GUID 0(default_pg) Rank 3]  failure detected by watchdog at work sequence id: 59958 PG status: last enqueued work: 59998, last completed work: 59957
[rank3]:[E710 18:00:32.427312432 ProcessGroupNCCL.cpp:801] Stack trace of the failed collective: 
#0 all_reduce from /usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py:3174
#1 wrapper from /usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py:83
#2 _all_reduce from /srv/app/models/tensor_parallel.py:847
#3 forward from /srv/app/models/llama.py:212

[rank3]:[E710 18:00:32.427401112 ProcessGroupNCCL.cpp:2106] [PG ID 0 PG GUID 0(default_pg) Rank 3] First PG on this rank to signal dumping.
[rank3]:[E710 18:00:33.101844519 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: 59998, last completed NCCL work: 59957.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. 
[rank3]:[E710 18:00:33.101990011 ProcessGroupNCCL.cpp:1536] [PG ID 0 PG GUID 0(default_pg) Rank 3] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1
"""

# torch 2.3 under vLLM's multiprocessing worker (https://github.com/vllm-project/vllm/issues/6042 has
# the same lines behind Ray's tag): the status line in 2.3's words, `[PG 1 Rank 1]`
VLLM_23 = """\
(VllmWorkerProcess pid=4009) [E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=158046, OpType=GATHER, NumelIn=2867200, NumelOut=0, Timeout(ms)=600000) ran for 600027 milliseconds before timing out.
(VllmWorkerProcess pid=4009) [E ProcessGroupNCCL.cpp:1537] [PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last completed NCCL work: 158045.
(VllmWorkerProcess pid=4009) [E ProcessGroupNCCL.cpp:577] [Rank 1] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
"""

# https://github.com/meta-pytorch/torchtune/pull/2651 (2025): a terminal's copy, each line cut at
# 166 columns and padded with spaces, the flight recorder off; one rank's lines of it
TERMINAL = [
    "[rank1]:[E430 05:09:48.893980017 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=9387, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600073 "
    "milliseconds before timing out.",
    "[rank1]:[E430 05:09:48.894055132 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID 0(default_pg) Rank 1]  failure "
    "detected by watchdog at work sequence id: 9387 PG status: last enqueued work: 9387, last completed work: 9386",
    "[rank1]:[E430 05:09:48.894066852 ProcessGroupNCCL.cpp:670] Stack trace of the failed collective not found, "
    "potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a "
    "non-zero value.",
]


def triage(tmp_path, text: str, fmt: str = "json"):
    return triage_text(tmp_path, text, "rank.log", fmt)


def waiting(doc: dict) -> dict:
    (lag,) = doc["hang"]["collectives"]
    assert lag["ahead"] == [lag["waiting"]["rank"]] and lag["behind"] == []
    return lag["waiting"]


def test_torch27_rank_says_who_waits_where_on_what_and_that_the_other_is_unknown(tmp_path):
    doc = triage(tmp_path, TORCH27)
    h = doc["hang"]
    assert (h["state"], h["level"]) == ("hung", "likely")
    assert h["processes"] == []          # printTraceback's `#0 all_reduce from file:line` is no gdb stack
    w = waiting(doc)
    # the timeout line: rank, collective, number, size, timeout, how long
    assert (w["rank"], w["pid"], w["collective"], w["seq"], w["numel_in"], w["numel_out"], w["timeout_ms"],
            w["ran_ms"]) == (3, None, "allreduce", 59958, 8388608, 8388608, 1800000, 1800077)
    # the 2.7 status line: the group and how far it got; the dump signal; the call stack
    assert (w["process_group"], w["last_enqueued"], w["last_completed"], w["dump_from"], w["flight_recorder_off"]) \
        == ("default_pg", 59998, 59957, "this local rank", False)
    assert w["call"][0].endswith("torch/distributed/distributed_c10d.py:3174 all_reduce")
    assert w["call"][2:] == ["/srv/app/models/tensor_parallel.py:847 _all_reduce", "/srv/app/models/llama.py:212 forward"]
    s = h["summary"]
    assert "rank 3 (its pid is not in the log) waits in collective allreduce #59958 of process group default_pg " \
           "for 1800.077 s (timeout 1800 s), 8,388,608 elements in" in s
    assert "#59958 is enqueued on its GPU stream and not completed" in s
    assert "called from /srv/app/models/tensor_parallel.py:847 _all_reduce" in s
    (who,) = h["waits_on"]
    assert who.startswith("rank 3 waits for a rank of process group default_pg that never joined allreduce #59958: "
                          "which one is unknown from one rank's log")
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE=2000" in who and "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in who
    # the hang claim carries it to the verdict; no kernel is named
    (c,) = [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "hang-stuck"]
    assert c["kernel"] is None and "unknown from one rank's log" in c["why"] and "allreduce #59958" in c["why"]
    assert doc["verdict"]["kernel"] is None and "not hung" not in json.dumps(doc)


def test_the_report_has_the_hang_section_and_what_to_collect(tmp_path):
    md = triage(tmp_path, TORCH27, "md")
    hang = md.split("## Hang analysis")[1].split("\n## ")[0]
    assert "**hung** (likely): one rank's watchdog: rank 3" in hang
    assert hang.count("waits in collective allreduce #59958") == 1          # the summary once, not again as a bullet
    steps = md.split("## Next steps")[1].split("\n## ")[0]
    assert "To name the rank that never joined the collective, collect every rank's log" in steps


def test_torch23_worker_tag_gives_the_pid_and_the_group(tmp_path):
    w = waiting(triage(tmp_path, VLLM_23))
    assert (w["rank"], w["pid"], w["collective"], w["seq"], w["numel_in"], w["numel_out"], w["process_group"],
            w["last_enqueued"], w["last_completed"]) == (1, 4009, "gather", 158046, 2867200, 0, "1", 158046, 158045)


# (a worker tag outside torchrun's `[rankN]:` is kept for the runtime reader: normalize's _tag)
def test_ray_tag_before_torchruns_rank_tag_keeps_the_pid(tmp_path):
    text = "".join("(RayWorkerWrapper pid=4009) [rank1]:" + ln.split(") ", 1)[1] + "\n"
                   for ln in VLLM_23.splitlines())
    assert waiting(triage(tmp_path, text))["pid"] == 4009


def test_a_terminal_copy_cut_and_padded_keeps_the_facts_and_the_recorder_off(tmp_path):
    text = "".join(ln[k:k + 166].ljust(166) + "\n" for ln in TERMINAL for k in range(0, len(ln), 166))
    assert text.count("\n") == 6 and "NumelIn=1, N\numelOut" in text       # cut as the thread shows it
    doc = triage(tmp_path, text)
    w = waiting(doc)
    assert (w["rank"], w["seq"], w["numel_in"], w["ran_ms"], w["last_enqueued"], w["last_completed"],
            w["flight_recorder_off"]) == (1, 9387, 1, 600073, 9387, 9386, True)
    assert "no flight record was kept (TORCH_NCCL_TRACE_BUFFER_SIZE is 0)" in doc["hang"]["summary"]


def test_the_timeout_line_alone_quoted(tmp_path):
    line = ("> [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12345, OpType=ALLREDUCE, "
            "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n")
    doc = triage(tmp_path, line)
    w = waiting(doc)
    assert (w["rank"], w["seq"], w["numel_in"], w["ran_ms"], w["timeout_ms"], w["process_group"]) == \
        (3, 12345, 1048576, 600012, 600000, None)
    (f,) = doc["faults"]
    assert (f["detail"]["numel_in"], f["detail"]["numel_out"]) == (1048576, 1048576)
    assert "unknown from one rank's log" in doc["verdict"]["why"]


# A rank that did not time out, only got another rank's dump signal (getNCCLWatchdogTimeoutErrorMsg's
# `from rank N`): https://github.com/lsdefine/simple_GRPO/issues/46 (2025), every collective it enqueued
# completed; https://github.com/OpenRLHF/OpenRLHF/issues/1126 (2025), one in flight.
SIGNAL = ("[rank5]:[E723 01:58:45.667329643 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 5] Received "
          "a dump signal due to a collective timeout from  rank 2 and we will try our best to dump the debug info. Last "
          "enqueued NCCL work: {enq}, last completed NCCL work: {done}.This is most likely caused by incorrect usages of "
          "collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the "
          "scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other "
          "reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. \n"
          "[rank5]:[E723 01:58:45.667749122 ProcessGroupNCCL.cpp:1533] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
          "ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1\n")


def signalled(doc: dict) -> str:
    (c,) = [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "watchdog-timeout"]
    assert c["kernel"] is None and doc["verdict"]["kernel"] is None
    return c["why"]


def test_a_rank_that_only_got_the_dump_signal_and_has_nothing_in_flight(tmp_path):
    doc = triage(tmp_path, SIGNAL.format(enq=136, done=136))
    why = signalled(doc)
    assert why.startswith("a collective timed out on rank 2, a hang: its watchdog signalled every rank to dump")
    assert ("rank 5 had completed every collective it enqueued of process group default_pg (last enqueued 136, last "
            "completed 136): it waits in none of them, so it may be the rank rank 2 waits for") in why
    assert "no GPU fault" not in doc["verdict"]["why"] and "TORCH_NCCL_TRACE_BUFFER_SIZE=2000" in doc["verdict"]["why"]
    assert any("Another rank's collective timed out" in s for s in doc["next_steps"])


def test_a_signalled_rank_with_a_collective_in_flight(tmp_path):
    why = signalled(triage(tmp_path, SIGNAL.format(enq=460631, done=460630)))
    assert ("rank 5 has work 460631 of process group default_pg enqueued and not completed (last enqueued 460631): "
            "it waits too") in why


def test_its_own_timeout_makes_no_second_claim(tmp_path):
    doc = triage(tmp_path, TORCH27)          # `from this local rank`: the hang's own record says it
    assert len([c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "watchdog-timeout"]) == 1


def test_several_timeouts_of_one_rank_start_from_the_first_reported(tmp_path):
    # https://github.com/pytorch/pytorch/issues/118369 (2024): one rank's watchdog reports three works, their
    # numbers not in order (several process groups number their own)
    line = ("[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={}, "
            "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for {} milliseconds before timing out.\n")
    doc = triage(tmp_path, line.format(96120, 25624887) + line.format(96117, 25625613) + line.format(96125, 25625593))
    w = waiting(doc)
    assert (w["seq"], w["ran_ms"], w["numel_in"]) == (96120, 25624887, None)
    assert "2 more timed out after it (allreduce #96117, allreduce #96125)" in doc["hang"]["summary"]


def test_the_watchdogs_rethrow_alone_names_the_group(tmp_path):
    # https://github.com/sgl-project/sglang/issues/1693 (2024): c10's terminate message, the only line of it
    text = ("terminate called after throwing an instance of 'c10::DistBackendError'\n"
            "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, "
            "NumelOut=152064, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
            "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most "
            "recent call first):\n")
    w = waiting(triage(tmp_path, text))
    assert (w["rank"], w["collective"], w["seq"], w["numel_in"], w["numel_out"], w["process_group"], w["ran_ms"]) == \
        (5, "_allgather_base", 9141, 19008, 152064, "3", 600020)


def test_the_wait_keeps_every_digit_of_its_milliseconds(tmp_path):
    doc = triage(tmp_path, TORCH27)
    (f,) = doc["faults"]
    assert f["detail"]["reason"] == "ALLREDUCE #59958 waited 1800.077 s"      # `ran for 1800077 milliseconds`
    (c,) = [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "watchdog-timeout"]
    assert "rank 3 waited in ALLREDUCE #59958 for 1800.077 s (timeout 1800 s)" in c["why"]
