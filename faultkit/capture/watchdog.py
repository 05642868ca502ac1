"""The capture's tree never outlives faultkit, and a killed capture says it was cut.

Every process the target starts inherits a marker variable (FAULTKIT_CAPTURE=<id>), also a
daemon that left the process group with setsid. A small watchdog process, started in its own
session, waits on a pipe from faultkit, which tells it the tree as it samples it (each process
with its start time; while faultkit lives its subreaper keeps every orphan among its own, so the
sample has the daemons that double-forked, left the cgroup and cleared their environment too). If
the pipe closes without `done` (faultkit was killed, even by SIGKILL), it kills every process that
carries the marker, the cgroup's members, the last sampled tree (a pid only while its start time
is the one sampled: a reused pid is never hit) and their children, and marks the manifest cut.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import layout
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


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22): with the pid,
    what names one process for good."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _children_of(pids: set[int]) -> set[int]:
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if int(fh.read().rsplit(b")", 1)[1].split()[1]) in pids:
                    found.add(int(name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def kill_held(held: dict[int, int], rounds: int = 3) -> list[int]:
    """SIGKILL the sampled tree (pid -> start time, the same process only) and what it forked since."""
    spare = {os.getpid(), os.getppid(), 1}
    killed: set[int] = set()
    todo = {p for p, t in held.items() if p not in spare and start_time(p) == t}
    for _ in range(rounds):
        for pid in todo - killed:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        todo = _children_of(killed) - killed - spare
        if not todo:
            break
        time.sleep(0.05)
    return sorted(killed)


class Watchdog:
    def __init__(self, out: Path, token: str, cgroup: Path | None = None):
        args = [sys.executable, "-m", "faultkit.capture.watchdog", str(out), token, str(cgroup or "")]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, env=helper_env({**os.environ, "PYTHONPATH": _pythonpath()}))
        self._told: frozenset[int] = frozenset()

    def hold(self, pids) -> None:
        """Tell the watchdog the tree as sampled now (only when it changed)."""
        now = frozenset(pids)
        if now == self._told:
            return
        self._told = now
        held = [f"{p}:{t}" for p in sorted(now) if (t := start_time(p)) is not None]
        try:
            self.proc.stdin.write(("tree " + " ".join(held) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            pass              # a watchdog that died: faultkit's own stop still runs

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
    held: dict[int, int] = {}
    for line in sys.stdin.buffer:                      # EOF: faultkit is gone, one way or another
        if line.startswith(b"done"):
            return
        if line.startswith(b"tree") and line.endswith(b"\n"):     # a line cut by the kill is not read
            held = {int(p): int(t) for p, _, t in (w.partition(b":") for w in line.split()[1:])}
    group = OwnCgroup(Path(cgroup)) if cgroup else None
    killed = sorted(set(kill_marked(token)) | set(group.kill() if group else ()) | set(kill_held(held)))
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
    for name in (layout.LOCK, layout.RESERVE):       # the dead capture's bookkeeping, not evidence
        (Path(out) / name).unlink(missing_ok=True)
    private_tree(Path(out))        # what was written until the kill, private like a finished bundle


if __name__ == "__main__":
    main(*sys.argv[1:4])
