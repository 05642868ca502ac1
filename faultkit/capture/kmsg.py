"""The kernel log around a capture: a snapshot before, a follower during, a snapshot after.

/dev/kmsg gives every record with its monotonic timestamp as it is written; where it is not
readable (containers, no privileges) `dmesg` snapshots are the fallback, and where neither
works the bundle says so instead of pretending the kernel was silent.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from ..private_files import open_append, write_private
from ..ingest.kernel_log import DEV_PREFIX, HDR, PROC_INFO, TASK, USER_SEGFAULT, V8_HDR, XID, XNAME, XPID


KMSG = "/dev/kmsg"
SNAPSHOT_COMMANDS = (["dmesg"], ["journalctl", "-k", "-b", "-o", "short-precise", "--no-pager"])
DMESG_RESTRICT = "/proc/sys/kernel/dmesg_restrict"


def snapshot(path: Path) -> str | None:
    """Write `dmesg` output to path; return None on success or the reason it failed."""
    reasons = []
    for cmd in SNAPSHOT_COMMANDS:
        try:
            res = subprocess.run(cmd, capture_output=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{cmd[0]}: {exc}")
            continue
        # journalctl exits 0 with only "-- No entries --" for a user who may not read the kernel's
        # journal: that is no snapshot.
        body = res.stdout.strip()
        if res.returncode == 0 and body and body != b"-- No entries --" and b"No journal files" not in body:
            try:
                write_private(path, res.stdout)
            except OSError as exc:
                return f"could not be saved ({exc.strerror or exc})"
            return None
        said = (res.stderr.strip() or body).decode(errors="replace")[:200]
        reasons.append(f"{cmd[0]}: exit {res.returncode}: {said}" if res.returncode else f"{cmd[0]}: {said}")
    return "; ".join(reasons) or "no dmesg or journalctl"


def kmsg_line(record: bytes) -> bytes | None:
    """'pri,seq,usec,flags;message' -> '[   secs.usec] message' (the plain dmesg form)."""
    head, sep, msg = record.partition(b";")
    if not sep:
        return None
    try:
        usec = int(head.split(b",")[2])
    except (IndexError, ValueError):
        return None
    return b"[%5d.%06d] " % (usec // 1_000_000, usec % 1_000_000) + msg.split(b"\n")[0] + b"\n"


def unreadable(follow_error: str | None, snapshot_error: str | None) -> str | None:
    """None when the kernel log of the capture is recorded (followed, or at least in the snapshot
    after it); else one sentence: what failed and what to do about it."""
    if follow_error is None or snapshot_error is None:
        return None
    why = f"{follow_error}; {snapshot_error}"
    fix = unreadable_fix()
    return (f"the kernel log is not readable ({why}): GPU page faults, Xids and segfaults will be missing from the "
            f"bundle; {fix}")


def unreadable_fix() -> str:
    """What to do when the kernel log cannot be read here (said by capture and by doctor)."""
    try:
        with open(DMESG_RESTRICT) as fh:
            restricted = fh.read().strip() == "1"
    except OSError:
        restricted = False
    if restricted and not _privileged():
        return ("kernel.dmesg_restrict=1 lets only privileged users read it: run the capture as root (sudo), give "
                "it CAP_SYSLOG, or allow every user with `sudo sysctl kernel.dmesg_restrict=0`")
    if not os.path.exists(KMSG):
        return f"{KMSG} is absent (a container?): pass the device in (docker --device {KMSG}) or run dmesg on the host"
    return "run the capture as root (sudo) or with CAP_SYSLOG"


def _privileged() -> bool:
    return os.geteuid() == 0


def _open_kmsg() -> int:
    fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.lseek(fd, 0, os.SEEK_END)          # only what is logged from now on
    except OSError:
        os.close(fd)
        raise
    return fd


class FaultCounter:
    """Which process each kernel-log fault record is about, as the records arrive: a GPU VM-fault
    header (its pid in the header, or in the `in process ... pid N` line that follows), an NVIDIA
    Xid (`pid=N`), a host segfault (`comm[N]: segfault`). The patterns are the kernel-log parser's.
    A fault whose pid is never given stays unattributed (None): never counted as the capture's."""

    FOLLOW_UP = 6          # a VM-fault header's process line comes within this many records

    def __init__(self):
        self.pids: list[int | None] = []
        self.segfaults: set[int] = set()    # processes the kernel reported a segfault of (killed by SIGSEGV)
        self._open: int | None = None       # index of a fault still waiting for its process line
        self._since = 0

    def feed(self, message: str) -> None:
        msg = DEV_PREFIX.sub("", message, count=1)
        self._since += 1
        m = HDR.search(msg) or V8_HDR.search(msg)
        if m:
            self.pids.append(int(m["tgid"]) if m["tgid"] else None)
            self._open, self._since = (None if m["tgid"] else len(self.pids) - 1), 0
            return
        m = USER_SEGFAULT.search(msg)
        if m:
            self.pids.append(int(m["pid"]))
            self.segfaults.add(int(m["pid"]))
            return
        m = XID.search(msg)
        if m:
            p = XPID.search(m["rest"]) or XNAME.search(m["rest"])
            self.pids.append(int(p["pid"]) if p and p["pid"] else None)
            return
        if self._open is not None and self._since <= self.FOLLOW_UP:
            m = TASK.search(msg) or PROC_INFO.search(msg)
            if m:
                self.pids[self._open], self._open = int(m["tgid"]), None

    def count(self, pids) -> tuple[int, int]:
        """(faults of these processes, faults of others or of no known process)."""
        ours = sum(1 for p in self.pids if p is not None and p in pids)
        return ours, len(self.pids) - ours


class KmsgFollower:
    def __init__(self, out: Path):
        self.out = out
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fd: int | None = None
        self.faults = FaultCounter()          # fault records and their processes (the live status line)

    def start(self) -> bool:
        try:
            self._fd = _open_kmsg()
        except OSError as exc:
            self.error = f"{KMSG}: {exc.strerror}"
            return False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        with open_append(self.out) as fh:
            while True:
                stopping = self._stop.is_set()   # the records written before the stop are read first
                try:
                    rec = os.read(self._fd, 8192)
                except BlockingIOError:
                    if stopping:
                        return
                    self._stop.wait(0.1)
                    continue
                except OSError as exc:
                    if exc.errno == 32:  # EPIPE: records overwritten while we read; go on
                        continue
                    self.error = f"{KMSG}: {exc.strerror}"
                    return
                line = kmsg_line(rec)
                if line:
                    self.faults.feed(line.split(b"] ", 1)[-1].decode(errors="replace").rstrip("\n"))
                    fh.write(line)
                    fh.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)
        if self._fd is not None:
            os.close(self._fd)
