"""One job's incident as a timeline: a process group per node on the aligned wall clock, its faults,
deaths, peer losses and timeouts as instants, and a flow from the first mover's cause to every
consequence on the other nodes."""

from __future__ import annotations

from .pftrace import INSTANT, REALTIME
from .timeline import Point, Timeline, Track

NODE_PID_BASE = 1 << 22      # above any real pid (pid_max is at most 2^22): one synthetic process per node


def build_job_timeline(report) -> Timeline:
    v = report.verdict
    tl = Timeline(clock=REALTIME)
    tl.metadata = {"faultkit.job": v.job or "", "faultkit.first_mover": ", ".join(v.first_mover),
                   "faultkit.why": v.why[:500]}
    cause_flows, flow = {}, 1
    for node, e, _ in v.consequences:
        cause_flows[(node, e.origin, e.wall_s)] = flow
        flow += 1
    for i, n in enumerate(report.nodes):
        a = v.alignment[n.name]
        unc = f"± {a.uncertainty_s:.3f} s" if a.uncertainty_s is not None else "uncertainty unknown"
        key = f"node:{n.name}"
        tl.add(Track(key, f"{n.name} (rank {n.rank if n.rank is not None else '?'}; clock {a.offset_s:+.3f} s, {unc})",
                     pid=NODE_PID_BASE + i))
        tl.add(Track(f"{key}:events", "faults, deaths, peer losses", parent=key))
        for e in n.events:
            ts = int((e.wall_s + a.offset_s) * 1e9)
            first = v.first_event is e and n.name in v.first_mover
            fid = cause_flows.get((n.name, e.origin, e.wall_s))
            tl.points.append(Point(f"{key}:events", ts, INSTANT, f"{'first mover: ' if first else ''}{e.kind}",
                                   {"evidence": e.origin, "text": e.text[:300]},
                                   ("cause" if e.cause else "consequence",),
                                   flows_in=(fid,) if fid else (),
                                   flows_out=tuple(cause_flows.values()) if first else ()))
    return tl
