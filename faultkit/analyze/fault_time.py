"""When the fault happened, on the tracer's clock (CLOCK_BOOTTIME ns), and how well that is known.

rocprofv3 stamps everything with CLOCK_BOOTTIME; plain dmesg prints CLOCK_MONOTONIC seconds (which
stop during suspend); `dmesg -T` and application logs are wall clock. A capture bundle writes the
three clocks side by side at its start and end, and stamps every output line with all three, so
there the mapping is exact. Without a bundle the mapping is an estimate and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..model import KernelLog, RuntimeLog


@dataclass
class FaultTime:
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


def line_stamps(times_tsv: Path) -> list[tuple[int, int]]:
    """Per output line (1-based index - 1), the (CLOCK_BOOTTIME ns, wall ns) capture read it at."""
    out = []
    try:
        for row in times_tsv.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = row.split("\t")
            if len(parts) >= 4:
                out.append((int(parts[3]), int(float(parts[1]) * 1e9)))
    except (OSError, ValueError):
        return out
    return out


def fault_time(runtime: RuntimeLog, kernel: KernelLog, manifest: dict | None,
               trace_end_ns: int | None) -> FaultTime:
    # 1. The runtime's fault line, stamped on arrival by faultkit capture.
    for f in runtime.faults:
        log = Path(f.origin.file)
        tsv = log.with_name(log.stem + ".times.tsv")
        if manifest and f.origin.line and tsv.is_file():
            stamps = line_stamps(tsv)
            if 0 < f.origin.line <= len(stamps):
                boot, wall = stamps[f.origin.line - 1]
                return FaultTime(boot, f"the runtime's fault line ({f.origin}), stamped by capture as it arrived",
                                 5_000_000, "the runtime prints the line a few ms after the GPU interrupt; output "
                                 "buffering can add more", wall)
    # 2. The kernel log's fault block, on CLOCK_MONOTONIC.
    stamped = [v for v in kernel.faults if v.stamp and v.stamp.clock == "monotonic" and v.stamp.seconds is not None]
    if stamped:
        v = stamped[0]
        mono_ns = int(v.stamp.seconds * 1e9)
        start = (manifest or {}).get("start") or {}
        if start.get("boottime_ns") is not None and start.get("monotonic_ns") is not None:
            offset = start["boottime_ns"] - start["monotonic_ns"]
            return FaultTime(mono_ns + offset, f"the kernel log's fault block ({v.origin}), mapped with the capture's "
                                               f"clock anchors", 1_000, "")
        return FaultTime(mono_ns, f"the kernel log's fault block ({v.origin}), taking CLOCK_MONOTONIC as "
                                  f"CLOCK_BOOTTIME", None,
                         "exact only if the machine never suspended since boot; otherwise off by the total "
                         "suspend time (no capture anchors in the inputs to correct it)")
    # 3. The end of the trace.
    if trace_end_ns is not None:
        return FaultTime(trace_end_ns, "the end of the trace (the last record written before the process died)",
                         None, "the fault came after this; how long after is not known")
    return FaultTime(None, "none", None, "no timestamped fault and no trace")


