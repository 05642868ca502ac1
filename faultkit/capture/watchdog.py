"""The capture's tree never outlives faultkit, and a killed capture says it was cut.

Every process the target starts inherits a marker variable (FAULTKIT_CAPTURE=<id>), also a
daemon that left the process group with setsid. A small watchdog process, started in its own
session, waits on a pipe from faultkit: if the pipe closes without `done` (faultkit was killed,
even by SIGKILL), it kills every process that carries the marker and marks the manifest cut.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..manifest import dumps
from .cgroup import OwnCgroup
from .launcher import helper_env
from ..private_files import private_tree, write_private
from ..ingest.schema import read_manifest

MARKER = "FAULTKIT_CAPTURE"


def marked(token: str) -> list[int]:
    """Processes that carry this capture's marker in their environment."""
    needle = f"{MARKER}={token}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    out.append(int(name))
        except OSError:
            continue
    return out


def kill_marked(token: str, rounds: int = 3) -> list[int]:
    """SIGKILL every marked process (a forking daemon can start new ones while we look: a few rounds)."""
    killed: list[int] = []
    for _ in range(rounds):
        pids = [p for p in marked(token) if p not in killed]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        time.sleep(0.05)
    return killed


class Watchdog:
    def __init__(self, out: Path, token: str, cgroup: Path | None = None):
        args = [sys.executable, "-m", "faultkit.capture.watchdog", str(out), token, str(cgroup or "")]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, env=helper_env({**os.environ, "PYTHONPATH": _pythonpath()}))

    def done(self) -> None:
        try:
            self.proc.stdin.write(b"done\n")
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _pythonpath() -> str:
    here = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)


def main(out: str, token: str, cgroup: str = "") -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # a Ctrl-C to the terminal is faultkit's to handle
    data = sys.stdin.buffer.read()                     # EOF: faultkit is gone, one way or another
    if b"done" in data:
        return
    group = OwnCgroup(Path(cgroup)) if cgroup else None
    killed = sorted(set(kill_marked(token)) | set(group.kill() if group else ()))
    if group:
        group.remove()
    manifest = Path(out) / "manifest.json"
    try:
        m = read_manifest(manifest)[0]
        if m is not None and m.state == "running":
            m.set(state="cut", ended_by="faultkit-killed", killed_leftovers=killed,
                  note="faultkit itself was killed during the capture: its watchdog killed the target's "
                       "processes and the bundle holds what was written until then")
            write_private(manifest, dumps(m))
    except (OSError, ValueError):
        pass
    private_tree(Path(out))        # what was written until the kill, private like a finished bundle


if __name__ == "__main__":
    main(*sys.argv[1:4])
