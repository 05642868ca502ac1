"""A log file followed like `tail -F`, across every rotation, without losing a line.

The byte stream a writer puts into "the log" is read in order whatever logrotate does to it:

- rename-and-create: the renamed file is still read while its writer holds it (a daemon reopens
  only after its postrotate signal, and may be half-way through a line), until it has been quiet
  for OLD_QUIET_S; the new file is read from its start meanwhile.
- copytruncate (or any rewrite in place): found by the bytes just before the read position, which
  no longer match, not only by a size below it (a busy writer refills the file past the old offset
  before the next poll). The rest of the old content is read from the copy logrotate made (the
  neighbour holding those same bytes there), then the emptied file from its start, as one stream:
  a line cut by the copy is joined again. A non-appending writer leaves a hole of NULs: skipped.
- a file that disappears is read on (its writer may still hold it) until one takes its place.

The cursor (`Cursor`) is the end of the last whole line handed out, the bytes just before it, and
any renamed file still being read, so a restarted agent neither repeats nor loses a line, nor
takes a new file that reuses the old inode number for the old one.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass

READ_CHUNK = 1 << 20
# Bytes one read takes from one source: the loop (and SIGTERM) comes back within about 2 s even in
# a storm of fault lines (the parsers take about 1 s a MB of them); a source behind says so, and the
# agent reads on without its pause.
MAX_STEP = 2 * READ_CHUNK
MAX_LINE = 64 * 1024            # a longer "line" is cut: the watcher never holds an unbounded line
MARK = 32                       # bytes before the position that say "the same file, as it was"
OLD_QUIET_S = 2.0               # a renamed file quiet this long is done, once its writer moved on
MAX_OLD = 8                     # renamed files followed at once (a quiet log rotated again and again)
MAX_COPY_READ = 4 * MAX_STEP    # the most read at once from a copytruncate copy (what came since the last read)


@dataclass
class Cursor:
    inode: int | None = None
    offset: int = 0             # the end of the last whole line handed out
    seq: int = -1               # /dev/kmsg: the last record read
    mark: str = ""              # hex of the bytes just before `offset`
    prev_inode: int | None = None   # a renamed file still read to its end, and where
    prev_offset: int = 0


class _Reader:
    """One open file: where it is read, the partial last line, the bytes just consumed."""

    def __init__(self, fd: int, st: os.stat_result, pos: int, tail: bytes = b""):
        self.fd, self.inode, self.dev = fd, st.st_ino, st.st_dev
        self.pos = pos                      # the file offset read to
        self.rest = b""                     # bytes after the last newline
        self.tail = tail                    # up to MARK bytes just before `pos`
        self.skip_nul = False               # after a truncation: a non-appending writer's hole
        self.last_data = time.monotonic()

    @property
    def offset(self) -> int:
        return self.pos - len(self.rest)

    def feed(self, data: bytes) -> list[bytes]:
        """Lines of `data` read on from this stream (its file or a copy of it)."""
        if self.skip_nul:
            stripped = data.lstrip(b"\0")
            if stripped:
                self.skip_nul = False
            data = stripped
        parts = (self.rest + data).split(b"\n")
        self.rest = parts.pop()[: MAX_LINE * 2]
        return [p[:MAX_LINE] for p in parts]

    def drain(self, budget: int) -> tuple[list[bytes], int, str | None]:
        """(lines, bytes taken, a read error) from `pos` until the end or the budget."""
        out: list[bytes] = []
        taken = 0
        while taken < budget:
            try:
                data = os.pread(self.fd, READ_CHUNK, self.pos)
            except OSError as exc:
                return out, taken, exc.strerror or str(exc)
            if not data:
                break
            taken += len(data)
            self.pos += len(data)
            self.tail = (self.tail + data)[-MARK:]
            self.last_data = time.monotonic()
            out += self.feed(data)
        return out, taken, None

    def unchanged(self) -> bool:
        """Whether the bytes read so far are still there (not truncated, not rewritten in place)."""
        try:
            if os.fstat(self.fd).st_size < self.pos:
                return False
            return not self.tail or os.pread(self.fd, len(self.tail), self.pos - len(self.tail)) == self.tail
        except OSError:
            return True                     # unreadable now: said by the next read, not taken as a rewrite

    def close(self) -> list[bytes]:
        """The last line that never got its newline, and the file closed."""
        rest, self.rest = self.rest, b""
        try:
            os.close(self.fd)
        except OSError:
            pass
        return [rest[:MAX_LINE]] if rest else []


class FileSource:
    """A log file followed from its cursor (module docstring). It never holds the loop: one `read`
    takes at most MAX_STEP bytes, and only a regular file is read (a FIFO, a folder or a device
    such as /dev/zero is said, and waited out)."""

    def __init__(self, path: str, cursor: Cursor | None = None, from_end: bool = False):
        self.path = path
        self.cursor = cursor or Cursor()
        self._cur: _Reader | None = None
        self._old: list[_Reader] = []       # renamed files still read to their end, oldest first
        self._from_end = from_end and cursor is None      # only at the very first start
        self._resume = cursor if cursor is not None and cursor.inode is not None else None
        self.error: str | None = None
        self.notes: list[str] = []          # what was met and could not be helped (a copy not found)
        self._pending: list[bytes] = []     # lines read at a restart's first open, handed out by `read`
        self.behind = False                 # the last read stopped at MAX_STEP: more is waiting
        self._empty_at: tuple[float, set[int]] | None = None   # read while empty: when, and the neighbours then

    # -- opening
    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            self.error = f"{self.path}: {exc.strerror or exc}"
            return False
        try:
            st = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            self.error = f"{self.path}: {exc.strerror or exc}"
            return False
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            self.error = f"{self.path}: {_kind(st.st_mode)}, not a log file: watch follows regular files (waiting " \
                         f"for one to take its place)"
            return False
        self.error = None
        resume, self._resume = self._resume, None
        if resume is not None:
            self._resume_from(resume, fd, st)
        else:
            self._cur = _Reader(fd, st, st.st_size if self._from_end else 0)
            if self._from_end and st.st_size:
                self._cur.tail = _bytes_at(fd, st.st_size - min(MARK, st.st_size), min(MARK, st.st_size))
        self._from_end = False
        return True

    def _resume_from(self, c: Cursor, fd: int, st: os.stat_result) -> None:
        """A restart: the renamed file still being read, the cursor's file (here or renamed while
        the agent was down), then the file the path names now."""
        mark = bytes.fromhex(c.mark) if c.mark else b""
        if c.prev_inode is not None:
            old = _neighbour(self.path, lambda e, s: s.st_ino == c.prev_inode and s.st_dev == st.st_dev)
            if old is not None:
                self._old.append(old_reader(old, c.prev_offset))
        if c.inode == st.st_ino:
            self._cur = _Reader(fd, st, c.offset, mark)
            if not self._cur.unchanged():       # rewritten or truncated while down, or a reused inode
                self._pending += self._after_rewrite(self._cur)
            return
        old = _neighbour(self.path, lambda e, s: s.st_ino == c.inode and s.st_dev == st.st_dev)
        if old is not None:                     # rotated while the agent was down: read it on first
            r = old_reader(old, c.offset, mark)
            if r is not None:
                self._old.append(r)
        self._cur = _Reader(fd, st, 0)

    # -- reading
    def read(self) -> list[bytes]:
        """Whole lines that arrived since the last call, in the order they were written (a last
        line without its newline waits, unless its file is done with)."""
        opened = self._cur is not None or self._open()     # a restart's first open finds renamed files too
        lines, self._pending = self._pending, []
        budget = MAX_STEP
        self.behind = False
        for r in list(self._old):
            more, taken, _ = r.drain(budget)
            lines += more
            budget -= taken
            if budget <= 0:
                self.behind = True
                self._update_cursor()
                return lines
            if self._done_with(r):
                lines += r.close()
                self._old.remove(r)
        if not opened:
            self._update_cursor()
            return lines
        if not self._cur.unchanged():
            lines += self._after_rewrite(self._cur)
        elif self._empty_at is not None and self._cur.pos == 0:
            lines += self._copied_while_empty(*self._empty_at)
        more, taken, err = self._cur.drain(budget)
        lines += more
        self.error = f"{self.path}: {err}" if err else None
        if taken < budget:
            self._check_moved(lines, budget - taken)
        else:
            self.behind = True
        # Nothing read yet from this file: what is written and copied away (copytruncate) before the
        # next read has no bytes of ours to be found by; a copy made since is found by being new.
        self._empty_at = (time.time(), _neighbours(self.path)) if self._cur is not None and self._cur.pos == 0 \
            else None
        self._update_cursor()
        return lines

    def _check_moved(self, lines: list[bytes], budget: int) -> None:
        try:
            st = os.stat(self.path)
        except OSError:
            return                              # gone for now: the old one is read on (its writer may hold it)
        if st.st_ino == self._cur.inode and st.st_dev == self._cur.dev:
            return
        self._cur.last_data = time.monotonic()  # renamed: read on while its writer still writes there
        self._old.append(self._cur)
        while len(self._old) > MAX_OLD:
            lines += self._old.pop(0).close()
        self._cur = None
        if self._open():
            more, _, _ = self._cur.drain(budget)
            lines += more

    def _done_with(self, r: _Reader) -> bool:
        """A renamed file is done when quiet for OLD_QUIET_S and its writer has moved on (the new
        file has had lines since) or it is deleted (held open by the agent alone, it would keep its
        disk). A writer that never reopens (`>` redirection under `create`) is followed there."""
        if time.monotonic() - r.last_data < OLD_QUIET_S:
            return False
        moved_on = self._cur is not None and self._cur.last_data > r.last_data and self._cur.pos > 0
        try:
            deleted = os.fstat(r.fd).st_nlink == 0
        except OSError:
            deleted = True
        return moved_on or deleted

    def _after_rewrite(self, r: _Reader) -> list[bytes]:
        """The file was emptied (copytruncate) or rewritten: what came after the last read is read
        from logrotate's copy, then the file from its start, one stream (a cut line joined)."""
        copy = None
        if r.tail:
            copy = _neighbour(self.path, lambda e, s: s.st_ino != r.inode and s.st_size >= r.pos
                              and _bytes_at_path(e.path, r.pos - len(r.tail), len(r.tail)) == r.tail)
        missed: list[bytes] = []
        if copy is not None:
            try:
                fd = os.open(copy, os.O_RDONLY | os.O_NONBLOCK)
                try:
                    data = os.pread(fd, MAX_COPY_READ, r.pos)
                finally:
                    os.close(fd)
                missed = r.feed(data)
            except OSError as exc:
                self._note(f"{self.path}: emptied in place; its copy {copy} could not be read ({exc.strerror})")
        elif r.pos:
            self._note(f"{self.path}: emptied or rewritten in place and no rotated copy holds what was written "
                       f"after the last read: those lines may be missing (read on from its start)")
        r.pos, r.tail, r.skip_nul = 0, b"", True
        return missed

    def _copied_while_empty(self, since: float, known: set[int]) -> list[bytes]:
        """The file was empty at the last read and is still at its start: a neighbour made since
        (not compressed) is logrotate's copy of what was written in between, read first."""
        ours = {r.inode for r in self._old} | {self._cur.inode}
        copy = _neighbour(self.path, lambda e, s: s.st_ino not in known and s.st_ino not in ours and s.st_size > 0
                          and s.st_mtime >= since - 1 and _bytes_at_path(e.path, 0, 6)[:2] not in _COMPRESSED)
        if copy is None:
            return []
        try:
            fd = os.open(copy, os.O_RDONLY | os.O_NONBLOCK)
            try:
                data = os.pread(fd, MAX_COPY_READ, 0)
            finally:
                os.close(fd)
        except OSError:
            return []
        return self._cur.feed(data)

    def _update_cursor(self) -> None:
        r = self._cur
        old = self._old[0] if self._old else None
        if r is None:
            c = Cursor(inode=self.cursor.inode, offset=self.cursor.offset, mark=self.cursor.mark)
        else:
            end = max(r.offset, 0)              # a line cut by a copytruncate began in the copy
            mark = _bytes_at(r.fd, end - min(MARK, end), min(MARK, end)) if end else b""
            c = Cursor(inode=r.inode, offset=end, mark=mark.hex())
        if old is not None:
            c.prev_inode, c.prev_offset = old.inode, max(old.offset, 0)
        self.cursor = c

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes = (self.notes + [text])[-20:]

    def close(self) -> None:
        for r in [*self._old, *([self._cur] if self._cur else [])]:
            r.close()
        self._old, self._cur = [], None


