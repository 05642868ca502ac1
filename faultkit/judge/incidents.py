"""One incident per fault group: when the evidence holds faults of several processes, each gets
its own verdict from the evidence that belongs to it.

A fault belongs to a process by its pid, or by the correlation group (same page, same burst) of
a fault that has one. A claim belongs to the incident of its pid; a claim without a pid (a
debugger stop, a log without worker prefixes) or of a process that did not fault cannot be told
apart, so it joins the first incident, where corroboration compares its pid: the top-level verdict
is the first fault's, and another process's fault is never certified by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import Fault, Verdict
from .claims import Claim


@dataclass
class FaultGroup:
    """The faults of one incident (processes, GPUs) with the claims judged for it."""
    pids: list[int]
    faults: list[Fault]
    gpus: list[str] = field(default_factory=list)
    verdict: Verdict | None = None
    claims: list[Claim] = field(default_factory=list)     # the evidence judged for this incident

    def to_json(self, all_faults: list[Fault]) -> dict:
        index = {id(f): i for i, f in enumerate(all_faults)}
        return {"pids": self.pids, "gpus": self.gpus, "faults": [index[id(f)] for f in self.faults],
                "verdict": self.verdict.to_json() if self.verdict else None}


def split(faults: list[Fault]) -> list[FaultGroup]:
    """Faults by process, in the order their first fault appears; [] when there are none."""
    pid_of_group = {f.group: f.pid for f in faults if f.group is not None and f.pid is not None}
    order: list[int | None] = []
    members: dict[int | None, list[Fault]] = {}
    for f in faults:
        pid = f.pid if f.pid is not None else pid_of_group.get(f.group) if f.group is not None else None
        if pid not in members:
            order.append(pid)
            members[pid] = []
        members[pid].append(f)
    keyed = [p for p in order if p is not None]
    if not keyed:
        return [FaultGroup([], list(faults), _gpus(faults))] if faults else []
    # Faults no pid can place go with the first process's: they cannot be another's proof.
    first = keyed[0]
    position = {id(f): i for i, f in enumerate(faults)}
    groups = []
    for pid in keyed:
        fs = members[pid] + (members.get(None, []) if pid == first else [])
        fs.sort(key=lambda f: position[id(f)])
        groups.append(FaultGroup([pid], fs, _gpus(fs)))
    return groups


def _gpus(faults: list[Fault]) -> list[str]:
    return sorted({f.gpu for f in faults if f.gpu})


def assign(claims: list[Claim], groups: list[FaultGroup]) -> None:
    """Each claim to the incident of its pid, else to the first."""
    for c in claims:
        home = next((g for g in groups if c.ids.pid is not None and c.ids.pid in g.pids), groups[0])
        home.claims.append(c)
