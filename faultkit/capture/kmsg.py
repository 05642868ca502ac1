"""The kernel log around a capture: a snapshot before, a follower during, a snapshot after.

/dev/kmsg gives every record with its monotonic timestamp as it is written; where it is not
readable (containers, no privileges) `dmesg` snapshots are the fallback, and where neither
works the bundle says so instead of pretending the kernel was silent.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path


def snapshot(path: Path) -> str | None:
    """Write `dmesg` output to path; return None on success or the reason it failed."""
    for cmd in (["dmesg"], ["journalctl", "-k", "-b", "-o", "short-precise", "--no-pager"]):
        try:
            res = subprocess.run(cmd, capture_output=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reason = f"{cmd[0]}: {exc}"
            continue
        if res.returncode == 0 and res.stdout.strip() and b"No journal files" not in res.stdout:
            try:
                path.write_bytes(res.stdout)
            except OSError as exc:
                return f"could not be saved ({exc.strerror or exc})"
            return None
        reason = f"{cmd[0]}: exit {res.returncode}: {res.stderr.decode(errors='replace').strip()[:200]}"
    return reason


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


FAULT_RECORD = re.compile(rb"\] (?:no-)?(?:retry )?(?:VMC )?page fault \(|NVRM: Xid |GPU fault detected")


class KmsgFollower:
    def __init__(self, out: Path):
        self.out = out
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fd: int | None = None
        self.faults = 0                      # GPU fault records seen (for the live status line)

    def start(self) -> bool:
        try:
            self._fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self._fd, 0, os.SEEK_END)  # only what is logged from now on
        except OSError as exc:
            self.error = f"/dev/kmsg: {exc.strerror}"
            return False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        with open(self.out, "ab") as fh:
            while not self._stop.is_set():
                try:
                    rec = os.read(self._fd, 8192)
                except BlockingIOError:
                    self._stop.wait(0.1)
                    continue
                except OSError as exc:
                    if exc.errno == 32:  # EPIPE: records overwritten while we read; go on
                        continue
                    self.error = f"/dev/kmsg: {exc.strerror}"
                    return
                line = kmsg_line(rec)
                if line:
                    if FAULT_RECORD.search(line):
                        self.faults += 1
                    fh.write(line)
                    fh.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)
        if self._fd is not None:
            os.close(self._fd)
