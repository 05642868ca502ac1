"""The fault address against the trace's allocation history: live, freed, past the end of one, or
none (analyze/placement.py: the vocabulary and the "past the end" rule).

Allocations and frees are paired into lifetimes [base, base+size) x [allocated, freed). The
lifetimes are sorted by base once; each query is a binary search plus a scan back over at most
the largest allocation's span. Caching allocators (PyTorch) allocate big segments and never free
them at the HSA level, so an address maps to a segment, not a tensor: the result says so.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ..trace_model import MISSING, Trace
from .placement import FREED, LIVE, NONE, PAST_END, PAST_END_BYTES, past_end


@dataclass
class Lifetime:
    pid: int
    base: int
    size: int
    allocated: int
    freed: int | None
    agent: str | None

    def to_json(self) -> dict:
        return {"pid": self.pid, "base": f"0x{self.base:x}", "size": self.size, "allocated": self.allocated,
                "freed": self.freed, "agent": self.agent}


def lifetimes(trace: Trace) -> list[Lifetime]:
    a = trace.allocations
    if not len(a):
        return []
    out: list[Lifetime] = []
    open_: dict[tuple[int, int], Lifetime] = {}
    for r in a.sort_values("start", kind="stable").itertuples(index=False):
        op = str(r.operation).upper()
        key = (int(r.pid), int(r.address))
        if "FREE" in op:
            lt = open_.pop(key, None)
            if lt is not None:
                lt.freed = int(r.start)
        elif r.address != MISSING:
            lt = Lifetime(int(r.pid), int(r.address), max(int(r.size), 0), int(r.start), None,
                          str(r.agent) if r.agent not in (None, "") else None)
            out.append(lt)
            open_[key] = lt
    return out


@dataclass
class AddressFinding:
    address: int
    verdict: str               # live | freed | past-end | none | no-allocation-trace (placement.py)
    text: str
    lifetime: Lifetime | None = None
    since: list[Lifetime] | None = None
    distance: int | None = None

    def to_json(self) -> dict:
        return {"address": f"0x{self.address:x}", "verdict": self.verdict, "text": self.text,
                "allocation": self.lifetime.to_json() if self.lifetime else None,
                "allocated_since": [x.to_json() for x in self.since or []][:20], "distance": self.distance}


class AddressIndex:
    def __init__(self, lts: list[Lifetime]):
        self.lts = sorted(lts, key=lambda x: x.base)
        self.bases = [x.base for x in self.lts]
        self.span = max((x.size for x in self.lts), default=0)

    def covering(self, addr: int) -> list[Lifetime]:
        i = bisect.bisect_right(self.bases, addr)
        out = []
        while i > 0:
            i -= 1
            lt = self.lts[i]
            if addr - lt.base > self.span:
                break           # every earlier base is further away than the largest allocation
            if addr < lt.base + max(lt.size, 1):
                out.append(lt)
        return out

    def live_below(self, addr: int, at: int):
        """The allocations live at `at` that start below `addr` and could end within reach of it."""
        i = bisect.bisect_right(self.bases, addr)
        while i > 0:
            i -= 1
            lt = self.lts[i]
            if addr - lt.base > self.span + PAST_END_BYTES:
                break
            if lt.allocated <= at and (lt.freed is None or lt.freed > at):
                yield lt

    def below(self, addr: int, at: int) -> Lifetime | None:
        """The live allocation whose end `addr` is past (placement.past_end)."""
        return past_end(addr, self.live_below(addr, at), lambda lt: lt.base + lt.size)


def locate(trace: Trace, address: int | None, fault_ns: int | None, page_only: bool = False) -> AddressFinding | None:
    if address is None:
        return None
    lts = lifetimes(trace)
    if not lts:
        return AddressFinding(address, "no-allocation-trace", "no allocation trace in the inputs (rocprofv3 "
                              "--memory-allocation-trace, ROCm 6.4+)")
    at = fault_ns if fault_ns is not None else int(np.iinfo(np.int64).max)
    idx = AddressIndex(lts)
    page = " (the kernel log gives the page, not the byte: the access was somewhere in that 4 KiB page)" \
        if page_only else ""
    cover = idx.covering(address)
    live = [x for x in cover if x.allocated <= at and (x.freed is None or x.freed > at)]
    if live:
        lt = max(live, key=lambda x: x.allocated)
        return AddressFinding(address, LIVE, f"0x{address:x} is inside a live allocation of {lt.size:,} bytes at "
                              f"0x{lt.base:x} (offset {address - lt.base:,}), made by pid {lt.pid}{page}; a caching "
                              f"allocator hands out pieces of such segments, so the buffer may still have been "
                              f"released to it", lt)
    freed = [x for x in cover if x.freed is not None and x.freed <= at]
    if freed:
        lt = max(freed, key=lambda x: x.freed)
        since = [x for x in lts if x.allocated > lt.freed and x.allocated <= at and
                 x.base < lt.base + lt.size and lt.base < x.base + x.size]
        ago = at - lt.freed
        return AddressFinding(address, FREED, f"0x{address:x} is inside an allocation of {lt.size:,} bytes "
                              f"at 0x{lt.base:x} that was freed {ago / 1e6:.3f} ms before the fault: a use after free"
                              + (f"; {len(since)} allocation(s) have reused that range since" if since else
                                 "; nothing was allocated there since") + page, lt, since)
    near = idx.below(address, at)
    if near is not None:
        over = address - (near.base + near.size)
        return AddressFinding(address, PAST_END, f"0x{address:x} is {over:,} bytes past the end of a live allocation "
                              f"of {near.size:,} bytes at 0x{near.base:x}: an overflow (out-of-bounds index){page}",
                              near, distance=over)
    return AddressFinding(address, NONE, f"0x{address:x} is in no allocation the trace recorded (never allocated "
                          f"through the traced runtime, a wild pointer, or allocated before tracing started){page}")
