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


def capture_exit_status(manifest: dict) -> int:
    """What `faultkit capture` exits with for this bundle, like a shell: the target's exit status,
    128+N for a signal; an interrupted capture 128+signal. Also what `faultkit show` reports."""
    if manifest.get("ended_by") == "interrupted":
        try:
            sig = signal.Signals[str(manifest.get("interrupted_by") or "SIGINT")]
        except KeyError:                       # a manifest edited by hand, or another platform's name
            sig = signal.SIGINT
        return 128 + int(sig)
    code = manifest.get("exit_code")
    if not isinstance(code, int) or isinstance(code, bool):
        return 0
    return 128 - code if code < 0 else code
