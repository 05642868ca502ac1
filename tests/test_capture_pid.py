"""`capture --pid` of a server that writes its last lines and crashes at once (issue 31 A5): every
line it wrote is in the bundle, and its end is the kernel's segfault record where its status could
not be read (its parent, a shell, reaped it first). Repeated: the follower's last read races the
crash. Also: nothing requested, nothing warned about the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINES = 300

CRASHER = f'''
import ctypes, os, sys, time
print("serving", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
for i in range({LINES}):
    print(f"line {{i}} of the last moments", flush=True)
print("about to crash", flush=True)
ctypes.string_at(0)
'''


def _segfaults_logged() -> bool:
    try:
        return Path("/proc/sys/debug/exception-trace").read_text().strip() == "1" and os.access("/dev/kmsg", os.R_OK)
    except OSError:
        return False


def _python_child(shell_pid: int, deadline: float) -> int:
    while time.monotonic() < deadline:
        try:
            kids = Path(f"/proc/{shell_pid}/task/{shell_pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.02)
    raise AssertionError("the server did not start")


@pytest.mark.parametrize("run", range(5))
def test_pid_capture_keeps_the_last_lines_before_a_crash_and_names_the_signal(tmp_path, run):
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER)
    go, log, out = tmp_path / "go", tmp_path / "server.out", tmp_path / "b"
    # A shell runs the server and reaps it at once: its status is never faultkit's to read.
    shell = subprocess.Popen(["sh", "-c", f'"{sys.executable}" "{script}" "{go}" > "{log}" 2>&1; sleep 30'])
    try:
        server = _python_child(shell.pid, time.monotonic() + 10)
        while "serving" not in log.read_text():
            time.sleep(0.02)
        fk = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-q", "--pid", str(server),
                               "-o", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        end = time.monotonic() + 30
        while time.monotonic() < end and not (out / "manifest.json").exists():
            time.sleep(0.05)
        time.sleep(0.5)
        go.touch()
        said = fk.communicate(timeout=60)[0].decode()
    finally:
        shell.kill()
        shell.wait()
    written = log.read_text().splitlines()
    assert written[LINES + 1] == "about to crash"                                  # what the server wrote
    kept = (out / "server.log").read_text().splitlines()
    at = next(i for i, ln in enumerate(kept) if ln.endswith("about to crash"))
    assert kept[at - 1].endswith(f"line {LINES - 1} of the last moments"), kept[-3:]
    assert sum("of the last moments" in ln for ln in kept) == LINES
    assert "requested environment" not in said, said                           # nothing was requested
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "target-exit" and m["env_check"] is None
    if _segfaults_logged():
        assert m["exit_code"] == -11 and "SIGSEGV" in m["exit"], (m["exit"], m["kernel_log"])
        assert fk.returncode == 139, said
