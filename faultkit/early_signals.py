"""Signals that come while faultkit itself starts, held for the verb that will own them.

`faultkit capture` spends about half a second importing before its own handlers are in place; a
SIGTERM or SIGHUP there ended it by the signal's default action and left no bundle. The command
line holds them from its first line (`hold`), and the capture takes what came (`take`), so an
interrupt at any moment after the interpreter itself started ends in a finished bundle.
"""

from __future__ import annotations

import signal

# The signals that end a capture or a trial cleanly (the tree stopped, the manifest finished):
# the one list DeferredSigint and the early hold share.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_pending: list[int] = []
_original: dict[int, object] = {}        # the handlers from before the hold, for the owner to restore


def inherited_ignore(signum: int) -> bool:
    """Whether the parent started faultkit with this signal ignored (nohup's SIGHUP, a shell's
    background job's SIGINT): what the caller asked for stays so."""
    return _original.get(signum, signal.getsignal(signum)) is signal.SIG_IGN


def hold() -> None:
    """Record the stop signals instead of dying of them, until `take` hands them on."""
    for s in STOP_SIGNALS:
        if s in _original:
            continue
        old = signal.getsignal(s)
        _original[s] = old
        if old is not signal.SIG_IGN:
            signal.signal(s, _record)


def _record(signum, frame) -> None:
    _pending.append(signum)


def take() -> tuple[list[int], dict[int, object]]:
    """The signals held so far (in order) and the handlers from before the hold; the hold ends here:
    the caller installs its own and restores these when done."""
    pending, original = list(_pending), dict(_original)
    _pending.clear()
    _original.clear()
    return pending, original


def holding_for(argv: list[str]) -> bool:
    """Only a capture holds signals early: every other verb ends at once on them, as before."""
    return len(argv) > 1 and argv[1] == "capture"
