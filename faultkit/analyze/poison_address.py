"""Whether a fault address is made of the poison amplifier's bytes, and which freed block it came from.

The poison amplifier (faultkit/agent/poison.cpp) fills each freed block with one byte b repeated (the
64-bit word W = b x 0x0101010101010101), a different byte for each fill in turn, and records every fill
(the block, its size, the byte, the time) in the allocation tracker's ring. A kernel that reads such a
block through a stale pointer faults at W plus a small offset; one that reads an index from it and
scales it by a power-of-two stride 2^k into a live allocation faults at base + (W << k) + offset.
For the bytes poison.cpp uses (2 to 7 bits set) both lie at or above 2^57, where no real address is.
So a fault address A is poison-derived when, for a byte b the ring holds fills of and some
k <= MAX_SHIFT, A - (W << k) (mod 2^64) lies inside an allocation live at the fault (an index read
from the block), or A - W is below POINTER_SLACK (a pointer read from it). The fill of that byte
closest before the fault names the block: where it was allocated, and how long before the fault it
was freed. The stride is known only up to a factor of 256 (the byte repeats every 8 bits); strides
that are not powers of two, and 32-bit indices, are not decoded.
"""

from __future__ import annotations

from dataclasses import dataclass

REPEAT = 0x0101010101010101
MASK = (1 << 64) - 1
MAX_SHIFT = 20                # strides up to 1 MiB per index
POINTER_SLACK = 1 << 20       # a pointer read from poison, plus at most this offset
NOT_A_REAL_ADDRESS = 1 << 57  # every poison-derived address is at or above this


def is_tag(byte: int) -> bool:
    """The bytes poison.cpp rotates through (its TAGS): 2 to 7 bits set."""
    return 2 <= bin(byte & 0xFF).count("1") <= 7


def word(byte: int) -> int:
    return (byte & 0xFF) * REPEAT


@dataclass
class PoisonRead:
    """A fault address built from a poison fill's byte: the read of freed or uninitialised memory."""
    byte: int
    how: str                      # index | pointer
    shifts: list[int]             # index reads: the strides 2**k that fit (k apart by 8: a repeated byte cannot tell)
    into: object | None           # the live allocation (an Interval) the index pointed into
    fill: object                  # the fill (an AllocEvent of kind "poison") whose byte it is
    earlier_same_byte: int        # older fills of the same byte before the fault (the ring cannot tell them apart)


def decode(address: int, fills: list, live: list, at: int | None) -> PoisonRead | None:
    """`fills`: the ring's poison records; `live`: the allocations (Intervals) live at the fault;
    `at`: the fault's time on the ring's clock (None: the map's end)."""
    if address < NOT_A_REAL_ADDRESS:
        return None
    before = [f for f in fills if at is None or f.t_ns <= at]
    for byte in sorted({f.extra & 0xFF for f in before if is_tag(f.extra)}):
        w = word(byte)
        found = None
        if 0 <= (address - w) & MASK < POINTER_SLACK:
            found = ("pointer", [], None)
        else:
            # W << (k + 8) is (W << k) - (byte << k): strides 8 bits apart land a few bytes apart, in
            # the same allocation; every k that fits is kept
            fits = []
            for k in range(MAX_SHIFT + 1):
                d = (address - (w << k)) & MASK
                hit = next((iv for iv in live if iv.base <= d < iv.end), None)
                if hit is not None:
                    fits.append((k, hit))
            if fits:
                found = ("index", [k for k, _ in fits], fits[0][1])
        if found is None:
            continue
        same = sorted((f for f in before if f.extra & 0xFF == byte), key=lambda f: f.seq)
        return PoisonRead(byte, found[0], found[1], found[2], same[-1], len(same) - 1)
    return None
