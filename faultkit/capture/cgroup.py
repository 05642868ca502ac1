"""What keeps the whole target tree in faultkit's hands: a cgroup of its own where one can be made,
and faultkit as the child subreaper everywhere.

A process cannot leave a cgroup by calling setsid, double-forking or clearing its environment, so
where the unified (v2) hierarchy is writable (root, or a delegated subtree) the target is started
inside `faultkit-<token>` under faultkit's own cgroup: its members are exactly the target's
processes, and `cgroup.kill` stops them all at once. Where it is not, faultkit is the child
subreaper (PR_SET_CHILD_SUBREAPER): a daemon that double-forks is reparented to faultkit instead
of init, so it is still found among faultkit's children and stopped.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
V2_MOUNTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")


def set_subreaper(on: bool) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _v2_mount() -> Path | None:
    for m in V2_MOUNTS:
        if os.path.exists(f"{m}/cgroup.procs") and os.path.exists(f"{m}/cgroup.controllers"):
            return Path(m)
    return None


def _own_path() -> str | None:
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


class OwnCgroup:
    def __init__(self, path: Path):
        self.path = path

    @property
    def procs(self) -> str:
        return str(self.path / "cgroup.procs")

    @classmethod
    def create(cls, token: str) -> tuple["OwnCgroup | None", str | None]:
        """(the cgroup, None), or (None, why not)."""
        mount, own = _v2_mount(), _own_path()
        if mount is None or own is None:
            return None, "no cgroup v2 hierarchy"
        path = mount / own.lstrip("/") / f"faultkit-{token}"
        try:
            path.mkdir(mode=0o755)
        except OSError as exc:
            return None, f"{path.parent} not writable ({exc.strerror or exc})"
        if not os.access(path / "cgroup.procs", os.W_OK):
            cls(path).remove()
            return None, f"{path / 'cgroup.procs'} not writable"
        return cls(path), None

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill(self, wait_s: float = 5.0) -> list[int]:
        """SIGKILL every member (cgroup.kill where the kernel has it, 5.14+); the pids killed."""
        members = self.pids()
        if not members:
            return []
        try:
            (self.path / "cgroup.kill").write_text("1")
        except OSError:
            for _ in range(3):            # a forking member can start new ones while we look
                for pid in self.pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
        end = time.monotonic() + wait_s
        while self.pids() and time.monotonic() < end:
            time.sleep(0.02)
        return members

    def remove(self) -> bool:
        for _ in range(50):
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.02)       # the last members' exit is still being accounted
        return False
