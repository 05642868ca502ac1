"""Host stacks and the hang verdict on real processes: py-spy and gdb run here on programs the
tests start (a Python program with a thread blocked on a lock, one in time.sleep, one in accept,
one in queue.get ...; a C program spinning in a function named like the CUDA runtime's stream
wait), the parsers read what the tools printed, and each classification is checked against the
line of the program it must point to."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.analyze.collectives import lagging_ranks
from faultkit.analyze.hang import analyse
from faultkit.analyze.waits import classify
from faultkit.capture import stacks as collector
from faultkit.capture.hang_check import sample
from faultkit.cli import main
from faultkit.export.hang_text import verdict_text
from faultkit.hang_model import ProcessStacks, StackFrame, ThreadStack
from faultkit.ingest.flight_recorder import parse_flight_record, watchdog_collectives
from faultkit.ingest.stacks import parse_faulthandler, parse_gdb_backtraces, parse_pyspy_json, parse_pyspy_text

WAITER = '''
import os, queue, socket, subprocess, sys, threading, time
lock = threading.Lock(); lock.acquire()
q = queue.Queue()
ev = threading.Event()
def locked():
    lock.acquire()  # LOCK
def sleeper():
    time.sleep(1000)  # SLEEP
def server():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
    s.accept()  # ACCEPT
def getter():
    q.get()  # QUEUE
def waiter():
    ev.wait()  # EVENT
def parent():
    subprocess.Popen(["sleep", "1000"]).wait()  # CHILD
names = sys.argv[1].split(",")
for f in (locked, sleeper, server, getter, waiter, parent):
    if f.__name__ in names:
        threading.Thread(target=f, name=f.__name__).start()
time.sleep(0.3)
print("ready", flush=True)
time.sleep(1000)  # MAIN
'''

SPINNER = r'''
/* A host thread spinning in a function named like the CUDA runtime's stream wait. */
#include <stdio.h>
volatile unsigned long spins;
__attribute__((noinline)) int cudaStreamSynchronize(void *stream) {
    (void)stream;
    for (;;) spins++;  /* SPIN */
    return 0;
}
int main(void) {
    puts("ready"); fflush(stdout);
    return cudaStreamSynchronize(0);  /* CALL */
}
'''

ROOT_README = Path(__file__).resolve().parent.parent / "README.md"
ALL = "locked,sleeper,server,getter,waiter,parent"
IDLE = "sleeper,server,getter,waiter"


def line_of(text: str, mark: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if ln.rstrip().endswith(mark))


class Started:
    def __init__(self, cmd, source: Path, env: dict | None = None):
        self.source = source
        self.text = source.read_text()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                                     env={**os.environ, **(env or {})})
        assert self.proc.stdout.readline().strip() == b"ready"
        self.pid = self.proc.pid

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)       # our own session: the program and its child
        except ProcessLookupError:
            pass
        self.proc.wait()


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    d = tmp_path_factory.mktemp("hang")
    py = d / "waiter.py"
    py.write_text(WAITER)
    started = {"all": Started([sys.executable, str(py), ALL], py),
               "idle": Started([sys.executable, str(py), IDLE], py, {"RANK": "3"})}
    if shutil.which("gcc"):
        c = d / "fake_sync.c"
        c.write_text(SPINNER)
        subprocess.run(["gcc", "-O0", "-g", "-o", str(d / "fake_sync"), str(c)], check=True)
        started["spin"] = Started([str(d / "fake_sync")], c)
    yield started
    for s in started.values():
        s.stop()


def read_or_skip(src, pid: int, deadline_s: float) -> collector.RawStacks:
    """The tool's own output, or a skip that says why the tool cannot read processes here."""
    if src.missing():
        pytest.skip(src.missing())
    raw = src.take(pid, deadline_s)
    if raw.problem and ("ermission" in raw.problem or "ptrace" in raw.problem):
        pytest.skip(f"{src.name} cannot read processes here: {raw.problem}")
    assert raw.problem is None, raw.problem
    return raw


def pyspy_or_skip(pid: int, native: bool = True) -> collector.RawStacks:
    return read_or_skip(collector.PySpySource(native=native), pid, 20)


def gdb_or_skip(pid: int) -> collector.RawStacks:
    return read_or_skip(collector.GdbSource(), pid, 30)


def thread(ps: ProcessStacks, name: str) -> ThreadStack:
    return next(t for t in ps.threads if t.name == name)


# ---------------- parsers on the tools' real output ----------------

def test_pyspy_json_native_threads_and_lines(programs):
    p = programs["all"]
    ps = parse_pyspy_json(pyspy_or_skip(p.pid).text, p.pid)
    assert {t.name for t in ps.threads} >= {"MainThread", *ALL.split(",")}
    lk = thread(ps, "locked")
    own = next(f for f in lk.frames if f.function == "locked")
    assert (own.file, own.line, own.native) == (str(p.source), line_of(p.text, "# LOCK"), False)
    assert any(f.native and f.library and f.library.startswith("libpython") for f in lk.frames)
    assert lk.tid in {int(t) for t in os.listdir(f"/proc/{p.pid}/task")}


