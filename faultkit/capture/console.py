"""What a capture shows while it runs: the target's output as it arrives (as if it ran directly)
and, on a terminal, one status line under it that says what faultkit is watching.

The status line lives on stderr and is erased before each block of the target's output and drawn
again after it, so the two never interleave mid-line; it is drawn only at the start of a line (a
partial line of the target's is never overwritten)."""

from __future__ import annotations

import os
import threading

ERASE = b"\r\x1b[K"


class Console:
    def __init__(self, quiet: bool = False, out_fd: int = 1, err_fd: int = 2):
        self.quiet = quiet
        self.out_fd, self.err_fd = out_fd, err_fd
        self.tty = not quiet and _isatty(err_fd)
        self._lock = threading.Lock()
        self._line = b""               # the status line now on screen
        self._at_line_start = True

    def output(self, data: bytes) -> None:
        """A block of the target's output (any thread)."""
        if self.quiet or not data:
            return
        with self._lock:
            self._erase()
            _write(self.out_fd, data)
            self._at_line_start = data.endswith(b"\n")
            self._draw()

    def status(self, text: str) -> None:
        if not self.tty:
            return
        try:
            width = max(20, os.get_terminal_size(self.err_fd).columns - 1)   # the terminal's own width
        except OSError:
            width = 99
        with self._lock:
            self._erase()
            self._line = text[:width].encode("utf-8", "replace")
            self._draw()

    def message(self, text: str) -> None:
        """faultkit's own line (a warning, a step): on stderr, never inside the status line."""
        with self._lock:
            self._erase()
            if not self._at_line_start:
                _write(self.err_fd, b"\n")
                self._at_line_start = True
            _write(self.err_fd, text.encode("utf-8", "replace") + b"\n")
            self._draw()

    def close(self) -> None:
        with self._lock:
            self._erase()
            self._line = b""

    def _erase(self) -> None:
        if self.tty and self._line and self._at_line_start:
            _write(self.err_fd, ERASE)

    def _draw(self) -> None:
        if self.tty and self._line and self._at_line_start:
            _write(self.err_fd, self._line)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _write(fd: int, data: bytes) -> None:
    try:
        while data:
            n = os.write(fd, data)
            data = data[n:]
    except OSError:          # a closed or broken terminal never stops the capture
        pass
