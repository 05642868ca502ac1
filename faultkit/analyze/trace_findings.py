"""What the traces say about the fault: one clock, what was in flight, overlaps, the address.

Loading is bounded: the fault time is settled first (from the logs, or the trace's end), then
only the window before it is read from large kernel and API traces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..ingest.rocprof import Trace, read_trace_paths, trace_end_ns, trace_files
from ..model import Fault, KernelLog, Problem, RuntimeLog
from .address import AddressFinding, locate
from .fault_time import FaultTime, fault_time
from .in_flight import Suspect, find_in_flight
from .overlaps import Overlaps, find_overlaps, serialization_check
from .trace_verdict import label, rank

WINDOW_NS = 2_000_000_000      # in-flight work and overlaps: the last 2 s before the fault


@dataclass
class TraceFindings:
    trace: Trace
    time: FaultTime
    window_ns: int
    suspects: list[Suspect] = field(default_factory=list)
    plausible: int = 0
    overlaps: Overlaps | None = None
    address: AddressFinding | None = None

    def to_json(self) -> dict:
        t = self.trace
        return {"files": t.files, "clock": t.clock, "fault_time": self.time.to_json(), "window_ns": self.window_ns,
                "rows": {k: len(getattr(t, k)) for k in ("dispatches", "copies", "allocations", "api", "agents")},
                "in_flight": [s.to_json() for s in self.suspects[:100]], "plausible_suspects": self.plausible,
                "overlaps": self.overlaps.to_json() if self.overlaps else None,
                "address": self.address.to_json() if self.address else None}


def analyse_traces(paths: list[str], runtime: RuntimeLog, kernel: KernelLog, faults: list[Fault],
                   manifest: dict | None, env: dict[str, str] | None = None, env_source: str = "",
                   window_ns: int = WINDOW_NS, read_ns: int | None = None) -> TraceFindings:
    """`window_ns`: how far back the analyses look; `read_ns`: how much of the trace to load
    (a timeline shows more than the analyses need)."""
    files = trace_files(paths)           # walked once: the end of the trace, then the window
    ft = fault_time(runtime, kernel, manifest, trace_end_ns(files))
    span = max(window_ns, read_ns or 0)
    since = (ft.boottime_ns - span) if ft.boottime_ns is not None else None
    trace = read_trace_paths(files, since_ns=since)
    if trace.clock.startswith("wall") and ft.wall_ns is None and ft.source != "none":
        trace.problems.append(Problem("<trace>", "this trace is on the wall clock and the fault time is not: "
                                                 "the fault time falls back to the trace's end"))
    at = ft.on(trace.clock)
    if at is None and not trace.empty:
        ends = [int(getattr(trace, t)["end"].max()) for t in ("dispatches", "api", "copies") if len(getattr(trace, t))]
        at = max(ends)
        ft = FaultTime(None, "the end of the trace (the last record written before the process died)", None,
                       "the fault came after this; how long after is not known")
        if trace.clock.startswith("wall"):
            ft.wall_ns = at
        else:
            ft.boottime_ns = at
    out = TraceFindings(trace, ft, window_ns)
    lo = at - window_ns if at is not None else None
    suspects = find_in_flight(trace, at, window_ns)
    out.suspects, out.plausible = rank(suspects, faults)
    keys = {(s.pid, s.correlation_id) for s in out.suspects if s.correlation_id is not None}
    out.overlaps = find_overlaps(trace, lo, at, keys)
    env = env if env is not None else _bundle_env(manifest, paths)
    if env:
        out.overlaps.serialization = serialization_check(out.overlaps, env, env_source or "the capture's "
                                                         "process environment record")
    address = next((f.address for f in faults if f.source == "runtime" and f.address), None)
    page_only = False
    if address is None:
        address = next((f.address for f in faults if f.source == "kernel-log" and f.address
                        and not f.detail.get("secondary")), None)
        page_only = address is not None
    out.address = locate(trace, address, at, page_only)
    return out


def _bundle_env(manifest: dict | None, paths: list[str]) -> dict[str, str]:
    """The environment the GPU processes really had, from a capture's environ.json (the requested
    one is not evidence: users lose weeks to variables that never reached the server)."""
    if not manifest or not paths:
        return {}
    root = Path(paths[0])
    for parent in [root, *root.parents]:
        rec = parent / "environ.json"
        if rec.is_file():
            try:
                procs = json.loads(rec.read_text())
            except (OSError, ValueError):
                return {}
            gpu = [p for p in procs if p.get("gpu")] or procs
            merged: dict[str, str] = {}
            for p in gpu:
                for k, v in (p.get("env") or {}).items():
                    merged.setdefault(k, v)
            return merged
    return {}


def trace_candidates(findings: TraceFindings) -> list[tuple[str, float, str, bool]]:
    """(label, score, why, whether the label is a kernel's name rather than a description)."""
    out, seen = [], set()
    for s in findings.suspects:
        name = label(s)
        if name in seen:
            continue
        seen.add(name)
        out.append((name, s.score, f"trace: {s.why}; {s.evidence}", s.kernel is not None))
    return out[:10]
