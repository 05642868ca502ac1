"""Tracer output (rocprofv3 CSV/JSON/rocpd, PyTorch profiler JSON): what ran, on which queue, and
the allocations the fault address is held against. Read by path (a trace can be gigabytes), in the
window around the fault time."""

from __future__ import annotations

from .source import Source


def _claims(inc, setting):
    return inc.traces.claims() if inc.traces else []


SOURCE = Source("traces", "tracer output: dispatches, copies, allocations around the fault",
                claims=_claims, json_keys=("trace",),
                sections=("Trace: what ran before the fault", "Trace: overlaps before the fault",
                          "Trace: the fault address"))