def test_pyspy_text_is_read_like_its_json(programs):
    p = programs["all"]
    src = collector.PySpySource(native=False)
    pyspy_or_skip(p.pid, native=False)
    text = subprocess.run([src.binary, "dump", "--pid", str(p.pid)], capture_output=True, text=True, timeout=30).stdout
    ps = parse_pyspy_text(text)
    assert ps.pid == p.pid and str(p.source) in ps.command
    sl = thread(ps, "sleeper")
    assert (sl.frames[0].function, sl.frames[0].line) == ("sleeper", line_of(p.text, "# SLEEP"))
    assert sl.active is False                    # py-spy prints "(idle)"


def test_gdb_native_frame_of_the_c_program(programs):
    if "spin" not in programs:
        pytest.skip("gcc is not installed")
    p = programs["spin"]
    ps = parse_gdb_backtraces(gdb_or_skip(p.pid).text, p.pid)
    assert [t.tid for t in ps.threads] == [p.pid]
    top = ps.threads[0].frames[0]
    assert (top.function, Path(top.file).name, top.line) == ("cudaStreamSynchronize", "fake_sync.c",
                                                             line_of(p.text, "/* SPIN */"))
    assert ps.threads[0].frames[1].function == "main"


def test_faulthandler_dump_of_a_real_process(tmp_path):
    prog = tmp_path / "fh.py"
    prog.write_text("import faulthandler, sys, threading, time\n"
                    "def nap():\n"
                    "    time.sleep(30)  # NAP\n"
                    "threading.Thread(target=nap, daemon=True).start(); time.sleep(0.3)\n"
                    "faulthandler.dump_traceback(sys.stdout, all_threads=True)\n")
    out = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=60).stdout
    ps = parse_faulthandler(out, 1)
    assert len(ps.threads) == 2
    nap = next(t for t in ps.threads if t.frames and t.frames[0].function == "nap")
    assert (nap.frames[0].file, nap.frames[0].line) == (str(prog), 3)
    assert classify(nap).where.line == 3


def test_bad_tool_output_is_a_message_not_a_crash():
    assert parse_pyspy_json("Error: Failed to find python version", 5).problems[0].startswith("py-spy output is not")
    assert parse_gdb_backtraces("ptrace: Operation not permitted.\n", 5).problems == [
        "ptrace: Operation not permitted."]
    assert parse_faulthandler("", 5).threads == []


# ---------------- what each thread waits on ----------------

@pytest.mark.parametrize("name,category,kind,mark", [
    ("locked", "host", "lock", "# LOCK"), ("sleeper", "host", "sleep", "# SLEEP"),
    ("server", "host", "socket", "# ACCEPT"), ("getter", "host", "queue", "# QUEUE"),
    ("waiter", "host", "condition", "# EVENT"), ("parent", "host", "subprocess", "# CHILD"),
    ("MainThread", "host", "sleep", "# MAIN")])
def test_each_host_wait_is_named_with_its_line(programs, name, category, kind, mark):
    p = programs["all"]
    ps = parse_pyspy_json(pyspy_or_skip(p.pid).text, p.pid)
    w = classify(thread(ps, name))
    assert (w.category, w.kind) == (category, kind)
    assert (w.where.file, w.where.line) == (str(p.source), line_of(p.text, mark))


def test_fake_cuda_wait_through_the_collector_falls_back_to_gdb(programs):
    if "spin" not in programs:
        pytest.skip("gcc is not installed")
    p = programs["spin"]
    gdb_or_skip(p.pid)
    d = collector.take(p.pid)
    assert d.stacks.source == "gdb"
    assert d.stacks.problems == ["not a Python process: native stacks only"]    # py-spy said so; gdb read it
    w = classify(d.stacks.threads[0])
    assert (w.category, w.kind, w.frame.function) == ("gpu", "synchronize", "cudaStreamSynchronize")
    assert d.stacks.threads[0].state == "R"                                      # it spins


# A ROCr signal wait as public reports show it (ROCm/ROCR-Runtime#96 "core::Signal::WaitAny never
# get the signal"; ggml-org/llama.cpp#13100: hsakmt_ioctl <- hsaKmtWaitOnMultipleEvents_Ext): the
# innermost frames are an ioctl, the GPU wait is several frames out.
ROCR_WAIT = """\
Thread 1 (Thread 0x7ffff7e8a740 (LWP 21801) "server"):
#0  __GI___ioctl (fd=fd@entry=3, request=request@entry=3222817548) at ../sysdeps/unix/sysv/linux/ioctl.c:36
#1  0x00007fffd6349400 in hsakmt_ioctl (fd=3, request=request@entry=3222817548, arg=arg@entry=0x7fffd65b5b10) at libhsakmt/src/libhsakmt.c:13
#2  0x00007fffd6341f1f in hsaKmtWaitOnMultipleEvents_Ext (event_age=0x7fffd65b5c18, Milliseconds=15, WaitOnAll=true, NumEvents=<optimized out>, Events=0x7fffd65b5bc8) at libhsakmt/src/events.c:416
#3  0x00007fffd62c1a2e in rocr::core::Signal::WaitAny (signal_count=1, hsa_signals=0x7fffd65b5d00, conds=0x7fffd65b5d10, values=0x7fffd65b5d20, timeout=18446744073709551615, wait_hint=HSA_WAIT_STATE_BLOCKED, satisfying_value=0x7fffd65b5d30) at runtime/hsa-runtime/core/runtime/signal.cpp:324
#4  0x00007fffd62a6c1c in rocr::AMD::hsa_amd_signal_wait_any (signal_count=1, hsa_signals=0x7fffd65b5d00, conds=0x7fffd65b5d10, values=0x7fffd65b5d20, timeout_hint=18446744073709551615, wait_hint=HSA_WAIT_STATE_BLOCKED, satisfying_value=0x7fffd65b5d30) at runtime/hsa-runtime/core/runtime/hsa_ext_amd.cpp:587
#5  0x00007ffff6a1b5e2 in amd::roc::VirtualGPU::releaseGpuMemoryFence(bool) () from /opt/rocm/lib/libamdhip64.so.6
#6  0x00007ffff6a1c9d0 in hipDeviceSynchronize () from /opt/rocm/lib/libamdhip64.so.6
#7  0x000055555555a1b3 in main () at server.cpp:88
"""


