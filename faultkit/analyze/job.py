"""One incident across the nodes of a job: the nodes' clocks aligned, the first mover found, the rest
its consequences.

Each node's evidence is on its own wall clock, which can be off by milliseconds to seconds. Moments that
several nodes record (the same request id, the same collective sequence number) give each node's offset
from a reference node: the median of the differences, with their spread as the uncertainty. Where two
nodes share no such moment but one boot (the same boot id: one machine, one monotonic clock), the
offset is what their starts' (wall, monotonic) pairs say, exact to the stamps; else their captures' starts are taken as simultaneous (a launcher starts every
rank at about the same time), and the uncertainty is said to be unknown.

The first mover is the node whose earliest cause (a GPU fault, a host segfault, a fatal signal, an
error that is not a peer's loss) comes first on the aligned clock; when the next node's cause lies
within the two uncertainties, neither can be called first and both are named. Every other node's
timeouts, peer losses and follow-on Xids are consequences, never verdicts of their own.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..model import HANG_SYMPTOMS

STAMP_RESOLUTION_S = 0.01      # a capture stamps output by the block it arrived in
CONSEQUENCE_KINDS = HANG_SYMPTOMS | {"peer-loss"}


@dataclass(frozen=True)
class NodeEvent:
    wall_s: float              # on the node's own clock
    kind: str
    cause: bool                # a cause (fault, death) or a consequence (timeout, peer loss, follow-on)
    text: str
    origin: str


@dataclass
class NodeEvidence:
    name: str                  # host (or the bundle's name)
    bundle: str
    rank: int | None
    start_wall_s: float | None
    events: list[NodeEvent] = field(default_factory=list)
    markers: dict[str, float] = field(default_factory=dict)   # key -> wall time on this node's clock
    verdict_level: str = "unknown"
    verdict_kernel: str | None = None
    boot_id: str | None = None             # nodes of one boot share one monotonic clock
    start_wall_minus_monotonic_s: float | None = None   # the capture's start: wall - monotonic, read together

    def first(self, cause: bool) -> NodeEvent | None:
        mine = [e for e in self.events if e.cause == cause]
        return min(mine, key=lambda e: e.wall_s) if mine else None


@dataclass(frozen=True)
class Alignment:
    offset_s: float            # add to this node's clock to read the reference node's
    uncertainty_s: float | None
    basis: str
    points: int


@dataclass
class JobVerdict:
    job: str | None
    reference: str
    alignment: dict[str, Alignment]
    first_mover: list[str]                 # one node, or several that cannot be told apart
    first_event: NodeEvent | None
    why: str
    consequences: list[tuple[str, NodeEvent, float]]   # node, event, seconds after the first mover's cause
    order: list[tuple[str, NodeEvent | None, float | None]]   # each node's earliest cause on the aligned clock


def align(nodes: list[NodeEvidence]) -> dict[str, Alignment]:
    ref = nodes[0]
    out = {ref.name: Alignment(0.0, 0.0, "the reference clock", 0)}
    for n in nodes[1:]:
        common = sorted(set(ref.markers) & set(n.markers))
        if common:
            diffs = [ref.markers[k] - n.markers[k] for k in common]
            off = statistics.median(diffs)
            spread = max(abs(d - off) for d in diffs)
            kinds = sorted({k.split(":", 1)[0] for k in common})
            out[n.name] = Alignment(off, spread + 2 * STAMP_RESOLUTION_S,
                                    f"{len(common)} moment(s) both logged ({', '.join(kinds)})", len(common))
        elif ref.boot_id and ref.boot_id == n.boot_id and ref.start_wall_minus_monotonic_s is not None \
                and n.start_wall_minus_monotonic_s is not None:
            # one machine, one boot: one monotonic clock, so the wall clocks differ by exactly what the
            # two starts' (wall, monotonic) pairs say (zero where both read one wall clock)
            out[n.name] = Alignment(ref.start_wall_minus_monotonic_s - n.start_wall_minus_monotonic_s,
                                    2 * STAMP_RESOLUTION_S, "one machine (the same boot id: one monotonic clock)", 0)
        elif ref.start_wall_s is not None and n.start_wall_s is not None:
            out[n.name] = Alignment(ref.start_wall_s - n.start_wall_s, None,
                                    "the captures' starts taken as simultaneous (no moment both logged)", 0)
        else:
            out[n.name] = Alignment(0.0, None, "wall clocks taken as they are (nothing to align them by)", 0)
    return out


def decide(job: str | None, nodes: list[NodeEvidence]) -> JobVerdict:
    al = align(nodes)
    aligned = lambda n, e: e.wall_s + al[n.name].offset_s  # noqa: E731
    order = []
    for n in nodes:
        e = n.first(True)
        order.append((n.name, e, aligned(n, e) if e else None))
    causes = sorted((o for o in order if o[1] is not None), key=lambda o: o[2])
    if not causes:
        symptoms = [(n.name, e, aligned(n, e)) for n in nodes for e in n.events]
        first = min(symptoms, key=lambda s: s[2]) if symptoms else None
        why = ("no node shows a cause (a fault or a death): only symptoms" +
               (f"; the earliest is on {first[0]}: {first[1].text}" if first else ""))
        return JobVerdict(job, nodes[0].name, al, [], None, why, [], order)
    name, event, t0 = causes[0]
    tied = [name]
    unc = lambda nm: al[nm].uncertainty_s  # noqa: E731
    for other, oe, t in causes[1:]:
        if unc(name) is None or unc(other) is None or t - t0 <= unc(name) + unc(other):
            tied.append(other)
    first_node = next(n for n in nodes if n.name == name)
    if len(tied) == 1:
        runner = f"; the next cause, on {causes[1][0]}, came {causes[1][2] - t0:.3f} s later" if len(causes) > 1 else ""
        why = (f"{name} (rank {first_node.rank if first_node.rank is not None else '?'}) moved first: {event.kind} "
               f"({event.origin}){runner}; clocks aligned by {_bases(al)}")
    else:
        why = (f"{', '.join(tied)} each show a cause within the clocks' uncertainty of the others: which came first "
               f"cannot be told ({_bases(al)})")
    consequences = []
    for n in nodes:
        for e in n.events:
            if n.name in tied and e.cause:
                continue
            if not e.cause or n.name not in tied:
                consequences.append((n.name, e, aligned(n, e) - t0))
    consequences.sort(key=lambda c: c[2])
    return JobVerdict(job, nodes[0].name, al, tied, event, why, consequences, order)


def _bases(al: dict[str, Alignment]) -> str:
    return "; ".join(f"{k} {a.offset_s:+.3f} s" + (f" ± {a.uncertainty_s:.3f} s" if a.uncertainty_s is not None
                                                   else " (uncertainty unknown)") + f" from {a.basis}"
                     for k, a in al.items() if a.basis != "the reference clock")
