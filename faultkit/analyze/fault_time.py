"""When the fault happened, on the tracer's clock (CLOCK_BOOTTIME ns), and how well that is known.

rocprofv3 stamps everything with CLOCK_BOOTTIME; plain dmesg prints CLOCK_MONOTONIC seconds (which
stop during suspend); `dmesg -T` and application logs are wall clock. A capture bundle writes the
three clocks side by side at its start and end, and stamps every output line with all three, so
there the mapping is exact. Without a bundle the mapping is an estimate and says so.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..manifest import Clocks
from ..model import KernelLog, RuntimeLog, Xid

SM_EXCEPTION_XID = 13


@dataclass
class FaultTime:
    """When the fault happened on the trace's clock, with its source and how far off it may be."""
    boottime_ns: int | None
    source: str                      # what gave it
    uncertainty_ns: int | None       # how far off it could be, where that can be said
    note: str = ""
    wall_ns: int | None = None       # the same moment on the wall clock, where known (PyTorch traces use it)

    def on(self, clock: str) -> int | None:
        return self.wall_ns if clock.startswith("wall") else self.boottime_ns

    def to_json(self) -> dict:
        return {"boottime_ns": self.boottime_ns, "wall_ns": self.wall_ns, "source": self.source,
                "uncertainty_ns": self.uncertainty_ns, "note": self.note}


def arrival(rows: list[tuple[int, int, int]], line: int) -> tuple[int, int] | None:
    """(CLOCK_BOOTTIME ns, wall ns) at which capture read this line: the row of the block holding it."""
    i = bisect.bisect_right(rows, (line, float("inf"), float("inf"))) - 1
    return (rows[i][1], rows[i][2]) if i >= 0 else None


@dataclass
class LogClock:
    """CLOCK_BOOTTIME of any evidence line of a capture bundle: output lines by their arrival
    stamps, kernel-log lines by their CLOCK_MONOTONIC stamp and the capture's clock anchors."""
    stamps: dict[str, list[tuple[int, int, int]]]
    anchors: Clocks | None      # the capture's start (manifest.start)

    def arrival(self, file: str | None, line: int | None) -> tuple[int, int] | None:
        """(CLOCK_BOOTTIME ns, wall ns) at which the capture read this line of an output log."""
        rows = self.stamps.get(file) if file else None
        return arrival(rows, line) if rows and line else None

    def of_line(self, file: str | None, line: int | None) -> int | None:
        at = self.arrival(file, line)
        return at[0] if at else None

    def boottime_offset(self) -> int | None:
        """CLOCK_BOOTTIME - CLOCK_MONOTONIC at the capture's start (suspend time since boot)."""
        a = self.anchors
        return a.boottime_ns - a.monotonic_ns if a and a.boottime_ns is not None and a.monotonic_ns is not None \
            else None

    def of_monotonic(self, seconds: float | None) -> int | None:
        offset = self.boottime_offset()
        return None if seconds is None or offset is None else int(seconds * 1e9) + offset


def fault_time(runtime: RuntimeLog, kernel: KernelLog, clock: LogClock | None,
               trace_end_ns: int | None) -> FaultTime:
    """`clock`: a capture bundle's arrival stamps and clock anchors (None for loose files)."""
    # 1. The runtime's fault line, stamped on arrival by faultkit capture.
    for f in runtime.faults:
        at = clock.arrival(f.origin.file, f.origin.line) if clock is not None and f.origin else None
        if at is not None:
            boot, wall = at
            return FaultTime(boot, f"the runtime's fault line ({f.origin}), stamped by capture as it arrived",
                             5_000_000, "the runtime prints the line a few ms after the GPU interrupt; output "
                             "buffering can add more", wall)
    # 2. The kernel log's fault block, on CLOCK_MONOTONIC: an amdgpu VM fault, or NVIDIA's Xid 13 (the SM's
    # warp exception, logged as it happens: on the H200 5.5 ms after the stale table's poison fill, where
    # the CUDA driver's own "Detected an exception" line came 0.84 s later; Xid 31 can come at teardown)
    stamped = [v for v in [*kernel.faults, *(x for x in kernel.xids if x.xid == SM_EXCEPTION_XID)]
               if v.stamp and v.stamp.clock == "monotonic" and v.stamp.seconds is not None]
    if stamped:
        v = stamped[0]
        what = f"Xid {v.xid}" if isinstance(v, Xid) else "fault block"
        mono_ns = int(v.stamp.seconds * 1e9)
        offset = clock.boottime_offset() if clock is not None else None
        if offset is not None:
            return FaultTime(mono_ns + offset, f"the kernel log's {what} ({v.origin}), mapped with the capture's "
                                               f"clock anchors", 1_000, "")
        return FaultTime(mono_ns, f"the kernel log's {what} ({v.origin}), taking CLOCK_MONOTONIC as "
                                  f"CLOCK_BOOTTIME", None,
                         "exact only if the machine never suspended since boot; otherwise off by the total "
                         "suspend time (no capture anchors in the inputs to correct it)")
    # 3. The end of the trace.
    if trace_end_ns is not None:
        return FaultTime(trace_end_ns, "the end of the trace (the last record written before the process died)",
                         None, "the fault came after this; how long after is not known")
    return FaultTime(None, "none", None, "no timestamped fault and no trace")