def test_rocr_signal_wait_shape_is_a_gpu_wait():
    ps = parse_gdb_backtraces(ROCR_WAIT, 21801)
    w = classify(ps.threads[0])
    assert (w.category, w.kind) == ("gpu", "rocr-signal-wait")
    assert w.frame.function == "hsaKmtWaitOnMultipleEvents_Ext"          # the innermost GPU wait frame
    assert (w.where.function, w.where.file, w.where.line) == ("main", "server.cpp", 88)     # the program's call


def frames(*names_files):
    return [StackFrame(n, f, ln, None, native=f is None) for n, f, ln in names_files]


@pytest.mark.parametrize("stack,category,kind,background", [
    # torch.cuda.synchronize() as py-spy names it, no native frames
    (frames(("synchronize", "/venv/lib/python3.12/site-packages/torch/cuda/__init__.py", 1040),
            ("step", "/srv/serve.py", 88)), "gpu", "torch.cuda.synchronize", False),
    # .item(): the native frames of a tensor read back to the host
    (frames(("cuStreamSynchronize", None, None), ("at::native::_local_scalar_dense_cuda(at::Tensor const&)", None, None),
            ("step", "/srv/serve.py", 90)), "gpu", "synchronize", False),
    (frames(("poll", None, None), ("ncclProxyProgress(void*)", None, None)), "collective", "nccl-proxy", True),
    (frames(("pthread_cond_timedwait", None, None),
            ("c10d::ProcessGroupNCCL::Watchdog::run()", None, None)), "collective", "watchdog", True),
    # barrier(): a device synchronize under a collective call is the collective's wait
    (frames(("cudaDeviceSynchronize", None, None), ("barrier", "/venv/lib/python3.12/site-packages/torch/"
                                                    "distributed/distributed_c10d.py", 4700),
            ("main", "/srv/train.py", 12)), "collective", "collective-call", False),
    (frames(("hipStreamQuery", None, None), ("loop", "/srv/poll.py", 3)), "gpu", "query", False),
    (frames(("epoll_wait", None, None), ("select", "/usr/lib/python3.12/selectors.py", 468),
            ("_run_once", "/usr/lib/python3.12/asyncio/base_events.py", 1949),
            ("run_forever", "/usr/lib/python3.12/asyncio/base_events.py", 641),
            ("main", "/srv/api.py", 30)), "host", "event-loop", False),
    (frames(("zmq_poll", None, None), ("poll", "/venv/lib/python3.12/site-packages/zmq/sugar/poll.py", 106),
            ("event_loop", "/venv/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", 700)),
     "host", "message-queue", False),
])
def test_wait_rules(stack, category, kind, background):
    w = classify(ThreadStack(1, "t", stack))
    assert (w.category, w.kind, w.background) == (category, kind, background)


def test_a_thread_on_a_cpu_outside_any_wait_is_running():
    t = ThreadStack(1, "t", frames(("compute", "/srv/x.py", 5)), active=True)
    assert classify(t).category == "running"
    # py-spy's `idle` (the GIL released) in the program's own line: a call Python does not show
    w = classify(ThreadStack(1, "t", frames(("compute", "/srv/x.py", 5)), active=False))
    assert (w.category, w.kind) == ("host", "blocked-call")
    # a tool that does not say (faulthandler): nothing is known
    assert classify(ThreadStack(1, "t", frames(("compute", "/srv/x.py", 5)))).category == "unknown"


# ---------------- two samples: stuck, blocked, idle ----------------

def two_samples(pid, interval=0.5):
    return sample([pid], 2, interval, 20).samples


def test_spinning_fake_gpu_wait_in_two_samples_is_stuck(programs):
    if "spin" not in programs:
        pytest.skip("gcc is not installed")
    p = programs["spin"]
    gdb_or_skip(p.pid)
    hf = analyse(two_samples(p.pid), 0.5)
    assert (hf.state, hf.level) == ("hung", "likely")
    assert [(t.pid, t.wait.kind, t.unchanged) for t in hf.stuck] == [(p.pid, "synchronize", True)]
    # where: the program's own call of the wait
    assert f"fake_sync.c:{line_of(p.text, '/* CALL */')} main" in hf.summary
    assert hf.stuck[0].cpu_ticks > 0                    # it burned CPU between the samples: spinning


def test_idle_server_is_idle_not_hung(programs):
    p = programs["idle"]
    pyspy_or_skip(p.pid)
    hf = analyse(two_samples(p.pid), 0.5)
    assert hf.state == "idle" and hf.level is None and not hf.stuck
    assert hf.summary.startswith("every thread waits for work")
    assert {t.wait.kind for t in hf.processes[0].threads} == {"sleep", "socket", "queue", "condition"}
    assert (hf.processes[0].rank, hf.processes[0].ppid) == (3, os.getpid())     # its RANK, read from /proc


