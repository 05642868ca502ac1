"""`faultkit watch` under rotation and signals (issue 36): a fault line half-written when logrotate
runs (rename-and-create, copytruncate), a log that disappears and comes back, a check between a
rotation and its writer's reopen, a file rewritten while the agent was down; SIGHUP never ends it,
SIGTERM always does, at once, even deep in a backlog. Real files, the real CLI, real logrotate
where it is installed (else its two operations as it does them). Every expected line is one the
test wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import logrotate

pytest.importorskip("prometheus_client", reason="the fleet extra is not installed: pip install 'faultkit[fleet]'")

ROOT = Path(__file__).resolve().parents[1]
# An amdgpu retry-fault line (the kernel's own format, as in test_watch): each is one sign.
FAULT = ("[ {t}.000000] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:8 "
         "pasid:32768, for process pt_main_thread pid 4242 thread pt_main_thread pid 4242)")


def fault(t: int) -> str:
    return FAULT.format(t=t)


def numbered(a: int, b: int) -> list[str]:
    return [f"[ {300 + i}.000000] test line {i:04d} of the rotation" for i in range(a, b)]


def start(tmp_path: Path, log: Path) -> subprocess.Popen:
    spool = tmp_path / "spool"
    p = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "watch", "--spool", str(spool), "--node", "n1",
                          "--quiet-after", "60s", "--from-start", "--kernel-log", str(log)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (spool / ".cursors.json").exists(), "the agent's first pass", p)
    return p


def wait_for(cond, what: str, p: subprocess.Popen | None = None, timeout: float = 20.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return
        assert p is None or p.poll() is None, f"the agent ended waiting for {what}: {p.communicate()}"
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def polls(n: int = 3) -> None:
    time.sleep(0.5 * n + 0.2)           # the agent's poll is 0.5 s


def stop(p: subprocess.Popen) -> tuple[int, str, str]:
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=20)
    return p.returncode, out, err


def incident(spool: Path) -> tuple[list[str], dict]:
    folders = [d for d in spool.iterdir() if d.is_dir()]
    assert len(folders) == 1, folders
    return (folders[0] / "kernel.log").read_text().splitlines(), json.loads((folders[0] / "manifest.json").read_text())


def write(fh, text: str) -> None:
    fh.write(text)
    fh.flush()


@pytest.mark.parametrize("how", ["create", "copytruncate"])
def test_a_fault_line_half_written_at_rotation_is_kept_whole(tmp_path, how):
    log = tmp_path / "kern.log"
    log.write_text("")
    p = start(tmp_path, log)
    fh = open(log, "a")                          # the writer: appends, as a syslog daemon does
    write(fh, "\n".join([fault(100), *numbered(0, 10)]) + "\n")
    half = fault(101)
    write(fh, half[:70])                         # the second fault, half-way
    polls()                                      # the agent has read the half line
    p.send_signal(signal.SIGHUP)                 # a postrotate's HUP: not an end
    logrotate(log, how, tmp_path, keep=5)
    polls()                                      # the agent has seen the rotation
    write(fh, half[70:] + "\n" + "\n".join(numbered(10, 15)) + "\n")     # create: still into the renamed file
    polls()
    if how == "create":                          # the writer reopens after its HUP
        fh.close()
        fh = open(log, "a")
    write(fh, "\n".join(numbered(15, 25)) + "\n")
    p.send_signal(signal.SIGHUP)
    polls(6 if how == "create" else 3)           # the renamed file is done when quiet 2 s
    rc, out, err = stop(p)
    fh.close()
    assert rc == 0, err
    lines, manifest = incident(tmp_path / "spool")
    assert lines == [fault(100), *numbered(0, 10), half, *numbered(10, 25)]
    assert manifest["signs"] == 2 and manifest["kinds"] == {"page-fault": 2}


def test_copytruncate_of_a_busy_log_refilled_past_the_old_offset(tmp_path):
    """The writer fills the emptied file past the old read position before the agent's next poll:
    a size check alone skipped those bytes; the lines written between the last read and the copy
    are read from logrotate's copy."""
    log = tmp_path / "kern.log"
    log.write_text("")
    p = start(tmp_path, log)
    fh = open(log, "a")
    write(fh, "\n".join([fault(100), *numbered(0, 5)]) + "\n")
    polls()
    p.send_signal(signal.SIGSTOP)                # the agent between two polls (held there for the test)
    write(fh, "\n".join(numbered(5, 10)) + "\n")         # read by no one before the copy
    logrotate(log, "copytruncate", tmp_path, keep=5)
    write(fh, "\n".join(numbered(10, 60)) + "\n")        # more than the file held before
    p.send_signal(signal.SIGCONT)
    polls()
    rc, out, err = stop(p)
    fh.close()
    assert rc == 0, err
    lines, _ = incident(tmp_path / "spool")
    assert lines == [fault(100), *numbered(0, 60)]


