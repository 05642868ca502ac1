"""Lines to watch, with a cursor that survives restarts and log rotation.

A file is followed by inode: when its path names a new file (logrotate's rename-and-create), the
old one is read to its end first, then the new one from its start; the cursor (inode, offset) is
saved after each batch, so a restarted agent neither repeats nor loses lines. `/dev/kmsg` is read
from the start of the kernel's ring and every record at or below the saved sequence number is
skipped, for the same reason.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass

READ_CHUNK = 1 << 20
MAX_LINE = 64 * 1024        # a longer "line" is cut: the watcher never holds an unbounded line


@dataclass
class Cursor:
    inode: int | None = None
    offset: int = 0
    seq: int = -1           # /dev/kmsg: the last record read


class FileSource:
    """A log file followed like `tail -F`, from its cursor."""

    def __init__(self, path: str, cursor: Cursor | None = None, from_end: bool = False):
        self.path = path
        self.cursor = cursor or Cursor()
        self._fd: int | None = None
        self._rest = b""
        self._from_end = from_end and cursor is None
        self.error: str | None = None

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            self.error = f"{self.path}: {exc.strerror}"
            return False
        st = os.fstat(fd)
        if self.cursor.inode != st.st_ino:             # a new file (or the first start): its start
            self.cursor = Cursor(inode=st.st_ino, offset=st.st_size if self._from_end else 0)
        elif self.cursor.offset > st.st_size:          # truncated in place (copytruncate)
            self.cursor.offset = 0
        os.lseek(fd, self.cursor.offset, os.SEEK_SET)
        self._fd, self.error = fd, None
        return True

    def read(self) -> list[bytes]:
        """Whole lines that arrived since the last call (a last line without its newline waits)."""
        if self._fd is None and not self._open():
            return []
        lines = self._drain()
        try:
            moved = os.stat(self.path).st_ino != self.cursor.inode
        except OSError:
            moved = False                               # gone for now: keep reading the old one
        if moved:
            if self._rest:
                lines.append(self._rest[:MAX_LINE])
                self._rest = b""
            os.close(self._fd)
            self._fd = None
            if self._open():
                lines += self._drain()
        return lines

    def _drain(self) -> list[bytes]:
        out: list[bytes] = []
        while True:
            data = os.read(self._fd, READ_CHUNK)
            if not data:
                return out
            self.cursor.offset += len(data)
            parts = (self._rest + data).split(b"\n")
            self._rest = parts.pop()[: MAX_LINE * 2]
            out += [p[:MAX_LINE] for p in parts]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


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


def load_cursors(path: str) -> dict[str, Cursor]:
    try:
        with open(path) as fh:
            data = json.load(fh)
        return {k: Cursor(**{f: v[f] for f in ("inode", "offset", "seq") if f in v}) for k, v in data.items()
                if isinstance(v, dict)}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def save_cursors(path: str, cursors: dict[str, Cursor]) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({k: c.__dict__ for k, c in cursors.items()}, fh)
    os.replace(tmp, path)