def test_lock_held_forever_is_a_possible_host_hang(programs):
    p = programs["all"]
    pyspy_or_skip(p.pid)
    hf = analyse(two_samples(p.pid), 0.5)
    assert (hf.state, hf.level) == ("hung", "candidates")       # the judge's vocabulary: one explanation
    assert '"locked" waits in ' in hf.summary and f"waiter.py:{line_of(p.text, '# LOCK')} locked" in hf.summary


def test_a_gpu_wait_that_moves_is_not_stuck():
    a = ProcessStacks(7, "x", [ThreadStack(8, "main", frames(("cudaStreamSynchronize", None, None),
                                                             ("step", "/srv/a.py", 10)))])
    b = ProcessStacks(7, "x", [ThreadStack(8, "main", frames(("cudaStreamSynchronize", None, None),
                                                             ("step", "/srv/a.py", 14)))])
    hf = analyse([[a], [b]], 2.0)
    assert hf.state == "busy" and not hf.stuck
    once = analyse([[a]])      # one sample never says "not hung": where it waits, and how to take a second
    assert once.state == "one-sample" and "waits in cudaStreamSynchronize (gpu: " in once.summary
    assert "at /srv/a.py:10 step" in once.summary and "take a second sample" in once.summary
    assert "not hung" not in verdict_text(once)


def test_rank_in_collective_waits_on_rank_stuck_on_gpu():
    coll = frames(("ncclAllReduce", None, None), ("all_reduce", "/t/distributed_c10d.py", 2800),
                  ("train", "/srv/train.py", 40))
    gpu = frames(("hipStreamSynchronize", None, None), ("train", "/srv/train.py", 37))
    r0 = ProcessStacks(100, "x", [ThreadStack(100, "MainThread", coll)], rank=0)
    r1 = ProcessStacks(101, "x", [ThreadStack(101, "MainThread", gpu)], rank=1)
    hf = analyse([[r0, r1], [r0, r1]], 3.0)
    # issue 38: the rank stuck on its GPU is the hang; the one in the collective waits on it (not stuck itself)
    assert hf.state == "hung" and {t.pid for t in hf.stuck} == {101} and hf.summary.startswith("pid 101 (rank 1)")
    assert {p.pid: p.state for p in hf.processes} == {100: "waiting", 101: "stuck"}
    assert any(w.startswith("pid 100 (rank 0) waits in ncclAllReduce") and "pid 101 (rank 1) is stuck on its GPU "
               "in hipStreamSynchronize" in w and "/srv/train.py:37 train" in w for w in hf.waits_on)


# ---------------- collectives: flight recorder and watchdog ----------------

def fr_pickle(entries, version="2.10") -> bytes:
    return pickle.dumps({"version": version, "pg_config": {"0": {"name": "0", "ranks": "[0, 1, 2]"}},
                         "pg_status": {}, "entries": entries}, protocol=2)


def fr_entry(seq, state, op="nccl:all_reduce", pg=("0", "default_pg")):
    return {"record_id": seq, "pg_id": 0, "process_group": pg, "collective_seq_id": seq, "p2p_seq_id": 0,
            "op_id": seq, "profiling_name": op, "time_created_ns": 1, "input_sizes": [[4]], "state": state,
            "is_p2p": False, "retired": state == "completed", "timeout_ms": 600000}


def test_flight_records_name_the_rank_that_never_issued_the_collective():
    ranks = [parse_flight_record(fr_pickle([fr_entry(s, "completed") for s in (1, 2, 3)] + [fr_entry(4, "started")]),
                                 f"collectives/nccl_trace_rank_{r}") for r in (0, 2)]
    ranks.append(parse_flight_record(fr_pickle([fr_entry(s, "completed") for s in (1, 2, 3)]),
                                     "collectives/nccl_trace_rank_1"))
    assert [r.rank for r in ranks] == [0, 2, 1] and all(not r.problems for r in ranks)
    lag = lagging_ranks(ranks)
    assert [(g.behind, g.ahead, g.ahead_at.seq, g.behind_at[1].seq) for g in lag] == [([1], [0, 2], 4, 3)]
    hf = analyse([], lags=lag)
    assert (hf.state, hf.level) == ("hung", "likely") and "rank 1 at 3" in hf.summary


def test_flight_record_scheduled_but_not_started_is_behind_on_its_gpu():
    r0 = parse_flight_record(fr_pickle([fr_entry(7, "started")]), "nccl_trace_rank_0")
    r1 = parse_flight_record(fr_pickle([fr_entry(7, "scheduled")]), "nccl_trace_rank_1")
    (lag,) = lagging_ranks([r0, r1])
    assert lag.behind == [1] and "still only scheduled on ranks 1" in lag.why


def test_torch_list_builders_are_read_and_anything_else_is_refused(tmp_path):
    # torch's C++ pickler writes typed lists as GLOBAL torch.jit._pickle build_intlist
    body = fr_pickle([fr_entry(1, "completed")])
    builder = b"ctorch.jit._pickle\nbuild_intlist\n(]q\x00(K\x04K\x05etR."
    from faultkit.ingest.flight_recorder import SafeUnpickler
    assert SafeUnpickler(io.BytesIO(b"\x80\x02" + builder)).load() == [4, 5]
    marker = tmp_path / "pwned"
    evil = b"\x80\x02cos\nsystem\n(X" + len(f"touch {marker}").to_bytes(4, "little") + \
        f"touch {marker}".encode() + b"tR."
    rc = parse_flight_record(evil, "nccl_trace_rank_3")
    assert not marker.exists()
    assert rc.rank == 3 and rc.entries == [] and "os.system" in rc.problems[0]
    assert parse_flight_record(b"\x80\x02garbage", "x_1").problems[0].startswith("x_1: not a readable flight record")
    assert len(parse_flight_record(body, "r_0").entries) == 1


