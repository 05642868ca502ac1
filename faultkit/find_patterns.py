r"""Which of many regular expressions may match a text, in one pass: the one owner of "which of
these patterns could match here" (the paste front end asks it at every line junction of a wrapped
paste, for every record pattern of every parser).

Hyperscan in prefilter mode (every pattern at once, SIMD): its answer is a superset, never missing
a pattern that matches, so the caller still runs the pattern itself on the few it names. Its classes
are ASCII's (Unicode ones made the database take 30 s to build): a text that is not all ASCII, where
`\w` or `\s` mean more to Python, gets "any may" (None), as where Hyperscan is not installed; a
pattern it cannot take is always named.
"""

from __future__ import annotations

import re
import threading
from typing import Sequence


class PatternPrefilter:
    """`may(text)`: the indices of the patterns that may match `text` (None: any may)."""

    def __init__(self, patterns: Sequence[re.Pattern]):
        self.n = len(patterns)
        self._always: set[int] = set()        # patterns Hyperscan could not take: always asked
        self._db = _database(patterns, self._always)
        self._local = threading.local()       # (a scratch space is one scan's at a time)

    def may(self, text: str) -> set[int] | None:
        if self._db is None:
            return None
        if not text.isascii():
            return None
        hit = set(self._always)
        self._db.scan(text.encode("ascii"), match_event_handler=lambda i, *_: hit.add(i), scratch=self._scratch())
        return hit

    def _scratch(self):
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            import hyperscan
            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        return scratch


def _database(patterns: Sequence[re.Pattern], always: set[int]):
    try:
        import hyperscan
    except ImportError:                       # pragma: no cover - declared for x86_64 only
        return None
    base = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_ALLOWEMPTY
    table = [(i, p.pattern.encode(), base | (hyperscan.HS_FLAG_CASELESS if p.flags & re.I else 0)
              | (hyperscan.HS_FLAG_MULTILINE if p.flags & re.M else 0) | (hyperscan.HS_FLAG_DOTALL if p.flags & re.S else 0))
             for i, p in enumerate(patterns)]
    db = _compile(hyperscan, table)
    if db is not None:
        return db
    ok = []
    for row in table:                         # one by one: a pattern it cannot take is asked always
        (ok if _compile(hyperscan, [row]) is not None else always.add(row[0]) or []).append(row)
    return _compile(hyperscan, ok) if ok else None


def _compile(hyperscan, rows):
    try:
        db = hyperscan.Database()
        db.compile(expressions=[r[1] for r in rows], ids=[r[0] for r in rows], elements=len(rows),
                   flags=[r[2] for r in rows])
        return db
    except Exception:                         # noqa: BLE001 - Hyperscan's errors have no common type; no SIMD here
        return None
