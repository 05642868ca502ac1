"""What a long step is doing, on a terminal: after two seconds, one line redrawn every half second
(stage, count, elapsed); nothing on a pipe or a file, and nothing for steps that end sooner."""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    def __init__(self, stream=None, after_s: float = 2.0):
        self.stream = stream or sys.stderr
        self.after_s = after_s
        self.text, self.count, self.unit = "", 0, ""
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._shown = False
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False

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
            self._write("\r\x1b[K")

    def _run(self) -> None:
        if self._stop.wait(self.after_s):
            return
        while not self._stop.is_set():
            count = f": {self.count:,} {self.unit}" if self.unit else ""
            self._write(f"\r\x1b[K[faultkit {time.monotonic() - self._start:5.1f} s] {self.text}{count}")
            self._shown = True
            self._stop.wait(0.5)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass
