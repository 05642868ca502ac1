"""Times as people read them next to a fault: relative to it, in the unit that fits."""

from __future__ import annotations


def relative(ns: int) -> str:
    """-3.2 ms, -850 µs, +12 ms, -1.5 s."""
    a = abs(ns)
    sign = "-" if ns < 0 else "+" if ns > 0 else ""
    if a >= 1_000_000_000:
        return f"{sign}{a / 1e9:.3g} s"
    if a >= 1_000_000:
        return f"{sign}{a / 1e6:.3g} ms"
    if a >= 1_000:
        return f"{sign}{a / 1e3:.3g} µs"
    return f"{sign}{a} ns"


def when(ns: int, fault_ns: int | None) -> str:
    """A trace time said relative to the fault where the fault time is known, else as it is."""
    return f"{relative(ns - fault_ns)} from the fault" if fault_ns is not None else f"{ns} ns"


def exact_seconds(ms: int) -> str:
    """A producer's milliseconds in seconds with every digit it printed: 1800077 -> 1800.077 s."""
    return f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + " s"