def test_watchdog_lines_give_each_ranks_sequence_number():
    text = ("[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=721, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 "
            "milliseconds before timing out.\n"
            "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=720, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600007 "
            "milliseconds before timing out.\n")
    ranks = watchdog_collectives(text, "server.log")
    assert [(r.rank, r.entries[0].seq) for r in ranks] == [(0, 721), (1, 720)]
    (lag,) = lagging_ranks(ranks)
    assert (lag.behind, lag.ahead, lag.ahead_at.seq) == ([1], [0], 721)


# ---------------- as a user: the CLI ----------------

def test_cli_dump_text_and_json(programs):
    p = programs["all"]
    pyspy_or_skip(p.pid)
    res = CliRunner().invoke(main, ["dump", "--pid", str(p.pid), "--interval", "0.5s"])
    assert res.exit_code == 0, res.output
    assert f"Process {p.pid}" in res.output and "verdict: hung (candidates)" in res.output
    assert ' (sleeping) "locked"  [PyThread_acquire_lock_timed (host: lock), unchanged]' in res.output
    res = CliRunner().invoke(main, ["dump", "--pid", str(p.pid), "--samples", "1", "--format", "json"])
    d = json.loads(res.output)
    assert d["schema"] == "faultkit.dump/1" and len(d["samples"]) == 1
    kinds = {t["name"]: t["kind"] for t in d["verdict"]["processes"][0]["threads"]}
    assert kinds["server"] == "socket" and kinds["getter"] == "queue"
    # the child `sleep` of the `parent` thread is read too (children are included by default)
    assert len(d["verdict"]["processes"]) == 2


def test_cli_dump_of_no_such_process():
    res = CliRunner().invoke(main, ["dump", "--pid", "999999999"])
    assert res.exit_code == 2 and "no such process: 999999999" in res.output
    res = CliRunner().invoke(main, ["dump"])
    assert res.exit_code == 2 and "give --pid PID" in res.output


# ---------------- capture: --hang-after asks the stacks first ----------------

def test_capture_hang_after_lets_an_idle_server_run(tmp_path, programs):
    pyspy_or_skip(programs["idle"].pid)
    out = tmp_path / "b"
    t0 = time.monotonic()
    # 12 s: room for one hang check (about 5 s) before the timeout's own stacks (taken before its deadline)
    res = CliRunner().invoke(main, ["capture", "--hang-after", "1s", "--timeout", "12s", "-q", "--allow-running", "-o", str(out), "--",
                                    sys.executable, str(programs["idle"].source), IDLE])
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "timeout", res.output            # not stopped at the first second of silence
    assert time.monotonic() - t0 >= 12
    checks = m["hang_check"]
    assert checks[0]["tag"] == "hang-1" and checks[0]["state"] == "idle"
    assert checks[-1]["tag"] == "timeout-1"
    assert (out / "stacks" / "samples-hang-1.json").is_file()
    assert list((out / "stacks").glob("*.s1.py-spy-native.json"))          # the tool's own output, kept
    doc = json.loads(CliRunner().invoke(main, ["triage", str(out), "--format", "json"]).output)
    assert doc["hang"]["state"] == "idle" and "idle, not hung" in doc["verdict"]["why"]


def test_capture_hang_after_stops_a_stuck_gpu_wait(tmp_path, programs):
    if "spin" not in programs:
        pytest.skip("gcc is not installed")
    gdb_or_skip(programs["spin"].pid)
    out = tmp_path / "b"
    exe = programs["spin"].source.with_suffix("")
    CliRunner().invoke(main, ["capture", "--hang-after", "1s", "--timeout", "60s", "-q", "--allow-running", "-o", str(out), "--",
                              str(exe)])
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "hang"
    assert m["hang_check"][0]["state"] == "hung" and "cudaStreamSynchronize" in m["hang_check"][0]["summary"]
    doc = json.loads(CliRunner().invoke(main, ["triage", str(out), "--format", "json"]).output)
    assert doc["hang"]["stuck"][0]["on"] == "cudaStreamSynchronize"
    # no GPU core here names a kernel: the verdict names none; the hang is likely, and so is the verdict
    # (a likely hang is a likely verdict: --fail-on likely fires on it)
    assert doc["verdict"]["level"] == "likely" and doc["verdict"]["kernel"] is None
    assert "hang (likely): pid" in doc["verdict"]["why"]
    assert CliRunner().invoke(main, ["triage", str(out), "--fail-on", "likely", "-q", "-o", str(tmp_path / "r.json")]).exit_code == 4
    md = CliRunner().invoke(main, ["triage", str(out)]).output
    assert "## Hang analysis" in md and "STUCK" in md


