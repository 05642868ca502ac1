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
import stat
from dataclasses import dataclass

from ..private_files import write_private

READ_CHUNK = 1 << 20
MAX_STEP = 16 * READ_CHUNK      # bytes one read takes from one source: the loop (and SIGTERM) always comes back
MAX_LINE = 64 * 1024        # a longer "line" is cut: the watcher never holds an unbounded line


@dataclass
class Cursor:
    inode: int | None = None
    offset: int = 0
    seq: int = -1           # /dev/kmsg: the last record read


class FileSource:
    """A log file followed like `tail -F`, from its cursor. It never loses a line to rotation:
    rename-and-create (the old file read to its end, the new one from its start; after a restart
    the old file is found again by its inode among the log's neighbours), copytruncate (a file
    shorter than the cursor is read again from its start). It never holds the loop: one `read`
    takes at most MAX_STEP bytes, and only a regular file is read (a FIFO, a folder or a device
    such as /dev/zero is said, and waited out)."""

    def __init__(self, path: str, cursor: Cursor | None = None, from_end: bool = False):
        self.path = path
        self.cursor = cursor or Cursor()
        self._fd: int | None = None
        self._rest = b""
        self._from_end = from_end and cursor is None      # only at the very first start
        self._resumed = cursor is not None and cursor.inode is not None
        self.error: str | None = None

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            self.error = f"{self.path}: {exc.strerror or exc}"
            return False
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            self.error = f"{self.path}: {_kind(st.st_mode)}, not a log file: watch follows regular files (waiting " \
                         f"for one to take its place)"
            return False
        if self.cursor.inode != st.st_ino:             # a new file (or the first start)
            if self._resumed:                           # rotated while the agent was down
                self._resumed = False
                old = _old_file(self.path, self.cursor.inode, st.st_dev)
                if old is not None:
                    os.close(fd)
                    return self._adopt(old)
            self.cursor = Cursor(inode=st.st_ino, offset=st.st_size if self._from_end else 0)
        elif self.cursor.offset > st.st_size:          # truncated in place (copytruncate)
            self.cursor.offset = 0
        self._from_end = self._resumed = False
        os.lseek(fd, self.cursor.offset, os.SEEK_SET)
        self._fd, self.error = fd, None
        return True

    def _adopt(self, old: str) -> bool:
        """The file the cursor points into, under its rotated name: read on from the cursor."""
        try:
            fd = os.open(old, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return self._open()
        os.lseek(fd, min(self.cursor.offset, os.fstat(fd).st_size), os.SEEK_SET)
        self._fd, self.error = fd, None
        return True

    def read(self) -> list[bytes]:
        """Whole lines that arrived since the last call (a last line without its newline waits)."""
        if self._fd is None and not self._open():
            return []
        lines, full = self._drain()
        if full:
            return lines                                # more next time: the loop is never held
        try:
            if os.fstat(self._fd).st_size < self.cursor.offset:     # copytruncate: read again from 0
                os.lseek(self._fd, 0, os.SEEK_SET)
                self.cursor.offset, self._rest = 0, b""
                more, full = self._drain()
                lines += more
                if full:
                    return lines
            st = os.stat(self.path)
            moved = st.st_ino != self.cursor.inode
        except OSError:
            moved = False                               # gone for now: keep reading the old one
        if moved:
            if self._rest:
                lines.append(self._rest[:MAX_LINE])
                self._rest = b""
            os.close(self._fd)
            self._fd = None
            if self._open():
                more, _ = self._drain()
                lines += more
        return lines

    def _drain(self) -> tuple[list[bytes], bool]:
        """(lines, whether the step's byte bound stopped it)."""
        out: list[bytes] = []
        taken = 0
        while True:
            try:
                data = os.read(self._fd, READ_CHUNK)
            except OSError as exc:
                self.error = f"{self.path}: {exc.strerror or exc}"
                return out, False
            if not data:
                return out, False
            taken += len(data)
            self.cursor.offset += len(data)
            parts = (self._rest + data).split(b"\n")
            self._rest = parts.pop()[: MAX_LINE * 2]
            out += [p[:MAX_LINE] for p in parts]
            if taken >= MAX_STEP:
                return out, True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _kind(mode: int) -> str:
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else
            "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def _old_file(path: str, inode: int, dev: int) -> str | None:
    """Where logrotate renamed the file (`kern.log.1`, `kern.log-20250101`) that holds the inode."""
    folder, base = os.path.split(path)
    try:
        entries = list(os.scandir(folder or "."))
    except OSError:
        return None
    for e in entries:
        if e.name.startswith(base) and e.name != base:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_ino == inode and st.st_dev == dev and stat.S_ISREG(st.st_mode):
                return e.path
    return None


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
    ok = (inode is None or (_int(inode) and inode >= 0)) and _int(offset) and offset >= 0 and _int(seq) and seq >= -1
    return Cursor(inode=inode, offset=offset, seq=seq) if ok else None


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v < 1 << 63


def save_cursors(path: str, cursors: dict[str, Cursor]) -> None:
    write_private(path, json.dumps({k: c.__dict__ for k, c in cursors.items()}))
