"""What was running on the GPU when it faulted, from a trace that cannot show it directly.

rocprofv3 writes a kernel record only when the kernel completes, so the faulting dispatch is not
in the kernel trace (reference/rocprofv3_outputs.md §9.1). It still leaves marks: the launch call
is traced at API exit (a launch whose correlation id has no dispatch record was never completed),
Dispatch_Id is assigned at enqueue (a hole in the ids is a dispatch that never completed), and
a dispatch whose interval holds the fault time was running then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from ..durations import when
from ..trace_model import MISSING, Trace

LAUNCH = re.compile(r"^(?:hip(?:Ext)?(?:Module)?LaunchKernel|hipLaunchCooperativeKernel\w*|hipExtLaunch\w*|"
                    r"hipGraphLaunch|hipLaunchByPtr|hipModuleLaunchCooperativeKernel\w*|cudaLaunchKernel\w*|"
                    r"cuLaunchKernel\w*|cudaGraphLaunch)$")
COPY = re.compile(r"^(?:hip|cuda)Memcpy\w*$|^(?:hip|cuda)MemcpyPeer\w*$|^(?:hip|cuda)Memset\w*$")


@dataclass
class Suspect:
    kind: str                  # launch-without-dispatch | dispatch-id-gap | running-at-fault | copy-without-record | copy-running
    pid: int
    evidence: str
    kernel: str | None = None
    agent_node: int | None = None
    queue: int | None = None
    stream: int | None = None
    thread: int | None = None
    correlation_id: int | None = None
    dispatch_id: int | None = None
    start: int | None = None
    end: int | None = None
    engine: str = "shader"     # shader | copy
    alias: str | None = None   # an unnamed launch's kernel, where its thread's dispatch order names it
    claim: Any = field(default=None, repr=False, compare=False)   # its judge.claims.Claim, once made

    @property
    def score(self) -> float:
        return self.claim.strength if self.claim is not None else 0.0

    @property
    def why(self) -> str:
        return "; ".join([self.kind.replace("-", " "), *(self.claim.notes if self.claim is not None else [])])

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "claim"}
        out = {k: (None if v == MISSING else v) for k, v in out.items()}
        return {**out, "score": self.score, "why": self.why}


def _opt(v) -> int | None:
    v = int(v)
    return None if v == MISSING else v


def find_in_flight(trace: Trace, fault_ns: int | None, window_ns: int) -> list[Suspect]:
    out: list[Suspect] = []
    d, a, c = trace.dispatches, trace.api, trace.copies
    lo = (fault_ns - window_ns) if fault_ns is not None else None
    if len(a):
        launches = a[a["function"].astype(str).str.match(LAUNCH)]
        copies_api = a[a["function"].astype(str).str.match(COPY)]
        if lo is not None:
            launches = launches[launches["end"] >= lo]
            copies_api = copies_api[copies_api["end"] >= lo]
        if fault_ns is not None:
            launches = launches[launches["start"] <= fault_ns]
            copies_api = copies_api[copies_api["start"] <= fault_ns]
        seen = set(zip(d["pid"].tolist(), d["correlation_id"].tolist())) if len(d) else set()
        for r in launches.itertuples(index=False):
            if (r.pid, r.correlation_id) in seen or (MISSING, r.correlation_id) in seen:
                continue
            out.append(Suspect("launch-without-dispatch", int(r.pid), f"{r.function} (correlation id "
                               f"{r.correlation_id}, thread {r.thread}) returned {when(r.end, fault_ns)} but no kernel record "
                               f"completed for it", thread=_opt(r.thread), correlation_id=int(r.correlation_id),
                               start=int(r.start), end=int(r.end)))
        copy_seen = set(zip(c["pid"].tolist(), c["correlation_id"].tolist())) if len(c) else set()
        for r in copies_api.itertuples(index=False):
            if r.correlation_id in (0, MISSING) or (r.pid, r.correlation_id) in copy_seen or \
                    (MISSING, r.correlation_id) in copy_seen:
                continue
            if not len(c) or (c["correlation_id"] == 0).all():
                break           # this version writes no copy correlation ids: absence means nothing
            out.append(Suspect("copy-without-record", int(r.pid), f"{r.function} (correlation id {r.correlation_id}) "
                               f"has no completed memory-copy record", thread=_opt(r.thread),
                               correlation_id=int(r.correlation_id), start=int(r.start), end=int(r.end), engine="copy"))
    has_id = (d["dispatch_id"] != MISSING).to_numpy() if len(d) else np.zeros(0, bool)
    if has_id.any():
        with_ids = d if has_id.all() else d[has_id]
        pids = with_ids["pid"].to_numpy()
        # one process (most traces): the table itself, not a grouped copy of every column
        groups = [(int(pids[0]), with_ids)] if (pids == pids[0]).all() else with_ids.groupby("pid")
        for pid, grp in groups:
            ids = grp["dispatch_id"].to_numpy()
            if len(ids) > 1 and not (ids[1:] >= ids[:-1]).all():       # usually in order already
                ids = np.sort(ids)
            if lo is not None:
                recent = grp["dispatch_id"].to_numpy()[grp["end"].to_numpy() >= lo]
                floor = int(recent.min()) if len(recent) else int(ids.max())
            else:
                floor = int(ids.min())
            # Gaps among the ids from the floor up, found from the sorted ids (a cut or merged row can
            # carry an absurd id: never enumerate the whole range).
            above = ids[ids >= floor]                                  # sorted: drop repeats by neighbour
            above = above[np.concatenate(([True], above[1:] != above[:-1]))] if len(above) else above
            missing = []
            for k in np.nonzero(np.diff(above) > 1)[0].tolist():     # only where ids skip
                a, b = int(above[k]), int(above[k + 1])
                missing.extend(range(a + 1, min(b, a + 1 + 1000 - len(missing))))
                if len(missing) >= 1000:
                    break
            for i in missing[:1000]:
                before = grp[grp["dispatch_id"] < i].sort_values("dispatch_id").tail(1)
                near = (f"; enqueued after dispatch {int(before['dispatch_id'].iloc[0])} "
                        f"({before['kernel'].iloc[0]}, queue {int(before['queue'].iloc[0])})") if len(before) else ""
                out.append(Suspect("dispatch-id-gap", int(pid), f"Dispatch_Id {i} was enqueued but never "
                                   f"completed{near}", dispatch_id=i,
                                   queue=int(before["queue"].iloc[0]) if len(before) else None,
                                   agent_node=_opt(before["agent_node"].iloc[0]) if len(before) else None))
    if len(d) and fault_ns is not None:
        running = d[(d["start"] <= fault_ns) & (d["end"] >= fault_ns)]
        for r in running.itertuples(index=False):
            out.append(Suspect("running-at-fault", int(r.pid), f"{r.kernel} ran from {when(r.start, fault_ns)} to {when(r.end, fault_ns)}, across the "
                               f"fault time", kernel=str(r.kernel), agent_node=_opt(r.agent_node), queue=_opt(r.queue),
                               stream=_opt(r.stream), thread=_opt(r.thread), correlation_id=_opt(r.correlation_id),
                               dispatch_id=_opt(r.dispatch_id), start=int(r.start), end=int(r.end)))
    if len(c) and fault_ns is not None:
        running = c[(c["start"] <= fault_ns) & (c["end"] >= fault_ns)]
        for r in running.itertuples(index=False):
            out.append(Suspect("copy-running", int(r.pid), f"copy {r.direction} ran from {when(r.start, fault_ns)} to {when(r.end, fault_ns)}, across "
                               f"the fault time", engine="copy", agent_node=_opt(r.dst_node), stream=_opt(r.stream),
                               correlation_id=_opt(r.correlation_id), start=int(r.start), end=int(r.end)))
    _name_from_thread(out, d)
    return out


def _name_from_thread(suspects: list[Suspect], d: pd.DataFrame) -> None:
    """A launch with no record names no kernel in CSV; the same thread's previous dispatches on
    the same queue show what it was launching (a hint, said as such)."""
    if not len(d):
        return
    for s in suspects:
        if s.kind != "launch-without-dispatch" or s.thread is None:
            continue
        prev = d[(d["thread"] == s.thread) & (d["start"] <= (s.end or 0))].sort_values("start", kind="stable")
        if len(prev):
            last = prev.iloc[-1]
            s.queue = _opt(last["queue"])
            s.agent_node = _opt(last["agent_node"])
            s.stream = _opt(last["stream"])
            s.evidence += (f"; the thread's previous dispatch was {last['kernel']} on queue {int(last['queue'])}"
                           f" (agent node {int(last['agent_node'])})")
            _name_from_order(s, prev["kernel"].astype(str).tolist())


def _name_from_order(s: Suspect, names: list[str]) -> None:
    """Where every earlier dispatch of the thread's last kernel was followed by one same kernel
    (at least twice), that kernel is what the launch probably was: a name by dispatch order, said as such."""
    last = names[-1]
    after = [names[i + 1] for i in range(len(names) - 1) if names[i] == last]
    if len(after) >= 2 and len(set(after)) == 1:
        s.alias = after[0]
        s.evidence += (f"; the thread's dispatch order names it: each of the {len(after)} earlier dispatches of "
                       f"{last} was followed by {after[0]}")
