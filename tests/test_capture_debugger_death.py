"""A debugger that dies during a capture is a failed capture, said so (issue 36: gdb SIGKILLed
mid-run gave exit 0 and "still running"): a real gdb runs a real program, the test SIGKILLs gdb,
and the capture exits 125 (its own tool failed, like timeout(1)), its summary, manifest and
report say the debugger died, and the program is not left running."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _children(pid: int) -> list[tuple[int, str]]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
            comm = data[data.index(b"(") + 1:data.rindex(b")")].decode(errors="replace")
            if int(data.rsplit(b")", 1)[1].split()[1]) == pid:
                out.append((int(name), comm))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _running(arg: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if len(argv) > 1 and argv[0].endswith(b"/sleep") and argv[1] == arg.encode() and state != b"Z":
            found.append(int(name))
    return found


@pytest.mark.skipif(shutil.which("gdb") is None, reason="GNU gdb not installed (apt-get install gdb)")
def test_a_sigkilled_debugger_fails_the_capture(tmp_path):
    arg = f"90.{uuid.uuid4().int % 10**9:09d}"         # this test's program, told apart by its argument
    out = tmp_path / "b"
    fk = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "--with", "gdb", "--timeout", "120s",
                           "-o", str(out), "--", "/bin/sleep", arg], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        gdb = None
        end = time.monotonic() + 60
        while time.monotonic() < end and gdb is None:
            if _running(arg):                               # gdb has started the program
                gdb = next((p for p, comm in _children(fk.pid) if comm == "gdb"), None)
            time.sleep(0.1)
        assert gdb is not None, "gdb never started the program"
        time.sleep(0.5)
        os.kill(gdb, signal.SIGKILL)
        _, err = fk.communicate(timeout=90)
    finally:
        if fk.poll() is None:
            fk.kill()
    assert fk.returncode == 125, err
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "debugger-died" and m["state"] == "finished"
    assert m["debuggers"][0]["state"] == "died" and "status -9" in m["debuggers"][0]["problem"]
    assert m["exit"].startswith("unknown: the debugger died") and "still running" not in err
    assert any(w.startswith("debugger died") for w in m["warnings"])
    assert f"({m['ended_by']}, {m['exit']})" in err               # the summary line says it
    rep = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert "warning: debugger died" in rep.stdout
    assert not _running(arg)                                      # the program went with its debugger
