"""What a capture shows while it runs: the target's output as it arrives (as if it ran directly)
and, on a terminal, one status line under it that says what faultkit is watching.

The status line lives on stderr and is erased before each block of the target's output and drawn
again after it, so the two never interleave mid-line; it is drawn only at the start of a line (a
partial line of the target's is never overwritten).

The target's output is shown by a thread of its own through a bounded queue: where faultkit's
stdout does not keep up (a pipe nobody drains, a paused `less`), what does not fit is dropped and
counted, never waited for: the target must not block behind its viewer (the bundle has it all)."""

from __future__ import annotations

import collections
import os
import sys
import threading
import time

from ..terminal import ERASE, clean, isatty, write_bytes, write_text



WARNING = "WARNING"          # how faultkit's warnings begin (what -q still says)


class Console:
    QUEUE_BYTES = 16 << 20         # output held for a slow viewer before blocks are dropped
    BATCH_S = 0.002                # between batches: at 2 GB/s 4 MB come meanwhile, a quarter of the queue

    def __init__(self, quiet: bool = False, out=None, err=None):
        self.quiet = quiet
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.tty = not quiet and isatty(self.err)
        self._lock = threading.Lock()
        self._line = ""                # the status line now on screen
        self._at_line_start = True
        self.dropped = 0               # bytes of the target's output not shown (the viewer was stuck)
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._ready = threading.Condition()
        self._writer: threading.Thread | None = None

    def output(self, data: bytes | memoryview) -> None:
        """A block of the target's output (the reader's thread): copied into the queue, or dropped
        when full (the recorder reuses its buffer, and never waits here)."""
        if self.quiet or not data:
            return
        with self._ready:
            if self._queued + len(data) > self.QUEUE_BYTES:
                self.dropped += len(data)
                return
            data = bytes(data)
            self._queue.append(data)
            self._queued += len(data)
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, daemon=True)
                self._writer.start()
            self._ready.notify()

    def _write_loop(self) -> None:
        while True:
            with self._ready:
                while not self._queue:
                    self._ready.wait()
                batch = list(self._queue)
                self._queue.clear()
            with self._lock:
                self._erase()
                for data in batch:
                    self._write_out(data)        # may block on a stuck viewer: only this thread waits
                self._at_line_start = batch[-1].endswith(b"\n")
                self._draw()
            with self._ready:
                self._queued -= sum(map(len, batch))
                self._ready.notify_all()
            # A pause before the next batch: while this thread sleeps it waits on nothing, so a
            # recorder handing over block after block wakes no one (a wake-up per block cost the
            # recorder a third of its time on 2 cores: the woken thread took its CPU and the GIL).
            time.sleep(self.BATCH_S)

    def _write_out(self, data: bytes) -> None:
        """Straight to the file descriptor where there is one: a write blocked here must not hold
        the lock of sys.stdout's buffer, which the interpreter takes again at exit."""
        try:
            fd = self.out.fileno()
            self.out.flush()
        except (OSError, ValueError, AttributeError):
            write_bytes(self.out, data)
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass                          # a closed viewer: the bundle still has it all

    def drain(self, timeout: float) -> int:
        """Wait up to `timeout` for the queued output to be shown; what is left counts as dropped.
        Returns the bytes dropped in all."""
        end = time.monotonic() + timeout
        with self._ready:
            while self._queued and time.monotonic() < end:
                self._ready.wait(0.05)
            if self._queued:
                self.dropped += self._queued
                self._queue.clear()
                self._queued = 0
        return self.dropped

    def status(self, text: str) -> None:
        if not self.tty:
            return
        try:
            # the terminal's own width; 0 columns is a pty nobody sized (script, docker exec -t): unknown
            columns = os.get_terminal_size(self.err.fileno()).columns
            width = max(20, columns - 1) if columns else 99
        except (OSError, ValueError, AttributeError):
            width = 99
        if not self._lock.acquire(timeout=0.2):
            return                      # the output thread is stuck writing: skip this redraw
        try:
            self._erase()
            self._line = text[:width]
            self._draw()
        finally:
            self._lock.release()

    def message(self, text: str) -> None:
        """faultkit's own line (a warning, a step): on stderr, never inside the status line. Quiet
        (-q): warnings only, as on every verb (a step is progress)."""
        if self.quiet and not text.startswith(WARNING):
            return
        locked = self._lock.acquire(timeout=1.0)     # said even while the output thread is stuck
        try:
            self._erase()
            prefix = "" if self._at_line_start else "\n"
            self._at_line_start = True
            write_text(self.err, prefix + clean(text) + "\n")     # evidence in a warning drives no terminal
            self._draw()
        finally:
            if locked:
                self._lock.release()

    def close(self) -> None:
        """The status line goes; the target's last output is still shown (see drain)."""
        locked = self._lock.acquire(timeout=1.0)
        try:
            self._erase()
            self._line = ""
        finally:
            if locked:
                self._lock.release()

    def _erase(self) -> None:
        if self.tty and self._line and self._at_line_start:
            write_text(self.err, ERASE)

    def _draw(self) -> None:
        if self.tty and self._line and self._at_line_start:
            write_text(self.err, self._line)