def old_reader(path: str, offset: int, mark: bytes = b"") -> _Reader | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        st = os.fstat(fd)
    except OSError:
        return None
    return _Reader(fd, st, min(offset, st.st_size), mark)


def _bytes_at(fd: int, at: int, n: int) -> bytes:
    try:
        return os.pread(fd, n, at) if n > 0 and at >= 0 else b""
    except OSError:
        return b""


def _bytes_at_path(path: str, at: int, n: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        return _bytes_at(fd, at, n)
    finally:
        os.close(fd)


_COMPRESSED = {b"\x1f\x8b", b"\xfd7", b"BZ", b"(\xb5"}     # gzip, xz, bzip2, zstd: a rotated file compressed


def _neighbours(path: str) -> set[int]:
    """The inodes of the files beside the log that share its name's start."""
    found: set[int] = set()
    _neighbour(path, lambda e, s: found.add(s.st_ino))
    return found


def _neighbour(path: str, want) -> str | None:
    """A regular file beside the log whose name starts with the log's (`kern.log.1`,
    `kern.log-20250101`) and that `want(entry, stat)` accepts."""
    folder, base = os.path.split(path)
    try:
        entries = list(os.scandir(folder or "."))
    except OSError:
        return None
    for e in sorted(entries, key=lambda e: e.name):
        if e.name.startswith(base) and e.name != base:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and want(e, st):
                return e.path
    return None


def _kind(mode: int) -> str:
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else
            "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
