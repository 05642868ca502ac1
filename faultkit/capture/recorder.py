"""The recorder: a target's output stream into `<name>.log` (raw, every byte) and `<name>.times.tsv`
(when each block arrived), watched for fault and core-dump lines, at the speed the disk takes it.

The target must never be slowed by its recorder (a slower server runs differently and can hide the
race being chased), so the work per block is a few passes at memory speed:

- the bytes go from the target's pipe into the log by splice(2), the kernel's own copy (faultkit never
  copies them), and are looked at where they now lie, in the page cache, through a read-only mapping
  (read back with pread where the file system cannot map). They are on disk before anything looks
  at them, and a partial line is not held back for its newline. A stream that cannot be spliced (the
  debugger backend's pty) and redaction use one read into a reused buffer and one write per block;
- one row per block in the times table: the number of the first line the block completes and the
  three clocks of its arrival; the lines up to the next row's arrived then (the per-line times derive
  from the block times and the newline offsets). Newlines are counted by numpy (about 5x bytes.count);
- one pass of the fault and core-dump words over the block (fault_lines.PREFILTER, find_words), plus
  the seam with the line in progress; only a block with a hit is decoded and matched line by line;
- the live view (`mirror`) gets the block after the log has it; it copies what it keeps and drops
  what does not fit (capture.console), so a slow viewer never slows the file path.

With `redact` on, secrets are replaced line by line before they reach the disk, so only whole lines
are written (the line in progress waits for its newline, as long as MAX_PENDING allows).
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import threading
import time
from pathlib import Path

import numpy as np

from .. import layout
from .. import redact as redaction
from ..private_files import open_append, open_fd, private_dir
from ..fault_lines import DUMP_END, DUMP_START, DUMP_WORDS, FAULT_LINE, FAULT_PHRASES, PREFILTER

BLOCK = 1 << 20            # one read, and the size of the target's output pipe (launcher.PIPE_SIZE)
MAX_PENDING = 1 << 20      # a line this long without a newline is watched (and, redacted, written) in pieces
# at least the longest prefilter word: a word split between two reads is still seen
SEAM = max(64, *map(len, FAULT_PHRASES), *map(len, DUMP_WORDS))
NEWLINE = 10


def clocks() -> dict:
    return {"wall": time.time(), "monotonic_ns": time.monotonic_ns(),
            "boottime_ns": time.clock_gettime_ns(time.CLOCK_BOOTTIME)}


class LineTee:
    """Copy a stream into `<name>.log` raw and `<name>.times.tsv` stamped per block, both written
    through at once: a crash of the target or of faultkit itself loses nothing already read."""

    def __init__(self, out_dir: Path, name: str):
        self.out_dir, self.name = out_dir, name
        self.fault_line: str | None = None
        self.lines = 0                         # complete lines so far (the parsers' numbering, split on \n)
        self.last_output = time.monotonic()    # when the last block arrived (hang detection)
        self.dumping = 0                       # GPU core dumps being written now (never stop the tree then)
        self.redact = False                    # --redact-output: secrets in the target's own output replaced
        self._redactor = None                  # its state across blocks (a private key's body spans blocks)
        self.disk_error: str | None = None     # the disk filled up: said in the manifest
        self.mirror = None                     # shows each block as it arrives (the capture's console)
        self._watch: list = []                 # (compiled regex, threading.Event)
        self._partial = b""                    # the line in progress: after the last newline seen
        self._unstamped = False                # redact only: a long line was written in pieces, not yet stamped
        self.via = None                        # "splice" or "read": how the log was written (tests, benchmarks)
        self._log_fd = -1
        self._times = None

    def watch_for(self, pattern: str) -> threading.Event:
        ev = threading.Event()
        self._watch.append((re.compile(pattern), ev))
        return ev

    def run(self, stream) -> None:
        """Drain the stream in blocks as fast as it comes (the target must never block on its pipe);
        a full disk is recorded, not fatal."""
        private_dir(self.out_dir)
        path = self.out_dir / layout.log_of(self.name)
        # Not O_APPEND: splice(2) refuses a file opened so; the recorder is its only writer.
        self._log_fd = open_fd(path)                    # 0600 from the first byte
        os.lseek(self._log_fd, 0, os.SEEK_END)
        self._times = open_append(self.out_dir / layout.times_of(self.name), text=True)
        self._is_nl = np.empty(BLOCK, dtype=bool)       # reused: the newline test's output
        fd = stream.fileno()
        try:
            self.via = "splice"
            if self.redact or not self._spliced(fd, path):
                self.via = "read"
                self._read(fd)
            self._end()
        finally:
            for close in (lambda: os.close(self._log_fd), self._times.close):
                try:
                    close()
                except OSError:
                    pass

    def _spliced(self, fd: int, path: Path) -> bool:
        """The kernel moves each block from the pipe into the log (no copy through faultkit), and the
        recorder looks at it where it now lies, in the page cache (mapped, not read back). False
        where the stream cannot be spliced (a pty: the debugger's backend); the read loop goes on."""
        try:
            rfd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        pos = os.lseek(self._log_fd, 0, os.SEEK_CUR)
        first = True
        try:
            while True:
                try:
                    n = os.splice(fd, self._log_fd, BLOCK)
                except OSError as exc:
                    if first and exc.errno in (errno.EINVAL, errno.ENOSYS, errno.EBADF, errno.ESPIPE):
                        return False     # not a pipe, or a file system that cannot take it
                    if exc.errno == errno.EIO:
                        return True      # a pty whose last writer closed: its end of file
                    self.disk_error = (f"{self.out_dir / layout.log_of(self.name)}: {exc.strerror or exc} after "
                                       f"{self.lines} lines; output no longer recorded")
                    return False         # keep draining (the read loop drops what no longer fits)
                first = False
                if not n:
                    return True
                c = clocks()
                self.last_output = time.monotonic()
                self._look(rfd, pos, n, c)
                pos += n
        finally:
            os.close(rfd)

    def _look(self, rfd: int, pos: int, n: int, c: dict) -> None:
        """The n bytes just spliced at `pos`, where they lie in the page cache (mapped: no copy);
        read back where the file cannot be mapped."""
        base = pos - pos % mmap.ALLOCATIONGRANULARITY
        try:
            mm = mmap.mmap(rfd, pos + n - base, prot=mmap.PROT_READ, offset=base)
        except (OSError, ValueError):
            data = os.pread(rfd, n, pos)
            self._take(memoryview(data), data.rfind(b"\n") + 1, c)
            return
        start = pos - base
        whole = memoryview(mm)
        block = whole[start:start + n]
        try:
            cut = mm.rfind(b"\n", start, start + n) + 1
            self._take(block, cut - start if cut else 0, c)
        finally:
            try:
                block.release()
                whole.release()
                mm.close()
            except BufferError:  # a view still held somewhere: the mapping goes with it
                pass

    def _read(self, fd: int) -> None:
        """One read into a reused buffer, one write of it: for a stream that cannot be spliced,
        for redaction (the bytes change before the disk has them), and after a disk error."""
        buf = bytearray(BLOCK)
        view = memoryview(buf)
        while True:
            try:
                n = os.readv(fd, [buf])
            except OSError:          # a pty whose last writer closed: EIO is its end of file
                break
            if not n:
                break
            c = clocks()
            self.last_output = time.monotonic()
            block = view[:n]
            if self.redact:
                self._redacted(bytes(block), c)
                if self.mirror is not None:
                    self.mirror(block)
            else:
                self._write_log(block)
                self._take(block, buf.rfind(b"\n", 0, n) + 1, c)

    def _take(self, block: memoryview, cut: int, c: dict) -> None:
        """A block now in the log: its row, its words, the live view. `cut`: after its last newline (0: none)."""
        if cut:
            is_nl = self._is_nl[:cut]
            np.equal(np.frombuffer(block[:cut], dtype=np.uint8), NEWLINE, out=is_nl)
            self._stamp(int(np.count_nonzero(is_nl)), c)
        self._watch_block(block, cut)
        if self.mirror is not None:
            self.mirror(block)           # copies what it keeps: the block's memory is reused

    def _end(self) -> None:
        """The stream ended: a last line with no newline is a line too (its own row, stamped now)."""
        rest, self._partial = self._partial, b""
        if self.redact:
            if rest:
                self._write_log(self._redact(rest))
        elif rest:
            self._scan(rest)
        if rest or self._unstamped:
            self._stamp(1, clocks())

    def _stamp(self, newlines: int, c: dict) -> None:
        # One row per block: its first line and the clocks; the lines up to the next row's first line
        # arrived at that moment.
        self._write_times(f"{self.lines + 1}\t{c['wall']:.6f}\t{c['monotonic_ns']}\t{c['boottime_ns']}\n")
        self.lines += newlines

    def _watch_block(self, block: memoryview, cut: int) -> None:
        """The fault and dump words in one pass over the block's complete lines (with the line in
        progress before them); only a hit, or a pattern being waited for, decodes them."""
        head, tail = block[:cut], block[cut:]
        partial = self._partial
        if cut:
            seam = partial + bytes(head[:SEAM]) if partial else None
            fault, dump = PREFILTER.hits(head)
            if seam is not None:
                f2, d2 = PREFILTER.hits(seam)
                fault, dump = fault or f2, dump or d2
            waiting = any(not ev.is_set() for _, ev in self._watch)
            if (fault and self.fault_line is None) or dump or waiting:
                self._lines_text(partial + bytes(head), fault, dump)
            partial = b""
        partial += bytes(tail)
        if len(partial) >= MAX_PENDING:          # a line this long is watched in pieces
            self._scan(partial)
            partial = partial[-SEAM:]            # overlapping: a word across the cut is still seen
        self._partial = partial

    def _scan(self, piece: bytes) -> None:
        fault, dump = PREFILTER.hits(piece)
        if (fault and self.fault_line is None) or dump or any(not ev.is_set() for _, ev in self._watch):
            self._lines_text(piece, fault, dump)

    def _lines_text(self, raw: bytes, fault: bool, dump: bool) -> None:
        text = raw.decode(errors="replace")
        if fault and self.fault_line is None:
            hit = next((ln for ln in text.splitlines() if FAULT_LINE.search(ln)), None)
            if hit is not None:
                self.fault_line = hit.strip()[:2000]
        if dump:
            for ln in text.splitlines():
                if DUMP_START.search(ln):
                    self.dumping += 1
                elif DUMP_END.search(ln) and self.dumping:
                    self.dumping -= 1
        for rx, ev in self._watch:
            if not ev.is_set() and rx.search(text):
                ev.set()

    def _redacted(self, block: bytes, c: dict) -> None:
        """Whole lines only: redaction works on lines, and a secret must not reach the disk half-replaced."""
        pending = self._partial + block
        cut = pending.rfind(b"\n") + 1
        if cut == 0 and len(pending) < MAX_PENDING:
            self._partial = pending
            return
        done, self._partial = (pending[:cut], pending[cut:]) if cut else (pending, b"")
        self._write_log(self._redact(done))
        if cut:
            self._stamp(done.count(b"\n"), c)
        self._scan(done)
        self._unstamped = not cut

    def _redact(self, raw: bytes) -> bytes:
        if self._redactor is None:
            self._redactor = redaction.LineStream()
        return self._redactor.feed(raw.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def _write_log(self, data) -> None:
        if self.disk_error:
            return               # keep draining the target; what no longer fits is lost, and said
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._log_fd, view):]
        except OSError as exc:
            self.disk_error = (f"{self.out_dir / layout.log_of(self.name)}: {exc.strerror or exc} after "
                               f"{self.lines} lines; output no longer recorded")

    def _write_times(self, row: str) -> None:
        if self.disk_error:
            return
        try:
            self._times.write(row)
            self._times.flush()
        except OSError as exc:
            self.disk_error = f"{self._times.name}: {exc.strerror or exc} after {self.lines} lines; output no longer recorded"