def test_agent_file_source_reads_faulthandler_on_its_signal(tmp_path):
    """The in-process agent's way: faulthandler registered on a signal writes every thread's stack
    into a file; the collector reads the last dump from it (no ptrace needed)."""
    prog = tmp_path / "agent_like.py"
    stacks = tmp_path / "stacks.txt"
    prog.write_text(WAITER.replace('names = sys.argv[1].split(",")',
                                   'import faulthandler, signal\n'
                                   f'fh = open({str(stacks)!r}, "w")\n'
                                   'faulthandler.register(signal.SIGUSR2, file=fh, all_threads=True)\n'
                                   'names = sys.argv[1].split(",")'))
    p = Started([sys.executable, str(prog), "server,getter,waiter"], prog)
    try:
        for _ in range(2):                       # two dumps appended: the last one is read
            os.kill(p.pid, signal.SIGUSR2)
            time.sleep(0.3)
        src = collector.AgentFileSource(lambda pid: stacks if pid == p.pid else None)
        d = collector.take(p.pid, [src])
    finally:
        p.stop()
    assert d.stacks.source == "faulthandler" and len(d.stacks.threads) == 4
    assert stacks.read_text().count("Current thread") == 2
    kinds = {}
    for t in d.stacks.threads:
        w = classify(t)
        kinds[w.where.function if w.where else None] = (w.kind, w.where.line if w.where else None)
    text = prog.read_text()
    assert kinds["server"] == ("socket", line_of(text, "# ACCEPT"))
    assert kinds["getter"] == ("queue", line_of(text, "# QUEUE"))
    assert kinds["waiter"] == ("condition", line_of(text, "# EVENT"))


def test_hang_check_stops_only_on_evidence(tmp_path, programs):
    from faultkit.capture.hang_check import HangCheck
    pyspy_or_skip(programs["idle"].pid)
    busy = subprocess.Popen([sys.executable, "-c", "import itertools\nfor i in itertools.count():\n    x = i * i"],
                            start_new_session=True)
    time.sleep(0.5)
    said = []
    try:
        check = HangCheck(tmp_path, interval_s=0.5, echo=said.append)
        assert check.confirm([programs["idle"].pid]) is False            # idle: goes on
        assert check.confirm([busy.pid]) is False                        # working: goes on
        assert HangCheck(tmp_path, even_idle=True, interval_s=0.5, echo=said.append).confirm(
            [programs["idle"].pid]) is True
        if "spin" in programs:
            assert check.confirm([programs["spin"].pid]) is True         # stuck on the "GPU": a hang
        assert check.confirm([programs["idle"].pid], "timeout") is True  # a timeout ends it whatever the stacks
    finally:
        busy.kill()
        busy.wait()
    assert [f["state"] for f in check.findings][:2] == ["idle", "busy"]
    assert any(s.startswith("working, not stuck") for s in said)
    assert (tmp_path / "stacks" / "samples-hang-2.json").is_file()


def test_python_frames_from_pyspy_merged_with_gdbs_native_frames(programs):
    """Where py-spy cannot unwind native frames, gdb's are put under its Python frames, thread by
    thread (same OS thread id)."""
    p = programs["all"]
    pyspy_or_skip(p.pid, native=False)
    gdb_or_skip(p.pid)
    d = collector.take(p.pid, [collector.PySpySource(native=False), collector.GdbSource()])
    assert d.stacks.source == "py-spy + gdb" and [r.source for r in d.raw] == ["py-spy", "gdb"]
    sv = thread(d.stacks, "server")
    assert sv.frames[0].native and sv.frames[0].function.startswith("accept")      # gdb's innermost
    assert any(f.function == "server" and f.line == line_of(p.text, "# ACCEPT") for f in sv.frames)
    for name, kind in (("server", "socket"), ("getter", "queue"), ("locked", "lock"), ("sleeper", "sleep")):
        assert classify(thread(d.stacks, name)).kind == kind, name


def test_the_stuck_process_kernel_becomes_the_verdicts_and_an_idle_trees_is_no_finding():
    from faultkit.analyze.hang import counted_running, hang_claims
    from faultkit.analyze.running import RunningKernel, running_claims
    from faultkit.judge import judge

    def verdict(hf, kernels):
        return judge(running_claims(counted_running(hf, kernels)) + hang_claims(hf, False), [],
                     "hang").verdict
    gpu = frames(("cudaStreamSynchronize", None, None), ("step", "/srv/a.py", 10))
    idle = frames(("epoll_wait", None, None), ("select", "/usr/lib/python3.12/selectors.py", 468))
    k = [RunningKernel("cores/cuda.h.11.1", 11, "spin_kernel", "spin.cu:7", 3, "cuda-gdb"),
         RunningKernel("cores/cuda.h.12.1", 12, "gemm_kernel", None, 4, "cuda-gdb")]
    stuck = analyse([[ProcessStacks(11, "x", [ThreadStack(11, "main", gpu)]),
                      ProcessStacks(12, "x", [ThreadStack(12, "main", idle)])]] * 2, 3.0, kernels=k)
    v = verdict(stuck, k)                      # the stuck process's kernel wins over the other GPU's
    assert (v.level, v.kernel) == ("likely", "spin_kernel") and "whose thread 11" in v.why
    calm = analyse([[ProcessStacks(11, "x", [ThreadStack(11, "main", idle)])]] * 2, 3.0, kernels=k[:1])
    v = verdict(calm, k[:1])                   # an idle tree's running kernel is no finding
    assert (v.level, v.kernel) == ("unknown", None) and "idle, not hung" in v.why
    assert (verdict(None, k[:1]).level, verdict(None, k[:1]).kernel) == ("likely", "spin_kernel")   # no stacks


