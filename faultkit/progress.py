"""What a long step is doing, on a terminal: after two seconds, one line redrawn every half second
(stage, count, elapsed); nothing on a pipe or a file, and nothing for steps that end sooner."""

from __future__ import annotations

import sys
import threading
import time

from .terminal import ERASE, isatty, write_text


class Progress:
    def __init__(self, stream=None, after_s: float = 2.0):
        self.stream = stream or sys.stderr
        self.after_s = after_s
        self.text, self.count, self.unit = "", 0, ""
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._shown = False
        self.tty = isatty(self.stream)

    def stage(self, text: str, unit: str = "") -> None:
        self.text, self.count, self.unit = text, 0, unit

    def add(self, n: int) -> None:
        self.count += n              # read by the drawing thread; an int update needs no lock

    def __enter__(self) -> "Progress":
        if self.tty:
            threading.Thread(target=self._run, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._shown:
            write_text(self.stream, ERASE)

    def _run(self) -> None:
        if self._stop.wait(self.after_s):
            return
        while not self._stop.is_set():
            count = f": {self.count:,} {self.unit}" if self.unit else ""
            write_text(self.stream, f"{ERASE}[faultkit {time.monotonic() - self._start:5.1f} s] {self.text}{count}")
            self._shown = True
            self._stop.wait(0.5)