@pytest.mark.parametrize("gone", ["deleted", "moved-away"])
def test_a_log_that_disappears_and_comes_back(tmp_path, gone):
    log = tmp_path / "kern.log"
    log.write_text("")
    p = start(tmp_path, log)
    fh = open(log, "a")
    write(fh, "\n".join([fault(100), *numbered(0, 5)]) + "\n")
    polls()
    if gone == "deleted":
        log.unlink()
    else:
        (tmp_path / "away").mkdir()
        log.rename(tmp_path / "away" / "kern.log")
    write(fh, "\n".join(numbered(5, 10)) + "\n")         # its writer still holds it
    polls()
    fh.close()
    fh = open(log, "a")                                 # and makes a new one
    write(fh, "\n".join(numbered(10, 20)) + "\n")
    polls(6)
    rc, out, err = stop(p)
    fh.close()
    assert rc == 0, err
    lines, _ = incident(tmp_path / "spool")
    assert lines == [fault(100), *numbered(0, 20)]


def _check(tmp_path: Path, log: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", "watch", "--mode", "npd", "--quiet-after", "0s",
                           "--spool", str(tmp_path / "spool"), "--node", "n1", "--kernel-log", str(log), "--from-start"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_check_between_a_rotation_and_the_writers_reopen(tmp_path):
    """One-pass checks (npd mode) run every minute: one lands after logrotate renamed the file and
    before its writer reopened; what the writer puts into the renamed file after that check is read
    by the next one (the cursor keeps the renamed file)."""
    log = tmp_path / "kern.log"
    fh = open(log, "a")
    write(fh, "\n".join(numbered(0, 5)) + "\n")
    assert _check(tmp_path, log).returncode == 0
    logrotate(log, "create", tmp_path, keep=5)
    assert _check(tmp_path, log).returncode == 0        # the renamed file, still being written
    write(fh, fault(100) + "\n" + "\n".join(numbered(5, 10)) + "\n")
    fh.close()
    fh = open(log, "a")
    write(fh, "\n".join(numbered(10, 12)) + "\n")
    r = _check(tmp_path, log)
    fh.close()
    assert r.returncode == 1, r.stderr                  # NPD's "problem": the fault was seen
    lines, _ = incident(tmp_path / "spool")
    assert fault(100) in lines and lines[lines.index(fault(100)):] == [fault(100), *numbered(5, 12)]


def test_a_file_rewritten_while_the_agent_was_down(tmp_path):
    """copytruncate while no check runs, and the file refilled past the saved offset (or a new file
    that reuses the inode number): the saved bytes before the offset no longer match."""
    log = tmp_path / "kern.log"
    fh = open(log, "a")
    write(fh, "\n".join(numbered(0, 5)) + "\n")
    assert _check(tmp_path, log).returncode == 0
    write(fh, fault(100) + "\n")                      # after the check, before the rotation
    logrotate(log, "copytruncate", tmp_path, keep=5)
    write(fh, "\n".join(numbered(5, 40)) + "\n")
    fh.close()
    r = _check(tmp_path, log)
    assert r.returncode == 1, r.stderr
    lines, _ = incident(tmp_path / "spool")
    assert lines[lines.index(fault(100)):] == [fault(100), *numbered(5, 40)]


def test_sigterm_stops_it_at_once_deep_in_a_backlog_and_sighup_does_not(tmp_path):
    """40 MB of quiet lines read from the start (the parsers take about 1 s a MB; one pass took 16 MB):
    SIGHUP is no end, SIGTERM ends it within a second or two, with the open incident written."""
    log = tmp_path / "kern.log"
    quiet = "[ 4700.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
    with open(log, "w") as fh:
        fh.write(fault(100) + "\n")
        fh.write(quiet * 550_000)
    p = start(tmp_path, log)
    time.sleep(1.0)
    p.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert p.poll() is None, p.communicate()
    t = time.monotonic()
    rc, out, err = stop(p)
    took = time.monotonic() - t
    assert rc == 0, err
    assert took < 5, f"SIGTERM took {took:.1f} s"
    lines, manifest = incident(tmp_path / "spool")
    assert lines[0] == fault(100) and manifest["signs"] == 1
