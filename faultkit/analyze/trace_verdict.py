"""Rank the in-flight suspects a trace gives, and say how many remain plausible.

A suspect stays plausible when it ran on the GPU that faulted (the runtime's node-N is the KFD
node id, which agent_info maps) and on the engine the kernel log blames (SDMA means a copy, a
shader client such as TCP/TC/SQC means a kernel). Among those, the latest is ranked first. Only a
single plausible, named kernel makes the trace's answer `likely`.
"""

from __future__ import annotations

from ..model import Fault
from .in_flight import Suspect

BASE = {"running-at-fault": 0.6, "launch-without-dispatch": 0.55, "dispatch-id-gap": 0.5,
        "copy-without-record": 0.5, "copy-running": 0.5}


def fault_nodes(faults: list[Fault]) -> set[int]:
    return {f.node for f in faults if f.node is not None}


def fault_engine(faults: list[Fault]) -> str | None:
    engines = {f.engine for f in faults if f.source == "kernel-log" and f.engine}
    if "copy" in engines:
        return "copy"
    if "shader" in engines:
        return "shader"
    return None


def label(s: Suspect) -> str:
    if s.kernel:
        return s.kernel
    if s.engine == "copy":
        return f"memory copy (correlation id {s.correlation_id})"
    if s.kind == "dispatch-id-gap":
        return f"dispatch {s.dispatch_id} of pid {s.pid} (kernel not recorded)"
    return f"kernel launched by thread {s.thread} (correlation id {s.correlation_id}; name not in the trace)"


def rank(suspects: list[Suspect], faults: list[Fault]) -> tuple[list[Suspect], int]:
    nodes, engine = fault_nodes(faults), fault_engine(faults)
    plausible = 0
    latest = max((s.start or s.end or 0 for s in suspects), default=0)
    for s in suspects:
        score, why = BASE.get(s.kind, 0.4), [s.kind.replace("-", " ")]
        ok = True
        if nodes and s.agent_node is not None:
            if s.agent_node in nodes:
                score += 0.2
                why.append(f"on the faulting GPU (node {s.agent_node})")
            else:
                score *= 0.3
                ok = False
                why.append(f"on node {s.agent_node}, not the faulting node {sorted(nodes)}")
        elif nodes:
            ok = False          # an unknown GPU is not agreement: it cannot make the kernel `likely`
            why.append(f"its GPU is unknown (no agent_info maps the trace's agent ids), not compared with the "
                       f"faulting node {sorted(nodes)}")
        if engine:
            if engine == s.engine:
                score += 0.1
                why.append(f"the kernel log blames the {engine} engine, consistent")
            else:
                score *= 0.3
                ok = False
                why.append(f"but the kernel log blames the {engine} engine")
        if (s.start or s.end or 0) == latest and latest:
            score += 0.05
            why.append("the latest")
        s.score, s.why = round(min(score, 0.89), 3), "; ".join(why)
        plausible += ok
    suspects.sort(key=lambda s: -s.score)
    return suspects, plausible
