"""Exit statuses in words, shared by capture and trials."""

from __future__ import annotations

import signal


def exit_words(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code > 128:
        try:
            return f"exit {code} ({signal.Signals(code - 128).name} in a shell)"
        except ValueError:
            pass
    return f"exit {code}"
