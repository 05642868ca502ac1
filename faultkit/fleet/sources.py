"""Lines to watch, with a cursor that survives restarts and log rotation.

A file is followed across rotation by `log_file.FileSource`; the cursors are saved after each
batch, so a restarted agent neither repeats nor loses lines. `/dev/kmsg` is read from the start of
the kernel's ring and every record at or below the saved sequence number is skipped, for the same
reason.
"""

from __future__ import annotations

import errno
import json
import os

from ..private_files import write_private
from .log_file import MARK, Cursor, FileSource  # noqa: F401 - the sources the watcher follows, one import


class KmsgSource:
    """The kernel's own log as it is written (records `pri,seq,usec,flags;message`), each turned
    into the plain dmesg form `[secs.usec] message`."""

    def __init__(self, path: str = "/dev/kmsg", cursor: Cursor | None = None, from_end: bool = False):
        self.path = path
        self.cursor = cursor or Cursor()
        self._from_end = from_end and cursor is None
        self._fd: int | None = None
        self.error: str | None = None

    def read(self) -> list[bytes]:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as exc:
                self.error = f"{self.path}: {exc.strerror} (needs CAP_SYSLOG, or kernel.dmesg_restrict=0)"
                return []
            if self._from_end:       # a first start: what the kernel logs from now on
                os.lseek(self._fd, 0, os.SEEK_END)
        out = []
        while True:
            try:
                rec = os.read(self._fd, 8192)
            except BlockingIOError:
                return out
            except OSError as exc:
                if exc.errno == errno.EPIPE:            # the ring overwrote records: go on with the next
                    continue
                self.error = f"{self.path}: {exc.strerror}"
                return out
            if not rec:
                return out
            head, sep, msg = rec.partition(b";")
            fields = head.split(b",")
            try:
                seq, usec = int(fields[1]), int(fields[2])
            except (IndexError, ValueError):
                continue
            if seq <= self.cursor.seq:
                continue
            self.cursor.seq = seq
            out.append(b"[%5d.%06d] " % (usec // 1_000_000, usec % 1_000_000) + msg.split(b"\n")[0])

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def load_cursors(path: str) -> tuple[dict[str, Cursor], str | None]:
    """The saved cursors, and what was wrong with the file where it was damaged (then every source
    starts as on a first start: a damaged cursor never stops the agent)."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(1 << 20))
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"{path}: unreadable ({exc.strerror or exc}), ignored; sources start afresh"
    except (ValueError, RecursionError):
        return {}, f"{path}: damaged (not JSON), ignored; sources start afresh"
    if not isinstance(data, dict):
        return {}, f"{path}: damaged (not an object), ignored; sources start afresh"
    out, bad = {}, 0
    for k, v in data.items():
        c = _cursor(v)
        if c is None:
            bad += 1
        else:
            out[k] = c
    return out, (f"{path}: {bad} damaged cursor(s) ignored; those sources start afresh" if bad else None)


def _cursor(v) -> Cursor | None:
    if not isinstance(v, dict):
        return None
    inode, offset, seq = v.get("inode"), v.get("offset", 0), v.get("seq", -1)
    mark, prev, prev_offset = v.get("mark", ""), v.get("prev_inode"), v.get("prev_offset", 0)
    ok = (inode is None or (_int(inode) and inode >= 0)) and _int(offset) and offset >= 0 and _int(seq) and seq >= -1
    ok = ok and (prev is None or (_int(prev) and prev >= 0)) and _int(prev_offset) and prev_offset >= 0
    ok = ok and isinstance(mark, str) and len(mark) <= 2 * MARK and all(ch in "0123456789abcdef" for ch in mark) \
        and len(mark) % 2 == 0
    return Cursor(inode=inode, offset=offset, seq=seq, mark=mark, prev_inode=prev, prev_offset=prev_offset) if ok \
        else None


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v < 1 << 63


def save_cursors(path: str, cursors: dict[str, Cursor]) -> None:
    write_private(path, json.dumps({k: c.__dict__ for k, c in cursors.items()}))
