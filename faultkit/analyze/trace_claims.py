"""What the trace's in-flight suspects claim (the judge corroborates them with the faults).

A suspect is plausible when it ran on the GPU that faulted (the runtime's node-N is the KFD node
id, which agent_info maps) and on the engine the kernel log blames (SDMA means a copy, a shader
client such as TCP/TC/SQC means a kernel): the judge's corroboration says so. Among them, the
latest gets LATEST. Only a single plausible, named kernel can make the trace's answer `likely`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..judge.claims import BASES, Basis, Claim, Identities
from ..durations import relative
from ..judge.corroborate import LATEST

if TYPE_CHECKING:     # in_flight imports pandas; claims on its suspects need only their fields
    from .in_flight import Suspect

KINDS = {"running-at-fault": "trace-running", "launch-without-dispatch": "trace-launch",
         "dispatch-id-gap": "trace-dispatch-gap", "copy-without-record": "trace-copy", "copy-running": "trace-copy"}


def label(s: Suspect) -> str:
    if s.kernel:
        return s.kernel
    if s.engine == "copy":
        return f"memory copy (correlation id {s.correlation_id})"
    if s.kind == "dispatch-id-gap":
        return f"dispatch {s.dispatch_id} of pid {s.pid} (kernel not recorded)"
    return f"kernel launched by thread {s.thread} (correlation id {s.correlation_id}; name not in the trace)"


def trace_claims(suspects: list[Suspect], producer: str = "rocprofv3", at: int | None = None) -> list[Claim]:
    """One claim per suspect, kept on it (`s.claim`) for the trace's own table. `at`: the fault's
    time on the trace's clock (the headline says how long before it the suspect started)."""
    latest = max((s.start or s.end or 0 for s in suspects), default=0)
    out = []
    for s in suspects:
        kind = KINDS.get(s.kind, "trace-other")
        is_latest = bool(latest) and (s.start or s.end or 0) == latest
        words = s.kind.replace("-", " ") + ("; the latest" if is_latest else "")
        when = f", started at {relative(s.start - at)}" if s.start is not None and at is not None else ""
        s.claim = Claim(label(s), Basis(kind, producer), f"trace: {words}; {s.evidence}",
                        Identities(pid=s.pid, node=s.agent_node, stream=s.stream, engine=s.engine, time_ns=s.start),
                        named=s.kernel is not None, alias=s.alias,
                        headline=f"{label(s)} was in flight at the fault{when} (trace: {s.kind.replace('-', ' ')})",
                        strength=BASES[kind][1] + (LATEST if is_latest else 0.0))
        out.append(s.claim)
    return out
