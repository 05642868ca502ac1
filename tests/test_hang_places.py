"""Hangs from pasted text give the stuck place (#33 item 3, hangs): every rank's watchdog timing out
in one collective is a hang (which rank stopped first unknown); real gdb `thread apply all bt` of a
real deadlocked C program gives each stuck thread's own file:line (not glibc's); real py-spy of a real
program stuck in a collective gives the collective it called and its caller's file:line, not the
c10d logging decorator's wrapper. Through the real CLI.

The stuck program's `torch.distributed` is a stand-in package laid out as PyTorch's (no torch here):
`torch/distributed/c10d_logger.py`'s `_exception_logger` wraps the collective with functools.wraps,
as PyTorch's does, and the collective blocks in a C call (a socket read) as NCCL's wait does."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faultkit.capture import stacks as collector


def triage(*paths: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", *map(str, paths), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def threads(doc: dict) -> list[dict]:
    return [t for p in doc["hang"]["processes"] for t in p["threads"]]


# ---- watchdog lines: every rank in the same collective ----

def watchdog_line(rank: int, ms: int) -> str:
    # ProcessGroupNCCL.cpp's WorkNCCL::checkTimeout line behind torchrun's `[rankN]:` tag
    return (f"[rank{rank}]:[E1105 10:20:31.123456 424{rank} torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:616] "
            f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, "
            f"NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for {ms} milliseconds before timing out.\n")


def test_every_rank_timed_out_in_one_collective_is_a_hang_with_no_first_mover(tmp_path):
    log = tmp_path / "ranks.log"
    log.write_text(watchdog_line(0, 600034) + watchdog_line(1, 600012))
    doc = triage(log)
    h = doc["hang"]
    assert (h["state"], h["sign"], h["level"]) == ("hung", "stalled", "likely")
    (c,) = h["collectives"]
    assert (c["ahead"], c["behind"], c["ahead_at"][:2]) == ([0, 1], [], [31, "allreduce"])
    assert "allreduce #31" in h["summary"] and "which rank stopped first is unknown" in h["summary"]
    v = doc["verdict"]
    assert (v["level"], v.get("kernel")) == ("likely", None)


def test_one_ranks_timeout_alone_is_a_hang_whose_other_rank_is_unknown(tmp_path):
    # one rank's line: it waits (its watchdog measured 600 s), whom it waits for is not in its log
    # (tests/test_one_rank_watchdog.py has the other shapes)
    log = tmp_path / "rank1.log"
    log.write_text(watchdog_line(1, 600012))
    h = triage(log)["hang"]
    assert (h["state"], h["sign"]) == ("hung", "stalled")
    (c,) = h["collectives"]
    assert (c["ahead"], c["behind"], c["ahead_at"][:2]) == ([1], [], [31, "allreduce"])
    assert "unknown from one rank's log" in h["waits_on"][0]


# ---- gdb: a real deadlock ----

DEADLOCK_C = r"""
#include <pthread.h>
#include <unistd.h>
pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
static void take_two(pthread_mutex_t *x, pthread_mutex_t *y) {
  pthread_mutex_lock(x);
  usleep(200000);
  pthread_mutex_lock(y);                 /* STUCK */
}
void *one(void *p) { take_two(&a, &b); return 0; }
void *two(void *p) { take_two(&b, &a); return 0; }
int main(void) {
  pthread_t t1, t2;
  pthread_create(&t1, 0, one, 0); pthread_create(&t2, 0, two, 0);
  pthread_join(t1, 0);                   /* JOIN */
  return 0;
}
"""


def line_of(text: str, mark: str) -> int:
    return next(i for i, s in enumerate(text.splitlines(), 1) if mark in s)


@pytest.fixture
def gdb_dumps(tmp_path):
    if shutil.which("gdb") is None or shutil.which("gcc") is None:
        pytest.skip("gdb or gcc not on this machine")
    (tmp_path / "dl.c").write_text(DEADLOCK_C)
    subprocess.run(["gcc", "-g", "-O0", "-pthread", str(tmp_path / "dl.c"), "-o", str(tmp_path / "dl")], check=True)
    p = subprocess.Popen([str(tmp_path / "dl")])
    try:
        time.sleep(0.8)                  # both threads hold one lock and wait for the other
        out = []
        for i in range(2):
            dump = subprocess.run(["gdb", "-p", str(p.pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                                  capture_output=True, text=True, timeout=60).stdout
            if "Thread" not in dump:
                pytest.skip("gdb cannot attach here (ptrace restricted)")
            (tmp_path / f"gdb{i}.txt").write_text(dump)
            out.append(tmp_path / f"gdb{i}.txt")
            time.sleep(1.0)
        return out
    finally:
        p.kill()
        p.wait()


def test_gdb_stuck_threads_give_their_own_file_line(gdb_dumps):
    doc = triage(gdb_dumps[0])
    stuck = line_of(DEADLOCK_C, "STUCK")
    got = sorted((t["kind"], t["where"].rsplit("/", 1)[-1]) for t in threads(doc))     # as compiled: a full path
    # glibc's frames with a line (./nptl/pthread_mutex_lock.c:48 lll_mutex_lock_optimized) are not the place
    assert got == sorted([("lock", f"dl.c:{stuck} take_two"), ("lock", f"dl.c:{stuck} take_two"),
                          ("join", f"dl.c:{line_of(DEADLOCK_C, 'JOIN')} main")])
    assert doc["hang"]["state"] == "one-sample"


def test_two_gdb_dumps_of_the_deadlock_are_a_blocked_hang(gdb_dumps):
    h = triage(*gdb_dumps)["hang"]
    assert (h["state"], h["sign"]) == ("hung", "blocked")
    assert "pid 0" not in h["summary"] and f"dl.c:{line_of(DEADLOCK_C, 'STUCK')} take_two" in h["summary"]


# ---- py-spy: a real program stuck in a collective behind PyTorch's logging decorator ----

C10D_LOGGER = '''import functools


def _exception_logger(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception:
            raise

    return wrapper
'''
C10D = '''import socket

from .c10d_logger import _exception_logger

_a, _b = socket.socketpair()


@_exception_logger
def all_reduce(tensor, op=None, group=None, async_op=False):
    _a.recv(1)                    # the peer never joins
'''
TRAIN = '''import torch.distributed as dist


def train_step(grads):
    dist.all_reduce(grads)                       # COLLECTIVE-CALL
    return grads


print("ready", flush=True)
train_step([0.0])
'''


@pytest.fixture
def stuck_in_all_reduce(tmp_path):
    binary = collector.PySpySource().binary
    if not binary:
        pytest.skip("py-spy is not installed")
    site = tmp_path / "lib" / "python3" / "site-packages"
    pkg = site / "torch" / "distributed"
    pkg.mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from .distributed_c10d import all_reduce\n")
    (pkg / "c10d_logger.py").write_text(C10D_LOGGER)
    (pkg / "distributed_c10d.py").write_text(C10D)
    (tmp_path / "train.py").write_text(TRAIN)
    p = subprocess.Popen([sys.executable, str(tmp_path / "train.py")], stdout=subprocess.PIPE, text=True,
                         env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        yield binary, p.pid, tmp_path
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("fmt", [(), ("--json",)], ids=["text", "json"])
def test_pyspy_gives_the_collective_called_and_its_callers_line(stuck_in_all_reduce, fmt):
    binary, pid, tmp_path = stuck_in_all_reduce
    dumps = []
    for i in range(2):
        out = subprocess.run([binary, "dump", "--pid", str(pid), *fmt], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            pytest.skip(f"py-spy cannot read the process here: {out.stderr.strip()[:200]}")
        dumps.append(tmp_path / f"dump{i}.{'json' if fmt else 'txt'}")
        dumps[-1].write_text(out.stdout)
        time.sleep(1.0)
    doc = triage(*dumps)
    (t,) = [t for t in threads(doc) if t["tid"] == pid]
    assert (t["category"], t["on"]) == ("collective", "all_reduce")
    assert t["where"].endswith(f"train.py:{line_of(TRAIN, 'COLLECTIVE-CALL')} train_step")   # not c10d_logger's wrapper
    h = doc["hang"]
    assert (h["state"], h["sign"]) == ("hung", "stuck")
