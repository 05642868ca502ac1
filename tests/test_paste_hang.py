"""Hangs from pasted text: real py-spy (text and --json), real gdb `thread apply all bt` and real
faulthandler dumps of real hung Python processes (a lock deadlock, a queue wait), given to
`faultkit triage` as files. One dump gives each thread's wait (file:line function, on what) and how
to take a second, never "not hung"; two dumps of a deadlock give the hang."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.capture import stacks as collector
from faultkit.cli import main

PROGRAM = r'''
import faulthandler, os, queue, sys, threading, time
a, b = threading.Lock(), threading.Lock()
jobs = queue.Queue()


def one():
    with a:
        time.sleep(0.3)
        with b:                                  # DEADLOCK-ONE
            pass


def two():
    with b:
        time.sleep(0.3)
        with a:                                  # DEADLOCK-TWO
            pass


def worker():
    jobs.get()                                   # QUEUE-WAIT


for f, n in ((one, "one"), (two, "two"), (worker, "worker")):
    threading.Thread(target=f, name=n, daemon=True).start()
if len(sys.argv) > 1:
    faulthandler.dump_traceback_later(1.0, file=open(sys.argv[1], "w"))
time.sleep(0.6)
print("ready", flush=True)
threading.Event().wait()                         # MAIN-WAIT
'''


def line_of(mark: str) -> int:
    return next(i for i, ln in enumerate(PROGRAM.splitlines(), 1) if ln.rstrip().endswith(mark))


@pytest.fixture
def hung(tmp_path):
    src = tmp_path / "deadlock.py"
    src.write_text(PROGRAM)
    fh = tmp_path / "faulthandler.txt"
    p = subprocess.Popen([sys.executable, str(src), str(fh)], stdout=subprocess.PIPE, start_new_session=True)
    assert p.stdout.readline().strip() == b"ready"
    yield p, src, fh
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def tool_output(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and ("ermission" in r.stderr or "ptrace" in r.stderr):
        pytest.skip(f"{cmd[0]} cannot read processes here: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
    return r.stdout


def pyspy(pid: int, *extra: str) -> str:
    binary = collector.PySpySource().binary
    if not binary:
        pytest.skip("py-spy is not installed")
    return tool_output([binary, "dump", "--pid", str(pid), *extra])


def triage_json(*paths: Path) -> dict:
    res = CliRunner().invoke(main, ["triage", *map(str, paths), "-f", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def threads_of(doc: dict) -> dict:
    (proc,) = doc["hang"]["processes"]
    return {t["name"]: t for t in proc["threads"]}


def test_one_pyspy_dump_names_every_wait_and_never_says_not_hung(hung, tmp_path):
    p, src, _ = hung
    f = tmp_path / "pyspy.txt"
    f.write_text("> " + pyspy(p.pid).replace("\n", "\n> "))         # pasted as a Markdown quote
    doc = triage_json(f)
    h = doc["hang"]
    assert h["state"] == "one-sample" and "not hung" not in json.dumps(doc)
    t = threads_of(doc)
    assert t["one"]["where"].endswith(f"deadlock.py:{line_of('DEADLOCK-ONE')} one")
    assert t["two"]["where"].endswith(f"deadlock.py:{line_of('DEADLOCK-TWO')} two")
    assert t["worker"]["where"].endswith(f"deadlock.py:{line_of('QUEUE-WAIT')} worker")
    assert "take a second sample" in h["summary"] and f"pid {p.pid}" in h["summary"]
    assert "take a second sample" in doc["verdict"]["why"]


def test_two_pyspy_json_dumps_of_a_deadlock_are_a_hang(hung, tmp_path):
    p, _, _ = hung
    files = []
    for k in (1, 2):
        f = tmp_path / f"d{k}.json"
        f.write_text(pyspy(p.pid, "--json", "--native"))
        files.append(f)
    doc = triage_json(*files)
    assert (doc["hang"]["state"], doc["hang"]["sign"], doc["hang"]["level"]) == ("hung", "blocked", "candidates")
    t = threads_of(doc)
    assert (t["one"]["kind"], t["one"]["unchanged"]) == ("lock", True)
    assert "blocked on the host" in doc["hang"]["summary"]


def test_gdb_thread_apply_all_bt_pasted_gives_the_waits(hung, tmp_path):
    p, _, _ = hung
    if not collector.GdbSource().binary:
        pytest.skip("GNU gdb is not installed")
    out = tool_output(["gdb", "-p", str(p.pid), "-batch", "-nx", "-ex", "thread apply all bt"])
    f = tmp_path / "gdb.txt"
    f.write_text(out)
    doc = triage_json(f)
    assert doc["hang"]["state"] == "one-sample"
    kinds = {t["kind"] for t in doc["hang"]["processes"][0]["threads"]}
    assert "park" in kinds, kinds      # Python's lock primitive as gdb sees it (the waits' native frames)
    assert "not hung" not in json.dumps(doc)


def test_faulthandler_dump_later_gives_the_waits(hung):
    p, _, fh = hung
    for _ in range(50):
        if fh.exists() and "most recent call first" in fh.read_text():
            break
        import time
        time.sleep(0.1)
    doc = triage_json(fh)
    t = {th["where"].rsplit(" ", 1)[-1]: th for th in doc["hang"]["processes"][0]["threads"] if th["where"]}
    assert t["one"]["where"].endswith(f"deadlock.py:{line_of('DEADLOCK-ONE')} one")
    assert t["worker"]["where"].endswith(f"deadlock.py:{line_of('QUEUE-WAIT')} worker")
    assert doc["hang"]["state"] == "one-sample"


# ---- stacks pasted without their thread headers (#33 item 5: a lone `bt`, faulthandler's frames alone) ----

def only_thread(doc: dict) -> dict:
    (proc,) = doc["hang"]["processes"]
    (t,) = proc["threads"]
    return t


def test_a_lone_gdb_bt_is_one_unnamed_threads_stack(hung, tmp_path):
    p, _, _ = hung
    if not collector.GdbSource().binary:
        pytest.skip("GNU gdb is not installed")
    out = tool_output(["gdb", "-p", str(p.pid), "-batch", "-nx", "-ex", "bt"])     # the selected (main) thread only
    assert "\n#0  " in out and "\nThread 1 (" not in out
    f = tmp_path / "bt.txt"
    f.write_text(out)
    doc = triage_json(f)
    assert doc["hang"]["state"] == "one-sample" and "not hung" not in json.dumps(doc)
    t = only_thread(doc)
    assert (t["tid"], t["name"], t["kind"]) == (None, None, "park")     # the main thread's Event().wait() lock
    assert "a thread (its header is not in the dump) waits in" in doc["hang"]["summary"]


def test_gdb_thread_then_bt_takes_the_switching_line_for_its_header(hung, tmp_path):
    p, _, _ = hung
    if not collector.GdbSource().binary:
        pytest.skip("GNU gdb is not installed")
    out = tool_output(["gdb", "-p", str(p.pid), "-batch", "-nx", "-ex", "thread 2", "-ex", "bt"])
    lwp = int(re.search(r"^\[Switching to thread 2 \(Thread 0x[0-9a-f]+ \(LWP (\d+)\)\)\]$", out, re.M).group(1))
    f = tmp_path / "thread2.txt"
    f.write_text(out)
    t = only_thread(triage_json(f))      # gdb's echo of the selected frame is not a second thread
    assert (t["tid"], t["kind"]) == (lwp, "park")


def test_faulthandler_frames_without_their_header(hung, tmp_path):
    _, _, fh = hung
    for _ in range(50):
        if fh.exists() and "most recent call first" in fh.read_text():
            break
        time.sleep(0.1)
    blocks = fh.read_text().split("\n\n")
    one = next(b for b in blocks if "in one\n" in b + "\n")
    f = tmp_path / "frames.txt"
    f.write_text("".join(ln + "\n" for ln in one.splitlines() if ln.lstrip().startswith("File ")))
    doc = triage_json(f)
    assert doc["hang"]["state"] == "one-sample"
    assert only_thread(doc)["where"].endswith(f"deadlock.py:{line_of('DEADLOCK-ONE')} one")


# https://github.com/NVIDIA/nccl/issues/1013 (2023): "the backtrace of rank 0 is like", gdb's frames alone
NCCL_ABORT_BT = """\
the backtrace of rank 0 is like
#0  __futex_abstimed_wait_common64 (private=128, cancel=true, abstime=0x0, op=265, expected=397683, futex_word=0x7f2188c90910) at ./nptl/futex-internal.c:57
#1  __futex_abstimed_wait_common (cancel=true, private=128, abstime=0x0, clockid=0, expected=397683, futex_word=0x7f2188c90910) at ./nptl/futex-internal.c:87
#2  __GI___futex_abstimed_wait_cancelable64 (futex_word=futex_word@entry=0x7f2188c90910, expected=397683, clockid=clockid@entry=0, abstime=abstime@entry=0x0, private=private@entry=128) at ./nptl/futex-internal.c:139
#3  0x00007f22220966a4 in __pthread_clockjoin_ex (threadid=139782005524032, thread_return=0x0, clockid=0, abstime=0x0, block=<optimized out>) at ./nptl/pthread_join_common.c:105
#4  0x00007f21a5251def in ?? () from /lib/x86_64-linux-gnu/libnccl.so.2
#5  0x00007f21a525d862 in pncclCommAbort () from /lib/x86_64-linux-gnu/libnccl.so.2
#6  0x00007f21c7a5fc7a in c10d::NCCLComm::ncclCommAbort(c10::optional<std::string>) () from /home/u/torch/lib/libtorch_cuda.so
"""

# what ggml_abort prints through gdb (llama.cpp's ggml_print_backtrace), or any crash: raise, abort
CRASH_BT = """\
#0  __pthread_kill_implementation (no_tid=0, signo=6, threadid=<optimized out>) at ./nptl/pthread_kill.c:44
#1  __pthread_kill_internal (signo=6, threadid=<optimized out>) at ./nptl/pthread_kill.c:78
#2  __GI___pthread_kill (threadid=<optimized out>, signo=signo@entry=6) at ./nptl/pthread_kill.c:89
#3  0x00007f0f8d44527e in __GI_raise (sig=sig@entry=6) at ../sysdeps/posix/raise.c:26
#4  0x00007f0f8d4288ff in __GI_abort () at ./stdlib/abort.c:79
#5  0x00007f0f8dc4a1b3 in ggml_abort () from /opt/llama.cpp/build/bin/libggml-base.so
"""


def test_a_public_lone_bt_waits_in_the_nccl_call(tmp_path):
    f = tmp_path / "bt.txt"
    f.write_text(NCCL_ABORT_BT)
    doc = triage_json(f)
    t = only_thread(doc)
    assert (t["category"], t["on"]) == ("collective", "c10d::NCCLComm::ncclCommAbort(c10::optional<std::string>)")
    assert doc["hang"]["state"] == "one-sample"


def test_a_crashing_bt_is_no_hang(tmp_path):
    f = tmp_path / "crash.txt"
    f.write_text(CRASH_BT)
    assert triage_json(f)["hang"] is None


# ---- the other ways a dump reaches a paste (#33 item 5, item 3 of the brief) ----

def _child_of(ppid: int) -> int | None:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == ppid:
            return int(stat.parent.name)
    return None


def test_gdb_run_interrupted_then_thread_apply_all_bt(tmp_path):
    """The user ran it under gdb, it hung, Ctrl-C, `thread apply all bt`: the SIGINT stop is theirs,
    the stacks are the hang's; thread 1's LWP is the process id (Linux: the first thread's id)."""
    if not collector.GdbSource().binary:
        pytest.skip("GNU gdb is not installed")
    src = tmp_path / "deadlock.py"
    src.write_text(PROGRAM)
    exe = os.path.realpath(sys.executable)            # gdb needs the interpreter, not a shim script
    g = subprocess.Popen(["gdb", "-batch", "-nx", "-ex", "run", "-ex", "thread apply all bt", "--args", exe, str(src)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lines = []
        for line in g.stdout:
            lines.append(line)
            if line.strip() == "ready":
                break
        pid = _child_of(g.pid)
        if pid is None:
            pytest.skip("the program under gdb was not found (gdb could not run it here)")
        os.kill(pid, signal.SIGINT)
        out = "".join(lines) + g.communicate(timeout=60)[0]
    finally:
        if g.poll() is None:
            os.killpg(g.pid, signal.SIGKILL)
            g.wait()
    assert "received signal SIGINT" in out
    f = tmp_path / "gdb-session.txt"
    f.write_text(out)
    doc = triage_json(f)
    h = doc["hang"]
    assert h["state"] == "one-sample" and "not hung" not in json.dumps(doc)
    (proc,) = h["processes"]
    assert proc["pid"] == pid and f"pid {pid}" in h["summary"]
    assert len(proc["threads"]) == 4 and {t["kind"] for t in proc["threads"]} == {"park"}


def test_pyspy_locals_pasted_in_a_code_block(hung, tmp_path):
    p, _, _ = hung
    f = tmp_path / "locals.md"
    f.write_text("py-spy says:\n```\n" + pyspy(p.pid, "--locals") + "```\n")
    t = threads_of(triage_json(f))
    assert t["one"]["where"].endswith(f"deadlock.py:{line_of('DEADLOCK-ONE')} one")
    assert t["worker"]["where"].endswith(f"deadlock.py:{line_of('QUEUE-WAIT')} worker")


def test_pyspy_json_pasted_between_words(hung, tmp_path):
    p, src, _ = hung
    f = tmp_path / "post.txt"
    f.write_text("Here is `py-spy dump --json` while it hangs:\n" + pyspy(p.pid, "--json") + "\nAny idea?\n")
    doc = triage_json(f)
    assert doc["hang"]["state"] == "one-sample"
    assert threads_of(doc)["two"]["where"] == f"{src}:{line_of('DEADLOCK-TWO')} two"


def test_faulthandler_frames_of_a_crash_are_no_hang(tmp_path):
    # faulthandler's crash report with its thread header cut off by the paste (the frames alone)
    f = tmp_path / "crash.txt"
    f.write_text('Fatal Python error: Segmentation fault\n\n  File "/srv/app/ext.py", line 12 in launch\n'
                 '  File "/srv/app/main.py", line 40 in <module>\n')
    assert triage_json(f)["hang"] is None


def test_dump_read_takes_a_lone_bt_and_says_what_a_crash_stack_is(tmp_path):
    f = tmp_path / "bt.txt"
    f.write_text(NCCL_ABORT_BT)
    res = CliRunner().invoke(main, ["dump", "--read", str(f)])
    assert res.exit_code == 0, res.output
    assert "verdict: one-sample: one sample:" in res.output
    assert "a thread (its header is not in the dump) waits in c10d::NCCLComm::ncclCommAbort (collective: nccl-call)" \
        in res.output
    c = tmp_path / "crash.txt"
    c.write_text(CRASH_BT)
    res = CliRunner().invoke(main, ["dump", "--read", str(c)])
    assert "a crash's stack (where the program died, not where it waits)" in res.output
