"""NCCL/c10d watchdog lines the way they reach an issue: glued to the line before, a terminal's
cut inside a number, a mail client's wrap (its soft breaks keep their space), torchrun's
`[rankN]:[E...]` prefix; and the heartbeat monitor's `watchdog got stuck for N seconds`. The facts
are the line's own: ProcessGroupNCCL.cpp's `Watchdog caught collective operation timeout:
WorkNCCL(SeqNum=N, OpType=OP, ..., Timeout(ms)=T) ran for M milliseconds before timing out.` and
its HeartbeatMonitor's `{logPrefix}ProcessGroupNCCL's watchdog got stuck for N seconds without making
progress in monitoring enqueued collectives.`"""

from __future__ import annotations

import textwrap

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.triage import build

TIMEOUT = ("[rank6]:[E1201 10:00:00.123456 1234 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:616] [Rank 6] "
           "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12345, OpType=ALLREDUCE, NumelIn=1048576, "
           "NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")
WANT = ("collective-timeout", 12345, "ALLREDUCE", 6, 600000, 600012)
# a public thread's paste (2025): the rank's line wrapped at its spaces, each break keeping its space
FLOWED = ("[rank1]:[E1111 17:01:37] [Rank 1] Watchdog caught collective operation timeout: \n"
          "WorkNCCL(SeqNum=14863, OpType=ALLREDUCE, NumelIn=14845952, NumelOut=14845952, Timeout(ms)=1800000) \n"
          "ran for 1800048 milliseconds before timing out.\n")
STUCK = ("[rank25]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 25] Heartbeat monitor timed out! Process will be "
         "terminated after dumping debug info. workMetaList_.size()=2\n"
         "[rank25]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 25] [PG 0 Rank 25] ProcessGroupNCCL's watchdog got stuck "
         "for 600 seconds without making progress in monitoring enqueued collectives. This typically indicates a "
         "NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread holding the GIL inside "
         "a CUDA api, or other deadlock-prone behaviors.\n")


def facts(text: str) -> list[tuple]:
    doc = to_json(build(Inputs(files=[InputFile("rank.log", text.encode())])))
    out = []
    for f in doc["faults"]:
        d = f["detail"]
        if f["kind"] == "watchdog-stuck":
            out.append((f["kind"], d.get("stuck_s"), d.get("rank")))
        else:
            out.append((f["kind"], d.get("seq"), d.get("collective"), d.get("rank"), d.get("timeout_ms"), d.get("ran_ms")))
    return out


def test_a_timeout_glued_to_the_line_before_keeps_its_facts():
    before = "INFO 12-01 10:00:00 [engine.py:310] Avg prompt throughput: 0.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, "
    assert facts(before + "GPU KV cache usage: 12.5%." + TIMEOUT + "\n") == [WANT]


def test_a_terminal_cut_inside_the_timeout_number():
    # a 79-column terminal cuts this line three times, the third inside `Timeout(ms)=600000`
    lines = [TIMEOUT[k:k + 79] for k in range(0, len(TIMEOUT), 79)]
    assert lines[2].endswith("Timeout(ms)=6000") and lines[3].startswith("00) ran for")
    assert facts("\n".join(lines) + "\n") == [WANT]


def test_a_mail_wrap_with_soft_breaks_keeps_the_facts():
    assert facts(FLOWED) == [("collective-timeout", 14863, "ALLREDUCE", 1, 1800000, 1800048)]


def test_a_wrap_at_72_columns_keeps_the_facts():
    text = "\n".join(textwrap.wrap(TIMEOUT, 72, break_long_words=False, break_on_hyphens=False)) + "\n"
    assert facts(text) == [WANT]


def test_the_heartbeat_monitors_stuck_watchdog_is_a_hang_symptom():
    assert facts(STUCK) == [("watchdog-stuck", 600, 25)]
    wrapped = "\n".join("\n".join(textwrap.wrap(ln, 72, break_long_words=False, break_on_hyphens=False))
                        for ln in STUCK.splitlines()) + "\n"
    assert facts(wrapped) == [("watchdog-stuck", 600, 25)]
    doc = to_json(build(Inputs(files=[InputFile("rank.log", STUCK.encode())])))
    assert doc["verdict"]["kernel"] is None
    assert "stuck NCCL watchdog" in doc["verdict"]["why"]
    # heard as a hang claim: whose watchdog, for how long (the line's `Rank 25`, `600 seconds`), no kernel
    hang = [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "watchdog-timeout"]
    assert len(hang) == 1 and hang[0]["kernel"] is None, doc["verdict"]["claims"]
    assert "rank 25's watchdog made no progress for 600 s" in hang[0]["why"]
