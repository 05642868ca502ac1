"""What a thread waits in when py-spy (without --native) shows no frame for it.

py-spy marks a thread `idle` when it has released the GIL: it is in a C call. Builtins have no
Python frame, so `with lock:`, `lock.acquire()`, `time.sleep(1)` or `select.select(...)` called
from the program's own code all show as the program's own line and nothing below it. The line
itself, where the dump's reader could read the file (ingest/source_lines.py puts it on the frame),
says which call it is; otherwise the call is unknown and only --native shows it.
"""

from __future__ import annotations

import re

# A `with` whose context expression is a plain name or attribute (no call): entering it blocked
# with the GIL released is a C `__enter__` that waits, a Lock or RLock (a Condition, a Semaphore
# have Python `__enter__`s, whose frames would show in threading.py). `.acquire(` is a lock too.
LOCK_LINE = re.compile(r"^\s*(?:async\s+)?with\s+[\w.]+(?:\s*,\s*[\w.]+)*\s*:|\.acquire\(")
# Calls of the standard library that wait with no Python frame, by the source line: the kind is
# analyze/waits.py's (idle waits stay idle: a server sleeping or selecting in its own loop).
LINE_KINDS: tuple[tuple[str, re.Pattern], ...] = (
    ("lock", LOCK_LINE),
    ("sleep", re.compile(r"\bsleep\(")),
    ("socket", re.compile(r"\b(?:select|poll|epoll|accept|recv\w*|recvfrom|serve_forever)\(")),
    ("read", re.compile(r"\b(?:os\.)?read\(|\.readline\(")),
    ("subprocess", re.compile(r"\bwaitpid\(|\bos\.wait\(")),
)


def kind_of_line(text: str | None) -> str | None:
    """The wait a blocked source line is (LINE_KINDS), or None: unknown."""
    if not text:
        return None
    return next((k for k, rx in LINE_KINDS if rx.search(text)), None)