def test_a_dead_gpu_worker_under_an_idle_parent_is_a_possible_hang():
    from faultkit.analyze.hang import GoneWorker
    idle = frames(("epoll_wait", None, None), ("select", "/usr/lib/python3.12/selectors.py", 468))
    parent = ProcessStacks(20, "x", [ThreadStack(20, "MainThread", idle)], ppid=1)
    hf = analyse([[parent], [parent]], 3.0, gone=[GoneWorker(21, 20, "python -m worker --rank 1")])
    assert (hf.state, hf.level) == ("hung", "candidates")       # the judge's vocabulary: one explanation
    assert hf.summary.startswith("GPU worker pid 21 (python -m worker --rank 1) died")
    assert hf.waits_on == ["GPU worker pid 21 died before the samples; its parent pid 20 goes on (idle)"]
    assert analyse([[parent], [parent]], 3.0).state == "idle"


def test_cli_dump_of_a_bundle_that_is_not_running(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"state": "finished", "root_pid": 1}))
    res = CliRunner().invoke(main, ["dump", str(tmp_path)])
    assert res.exit_code == 2 and "not a running capture (state 'finished')" in res.output
    (tmp_path / "manifest.json").write_text(json.dumps({"state": "running"}))
    res = CliRunner().invoke(main, ["dump", str(tmp_path)])
    assert res.exit_code == 2 and "names no process yet" in res.output


def test_no_stack_readable_says_why_and_leaves_the_decision_to_the_silence():
    dead = ProcessStacks(5, "none", [], problems=["gdb: ptrace: Operation not permitted."])
    hf = analyse([[dead], [dead]], 3.0)
    assert hf.state == "unknown" and hf.summary == "no stacks could be read (gdb: ptrace: Operation not permitted.)"


def test_cli_dump_reads_saved_dumps(tmp_path, programs):
    """`--read`: two saved `py-spy dump --native` texts of one process, and a gdb transcript."""
    p = programs["all"]
    src = collector.PySpySource()
    pyspy_or_skip(p.pid)
    files = []
    for k in (1, 2):
        f = tmp_path / f"d{k}.txt"
        f.write_text(subprocess.run([src.binary, "dump", "--native", "--pid", str(p.pid)], capture_output=True,
                                    text=True, timeout=30).stdout)
        files += ["--read", str(f)]
    res = CliRunner().invoke(main, ["dump", *files, "--format", "json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert len(d["samples"]) == 2 and d["verdict"]["state"] == "hung" and d["verdict"]["level"] == "candidates"
    locked = next(t for t in d["verdict"]["processes"][0]["threads"] if t["name"] == "locked")
    assert (locked["kind"], locked["unchanged"]) == ("lock", True)
    assert locked["where"].endswith(f"waiter.py:{line_of(p.text, '# LOCK')} locked")
    g = tmp_path / "g.txt"
    g.write_text(gdb_or_skip(p.pid).text)
    res = CliRunner().invoke(main, ["dump", "--read", str(g)])
    assert res.exit_code == 0 and "[accept4 (host: socket), idle]" in res.output
    # gdb alone sees Python's lock primitive, which Lock.acquire and Condition.wait share: a park
    # (waits to be woken), never called blocked on that alone (an idle server's Event.wait looks so too)
    assert "[PyThread_acquire_lock_timed (host: park), idle]" in res.output
    # one sample: each thread's wait and how to take a second, never "not hung"
    assert "verdict: one-sample: one sample: " in res.output and "waits in accept4 (host: socket)" in res.output
    assert "take a second sample" in res.output and "not hung" not in res.output
    res = CliRunner().invoke(main, ["dump", "--read", str(ROOT_README)])
    assert res.exit_code == 1 and "not a py-spy, gdb or faulthandler stack dump" in res.output


from hypothesis import given, settings, strategies as st  # noqa: E402

from faultkit.ingest.stacks import parse_any, parse_samples  # noqa: E402
from faultkit.model import Problem  # noqa: E402

from .conftest import no_internal_errors  # noqa: E402

SHAPES = ['Thread 4 (Thread 0x7f (LWP 11562) "python3"):\n#0  0x1 in accept4 (fd=3) at a.c:31\n',
          'Thread 1 (idle): "MainThread"\n    sleep (x.py:3)\n', 'Thread 0x00007f (most recent call first):\n'
          '  File "x.py", line 3 in f\n', '[{"pid": 1, "thread_name": 5, "frames": [{"name": 3, "line": 2, "module": 7}]}]', '{"samples": [[{"pid": 1}]]}',
          '{"samples": [[{"pid": 1, "threads": [{"tid": 2, "frames": [{"function": 3, "native": true, "line": "9"}]}]}]]}']


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SHAPES), st.integers(0, 200), st.text(max_size=40))
def test_stack_readers_never_raise_on_cut_or_damaged_dumps(shape, cut, junk):
    text = shape[:cut] + junk
    parse_any(text, "x")
    analyse(parse_samples(text, "x")[0])
    ps = parse_any(text, "x")
    for t in ps.threads:
        classify(t)
    for data in (text.encode(), b"\x80\x02" + text.encode()):
        rc = parse_flight_record(data, "nccl_trace_rank_0")
        no_internal_errors([Problem("x", p, internal=True) for p in rc.internal])
        assert rc.entries or rc.problems          # damaged bytes give a message, never silence


