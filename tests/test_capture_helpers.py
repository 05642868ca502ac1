"""The subreaper's orphan sweep (capture/session.py `adopted`) must never take faultkit's own
helpers for the tree's orphans: it reaps exited children, and reaping a debugger pexpect waits for
steals its exit status ("isalive() ... no child process", seen under load in the suite), and a
helper forked but not yet exec'd still has faultkit's environment, without the helper marker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from faultkit.capture.gdb_driver import GdbDriver
from faultkit.capture.launcher import is_helper


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def _until(cond, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_a_fork_not_yet_execd_is_a_helper_and_another_child_is_not():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                      # the window between pexpect's/Popen's fork and exec
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert is_helper(pid)
        assert not is_helper(other.pid)       # a real child without the marker: a tree orphan for the sweep
    finally:
        os.write(w, b"x")
        os.waitpid(pid, 0)
        other.kill()
        other.wait()


@pytest.mark.skipif(not shutil.which("gdb"), reason="needs GNU gdb")
def test_an_exited_debugger_stays_pexpects_to_reap(tmp_path):
    d = GdbDriver(shutil.which("gdb"), tmp_path / "gdb.log", env=dict(os.environ), command_deadline=30)
    assert d.start([])
    pid = d.pid
    d.child.sendline("quit")
    assert _until(lambda: _state(pid) == "Z"), "gdb did not exit on quit"
    assert is_helper(pid)                     # a zombie reads no environment: known from its spawn
    d.child.close(force=True)                 # pexpect still has the status to collect
    assert d.child.exitstatus == 0
