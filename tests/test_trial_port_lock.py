"""Trials that an engine places side by side on one node take their port in turn (trials.task's
per-node lock): two real processes holding the lock never overlap, and the lock file, in /tmp, is
never opened through a link another user planted there."""

import os
import subprocess
import sys
import time

import pytest

from faultkit.trials.task import _NodePortLock

HOLD = r"""
import sys, time
from faultkit.trials.task import _NodePortLock
with _NodePortLock(int(sys.argv[1])):
    print(f"in {time.monotonic():.4f}", flush=True)
    time.sleep(0.6)
    print(f"out {time.monotonic():.4f}", flush=True)
"""


def test_two_processes_take_the_port_in_turn():
    port = 40000 + os.getpid() % 20000
    procs = [subprocess.Popen([sys.executable, "-c", HOLD, str(port)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    spans = []
    for p in procs:
        out, _ = p.communicate(timeout=30)
        t = dict(line.split() for line in out.split("\n") if line)
        spans.append((float(t["in"]), float(t["out"])))
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0, f"the two holders overlapped: {spans}"


def test_the_lock_file_is_never_opened_through_a_link(tmp_path):
    port = 60000 + os.getpid() % 5000
    lock = _NodePortLock(port)
    target = tmp_path / "victim"
    target.write_text("keep")
    lock.path.unlink(missing_ok=True)
    os.symlink(target, lock.path)
    try:
        with pytest.raises(OSError):
            with lock:
                pass
        assert target.read_text() == "keep"
    finally:
        lock.path.unlink(missing_ok=True)
    assert str(os.getuid()) in lock.path.name        # per user: another user's 0600 file is not in the way
