"""Which groups of words occur in a block of bytes, in one pass at memory speed: the one owner of
"find these words in this block" (the capture's recorder and trials' crash detection read a
target that can print gigabytes).

Hyperscan where it is installed (every word in one SIMD pass); RE2 elsewhere (a DFA over the
alternation: no backtracking, a literal set at grep's speed). Both answer the same question, and
tests/test_fault_lines.py runs every case under both.
"""

from __future__ import annotations

import re
import threading
from typing import Mapping, Sequence

try:
    import re2 as _re2
except ImportError:       # pragma: no cover - the dependency is declared; a broken install still works
    _re2 = None


class WordFinder:
    """`found(block)`: the names of the groups with a word in `block`."""

    def __init__(self, groups: Mapping[str, Sequence[bytes]], engine: str | None = None):
        self.names = list(groups)
        self._of: list[int] = []            # word index -> group index
        words: list[bytes] = []
        for k, name in enumerate(self.names):
            for w in groups[name]:
                words.append(w)
                self._of.append(k)
        self._db = None
        # Hyperscan's scratch space is one scan's at a time: the recorder scans the server's and the
        # client's output on two threads at once (ScratchInUseError, seen live), so each thread has its own.
        self._local = threading.local()
        if engine in (None, "hyperscan"):
            self._db = _hyperscan(words)
            if engine == "hyperscan" and self._db is None:
                raise RuntimeError("hyperscan is not installed here")
        self.engine = "hyperscan" if self._db is not None else "re2" if _re2 is not None else "re"
        # One pattern per group: one alternation of all would miss a group's word that overlaps
        # another group's match ("core" inside "Generating GPU core dump").
        engine_rx = _re2 if _re2 is not None else re
        self._rx = [engine_rx.compile("|".join(re.escape(w.decode()) for w in groups[n]).encode())
                    for n in self.names]

    def found(self, block: bytes) -> set[str]:
        if self._db is not None:
            hit: set[int] = set()
            self._db.scan(block, match_event_handler=lambda i, *_: hit.add(self._of[i]), scratch=self._scratch())
            return {self.names[k] for k in hit}
        return {name for name, rx in zip(self.names, self._rx) if rx.search(block)}


    def _scratch(self):
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            import hyperscan
            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        return scratch


def _hyperscan(words: list[bytes]):
    try:
        import hyperscan
        db = hyperscan.Database()
        db.compile(expressions=[re.escape(w.decode()).encode() for w in words], ids=list(range(len(words))),
                   elements=len(words), flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(words))
        return db
    except Exception:              # noqa: BLE001 - not installed, or no SIMD here: RE2 does it
        return None
