"""`capture --pid` of a server whose log was deleted, or emptied in place, while it runs (issue 36:
"capture --pid once left an empty server.log"): a deleted log (`rm server.log` while the server
writes on, its fd shows `(deleted)`) was refused as "not a file" and the bundle's server.log was
empty; a log emptied in place (`: > server.log`, copytruncate) was never read again (the follower
stayed past the new end). A real writer (a shell), the real CLI; each expected line is one the
writer wrote after the event."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Waits for `go`, writes 20 numbered lines, then idles until killed.
WRITER = 'while [ ! -e "$1" ]; do sleep 0.02; done; i=0; while [ $i -lt 20 ]; do echo "$2 $i"; i=$((i+1)); done; ' \
         'touch "$1.done"; exec sleep 60'


def _capture(tmp_path: Path, log: Path, word: str, event) -> tuple[str, dict]:
    go, out = tmp_path / "go", tmp_path / "b"
    writer = subprocess.Popen(["sh", "-c", f'{WRITER} >> "{log}" 2>&1', "sh", str(go), word])
    try:
        cap = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-q", "--pid", str(writer.pid),
                                "-o", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not (out / "manifest.json").exists() or '"root_pid"' not in (out / "manifest.json").read_text():
            assert time.monotonic() < deadline and cap.poll() is None, cap.communicate()
            time.sleep(0.05)
        time.sleep(0.3)                          # the follower is at the file's end
        event()
        time.sleep(0.3)
        go.touch()
        while not Path(f"{go}.done").exists():
            time.sleep(0.05)
        time.sleep(0.5)
        writer.send_signal(signal.SIGTERM)       # the server ends: the capture with it
        _, err = cap.communicate(timeout=60)
    finally:
        writer.kill()
        writer.wait()
    return (out / "server.log").read_text(), json.loads((out / "manifest.json").read_text()) | {"stderr": err}


def test_a_deleted_log_is_still_followed(tmp_path):
    log = tmp_path / "server.out"
    log.write_text("before the capture\n")
    text, m = _capture(tmp_path, log, "after-delete", log.unlink)
    assert text.splitlines() == [f"after-delete {i}" for i in range(20)], (text, m["stderr"])
    assert "only a file can be followed" not in m["stderr"]


def test_a_log_emptied_in_place_is_read_again_from_its_start(tmp_path):
    log = tmp_path / "server.out"
    log.write_text("".join(f"old line {i} of a long history\n" for i in range(200)))
    text, m = _capture(tmp_path, log, "after-truncate", lambda: log.write_text(""))
    assert text.splitlines() == [f"after-truncate {i}" for i in range(20)], (text, m["stderr"])
