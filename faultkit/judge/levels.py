"""The one level vocabulary (DESIGN.md's levels): how sure the verdict, a claim's ceiling and the
level a claim was allowed are. The judge assigns levels; everything else (--fail-on, the fleet,
the next steps, the report's CSS, the hang's words) reads them from here."""

from __future__ import annotations

from typing import Literal

Level = Literal["certain", "likely", "candidates", "unknown"]
CERTAIN: Level = "certain"        # a tool watched the faulting wave, or a core holds it
LIKELY: Level = "likely"          # one candidate is left after the evidence
CANDIDATES: Level = "candidates"  # ranked candidates, none confirmed
UNKNOWN: Level = "unknown"        # nothing names a kernel: what to capture next
LEVELS: tuple[Level, ...] = (CERTAIN, LIKELY, CANDIDATES, UNKNOWN)    # surest first
RANK: dict[str, int] = {UNKNOWN: 0, CANDIDATES: 1, LIKELY: 2, CERTAIN: 3}


def reaches(level: str, threshold: str) -> bool:
    """`level` is at least as sure as `threshold` (`--fail-on likely` fires on certain too)."""
    return RANK.get(level, 0) >= RANK[threshold]


def lower(level: str, to: str) -> str:
    """The less sure of the two."""
    return to if RANK[to] < RANK[level] else level