def test_pyspy_json_with_odd_types_is_read_as_text():
    ps = parse_pyspy_json('[{"pid": 1, "thread_name": 5, "frames": [{"name": 3, "filename": 9, "line": 2}]}]')
    assert (ps.threads[0].name, ps.threads[0].frames[0].function, ps.threads[0].frames[0].file) == ("5", "3", "9")


# ---------------- a real gloo job: one rank skips an all_reduce ----------------

GLOO_JOB = '''
import datetime, os, subprocess, sys, time
OUT = sys.argv[1]
if len(sys.argv) == 2:                       # the launcher: one process per rank, RANK in its environment
    procs = [subprocess.Popen([sys.executable, __file__, OUT, str(r)], env={**os.environ, "RANK": str(r)})
             for r in range(3)]
    for p in procs:
        p.wait()
    sys.exit(0)
import torch, torch.distributed as dist
rank = int(sys.argv[2])
dist.init_process_group("gloo", rank=rank, world_size=3, init_method="tcp://127.0.0.1:" + os.environ["PORT"],
                        timeout=datetime.timedelta(seconds=30))
t = torch.ones(4)
for _ in range(3):
    dist.all_reduce(t)
def dump():
    os.makedirs(f"{OUT}/collectives", exist_ok=True)
    os.makedirs(f"{OUT}/json", exist_ok=True)      # the JSON dump first: the pickle's arrival ends the wait
    with open(f"{OUT}/json/nccl_trace_rank_{rank}", "wb") as fh:
        fh.write(torch._C._distributed_c10d._dump_fr_trace_json())
    data = torch._C._distributed_c10d._dump_fr_trace()
    with open(f"{OUT}/fr.{rank}.tmp", "wb") as fh:
        fh.write(data)
    os.replace(f"{OUT}/fr.{rank}.tmp", f"{OUT}/collectives/nccl_trace_rank_{rank}")
if rank == 1:
    dump()
    open(f"{OUT}/ready.{rank}", "w").close()
    time.sleep(120)  # BEHIND
else:
    open(f"{OUT}/ready.{rank}", "w").close()
    try:
        dist.all_reduce(t)  # FOURTH
    except RuntimeError:
        pass
    dump()
'''


@pytest.mark.xdist_group("clusters")     # several torch ranks: one multi-process job at a time (-n)
def test_gloo_job_where_one_rank_skips_an_all_reduce(tmp_path):
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch not installed (pip install torch): the gloo job needs it")
    import socket
    from faultkit.capture.proctree import descendants
    prog = tmp_path / "gloo_job.py"
    prog.write_text(GLOO_JOB)
    out = tmp_path / "job"
    out.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PORT": str(port), "TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}
    job = subprocess.Popen([sys.executable, str(prog), str(out)], env=env, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not all((out / f"ready.{r}").exists() for r in range(3)) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        if not (out / "ready.2").exists():
            pytest.fail("the gloo job did not reach its fourth all_reduce")
        pyspy_or_skip(job.pid)
        stacks = sample(lambda: descendants(job.pid), 2, 1.0, 30).samples
        records = [out / "collectives" / f"nccl_trace_rank_{r}" for r in range(3)]
        while not all(r.exists() for r in records) and time.monotonic() < deadline + 60:
            time.sleep(0.2)                     # ranks 0 and 2 time out (30 s), then write their records
        time.sleep(0.5)
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()
    text = prog.read_text()
    hf = analyse(stacks, 1.0)
    by_rank = {p.rank: p for p in hf.processes if p.rank is not None}
    assert {r: by_rank[r].state for r in (0, 1, 2)} == {0: "stuck", 1: "idle", 2: "stuck"}
    for r in (0, 2):
        (t,) = [t for t in by_rank[r].threads if t.stuck]
        assert (t.wait.category, t.wait.where.file, t.wait.where.line) == ("collective", str(prog),
                                                                           line_of(text, "# FOURTH"))
    # the flight records, through triage as a user passes the folder: rank 1 never issued #4
    res = CliRunner().invoke(main, ["triage", str(out / "collectives"), "--format", "json"])
    doc = json.loads(res.output)
    (lag,) = doc["hang"]["collectives"]
    assert (lag["behind"], lag["ahead"], lag["ahead_at"][:2], lag["behind_at"]["1"][0]) == \
        ([1], [0, 2], [4, "gloo:all_reduce"], 3)
    # both together: who waits on whom, and what the rank behind is doing
    from faultkit.analyze.collectives import lagging_ranks as lags_of
    ranks = [parse_flight_record((out / "collectives" / f"nccl_trace_rank_{r}").read_bytes(),
                                 f"nccl_trace_rank_{r}") for r in range(3)]
    both = analyse(stacks, 1.0, lags_of(ranks))
    # torch's JSON dump of the same recorder reads the same
    for r in range(3):
        js = parse_flight_record((out / "json" / f"nccl_trace_rank_{r}").read_bytes(), f"nccl_trace_rank_{r}")
        assert js.entries == ranks[r].entries and not js.problems
    assert any(w.startswith("ranks 0, 2 wait in gloo:all_reduce #4 for rank 1; it is idle: its thread")
               and f"gloo_job.py:{line_of(text, '# BEHIND')} <module>" in w for w in both.waits_on), both.waits_on
