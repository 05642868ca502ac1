"""What a capture shows while it runs: the target's output as it arrives (as if it ran directly)
and, on a terminal, one status line under it that says what faultkit is watching.

The status line lives on stderr and is erased before each block of the target's output and drawn
again after it, so the two never interleave mid-line; it is drawn only at the start of a line (a
partial line of the target's is never overwritten)."""

from __future__ import annotations

import os
import sys
import threading

from ..terminal import ERASE, clean, isatty, write_bytes, write_text



class Console:
    def __init__(self, quiet: bool = False, out=None, err=None):
        self.quiet = quiet
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.tty = not quiet and isatty(self.err)
        self._lock = threading.Lock()
        self._line = ""                # the status line now on screen
        self._at_line_start = True

    def output(self, data: bytes) -> None:
        """A block of the target's output (any thread)."""
        if self.quiet or not data:
            return
        with self._lock:
            self._erase()
            write_bytes(self.out, data)
            self._at_line_start = data.endswith(b"\n")
            self._draw()

    def status(self, text: str) -> None:
        if not self.tty:
            return
        try:
            width = max(20, os.get_terminal_size(self.err.fileno()).columns - 1)   # the terminal's own width
        except (OSError, ValueError, AttributeError):
            width = 99
        with self._lock:
            self._erase()
            self._line = text[:width]
            self._draw()

    def message(self, text: str) -> None:
        """faultkit's own line (a warning, a step): on stderr, never inside the status line."""
        with self._lock:
            self._erase()
            prefix = "" if self._at_line_start else "\n"
            self._at_line_start = True
            write_text(self.err, prefix + clean(text) + "\n")     # evidence in a warning drives no terminal
            self._draw()

    def close(self) -> None:
        with self._lock:
            self._erase()
            self._line = ""

    def _erase(self) -> None:
        if self.tty and self._line and self._at_line_start:
            write_text(self.err, ERASE)

    def _draw(self) -> None:
        if self.tty and self._line and self._at_line_start:
            write_text(self.err, self._line)
