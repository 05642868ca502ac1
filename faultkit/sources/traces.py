"""Tracer output (rocprofv3 CSV/JSON/rocpd, PyTorch profiler JSON): what ran, on which queue, and
the allocations the fault address is held against. Read by path (a trace can be gigabytes), in the
window around the fault time."""

from __future__ import annotations

from ..analyze.placement import PLACED
from ..judge import Basis, Claim, Identities
from .source import Source




def _claims(inc, setting):
    if not inc.traces:
        return []
    out = inc.traces.claims()
    a = inc.traces.address
    if a is not None and a.verdict in PLACED:       # where the trace's allocations place the address
        out.append(Claim(None, Basis("trace-address", "trace allocations"), a.text,
                         Identities(page=a.address >> 12, pid=a.lifetime.pid if a.lifetime else None),
                         headline=a.text))
    return out


SOURCE = Source("traces", "tracer output: dispatches, copies, allocations around the fault",
                claims=_claims, json_keys=("trace",),
                sections=("Trace: what ran before the fault", "Trace: overlaps before the fault",
                          "Trace: the fault address"))
