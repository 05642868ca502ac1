"""What the traces say about the fault: what was in flight, overlaps, the address.

The orchestrator settles the fault time first and reads only the window before it; this module
takes the trace it read and the fault time, and opens nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model import Fault, Problem
from .fault_time import FaultTime
from .trace_claims import trace_claims

if TYPE_CHECKING:     # the trace model and its analyses import pandas: only a triage with traces loads them
    from ..trace_model import Trace
    from .address import AddressFinding
    from .in_flight import Suspect
    from .overlaps import Overlaps

WINDOW_NS = 2_000_000_000      # in-flight work and overlaps: the last 2 s before the fault


@dataclass
class TraceFindings:
    """What a trace says around the fault: the suspects in the window and their overlaps."""
    trace: Trace
    time: FaultTime
    window_ns: int
    suspects: list[Suspect] = field(default_factory=list)    # ranked by their claims once judged (rank())
    overlaps: Overlaps | None = None
    address: AddressFinding | None = None

    @property
    def plausible(self) -> int:
        """Suspects the judge's corroboration left standing."""
        return sum(1 for s in self.suspects if s.claim is not None and s.claim.plausible)

    def claims(self):
        return trace_claims(self.suspects, at=self.time.on(self.trace.clock))

    def rank(self) -> None:
        """After judging: strongest suspect first."""
        self.suspects.sort(key=lambda s: -s.score)

    def to_json(self) -> dict:
        t = self.trace
        return {"files": t.files, "clock": t.clock, "fault_time": self.time.to_json(), "window_ns": self.window_ns,
                "rows": {k: len(getattr(t, k)) for k in ("dispatches", "copies", "allocations", "api", "agents")},
                "in_flight": [s.to_json() for s in self.suspects[:100]], "plausible_suspects": self.plausible,
                "overlaps": self.overlaps.to_json() if self.overlaps else None,
                "address": self.address.to_json() if self.address else None}


def analyse_traces(trace: Trace, ft: FaultTime, faults: list[Fault], env: dict[str, str] | None,
                   env_source: str, window_ns: int) -> TraceFindings:
    """`window_ns`: how far back the analyses look; `env`: the variables the GPU processes had."""
    from .address import locate
    from .in_flight import find_in_flight
    from .overlaps import find_overlaps, serialization_check
    if trace.clock.startswith("wall") and ft.wall_ns is None and ft.source != "none":
        trace.problems.append(Problem("<trace>", "this trace is on the wall clock and the fault time is not: "
                                                 "the fault time falls back to the trace's end"))
    at = ft.on(trace.clock)
    if at is None and not trace.empty:
        ends = [int(getattr(trace, t)["end"].max()) for t in ("dispatches", "api", "copies", "allocations")
                if len(getattr(trace, t))]
        at = max(ends)            # a trace that is not empty has rows in one of these
        ft = FaultTime(None, "the end of the trace (the last record written before the process died)", None,
                       "the fault came after this; how long after is not known")
        if trace.clock.startswith("wall"):
            ft.wall_ns = at
        else:
            ft.boottime_ns = at
    out = TraceFindings(trace, ft, window_ns)
    lo = at - window_ns if at is not None else None
    out.suspects = find_in_flight(trace, at, window_ns)
    keys = {(s.pid, s.correlation_id) for s in out.suspects if s.correlation_id is not None}
    out.overlaps = find_overlaps(trace, lo, at, keys)
    if env:
        out.overlaps.serialization = serialization_check(out.overlaps, env, env_source)
    address = next((f.address for f in faults if f.source == "runtime" and f.address), None)
    page_only = False
    if address is None:
        address = next((f.address for f in faults if f.source == "kernel-log" and f.address
                        and not f.secondary), None)
        page_only = address is not None
    out.address = locate(trace, address, at, page_only)
    return out


def gpu_process_env(procs: list[dict]) -> dict[str, str]:
    """The environment the GPU processes really had, from a capture's process records (the
    requested one is not evidence: users lose weeks to variables that never reached the server)."""
    gpu = [p for p in procs if p.get("gpu")] or procs
    merged: dict[str, str] = {}
    for p in gpu:
        env = p.get("env")
        if isinstance(env, dict):
            for k, v in env.items():
                merged.setdefault(str(k), str(v))
    return merged
