"""Where a fault address lies against a set of allocations: the one vocabulary and the one rule for
"past the end", shared by the trace's allocation history (analyze/address.py) and the in-process
agent's map of the faulting process (analyze/allocation_owner.py).

  live       inside an allocation live at the fault
  freed      inside one freed before the fault (a use after free)
  past-end   beyond the end of a live allocation, the nearest one below the address, at most
             PAST_END_BYTES beyond it (an out-of-bounds index; a caching allocator's segments put a
             tensor's neighbour megabytes away)
  none       in no allocation the record holds
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

LIVE, FREED, PAST_END, NONE = "live", "freed", "past-end", "none"
PLACED = (LIVE, FREED, PAST_END)          # a placement that narrows the search (judge/decisive.py)
PAST_END_BYTES = 64 << 20

S = TypeVar("S")


def past_end(address: int, live_below: Iterable[S], end: Callable[[S], int],
             prefer: Callable[[S], object] = lambda s: 0) -> S | None:
    """Of the live allocations ending at or below `address`, the one ending nearest it, where the
    address is within PAST_END_BYTES of its end (`prefer` breaks a tie of ends)."""
    best = None
    for s in live_below:
        e = end(s)
        if e <= address < e + PAST_END_BYTES and (best is None or (e, prefer(s)) > (end(best), prefer(best))):
            best = s
    return best
