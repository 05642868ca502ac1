"""Which rank is behind: each rank's collectives (flight recorder dumps, watchdog lines) compared.

Every rank numbers the collectives of a process group in the order it issues them, the same
number for the same operation on every rank. In a hang:
  - a rank whose last issued number is below the others' never reached the collective the others
    wait in (it is stuck before it: on its GPU, on the host, or it skipped one);
  - where all issued the same last number, a rank on which it is still `scheduled` (enqueued,
    not begun on the device) while it has `started` on the others is behind on its GPU;
  - watchdog lines only: the ranks whose watchdog timed out at the highest number waited; a rank
    that timed out at a lower number is behind, and a rank with no line at all did not time out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hang_model import CollectiveEntry, RankCollectives


@dataclass
class CollectiveLag:
    pg: str
    behind: list[int]                # the ranks that are behind
    behind_at: dict[int, CollectiveEntry | None]   # each behind rank's last collective
    ahead_at: CollectiveEntry        # what the others are in
    ahead: list[int]
    why: str
    sources: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"process_group": self.pg, "behind": self.behind, "ahead": self.ahead, "why": self.why,
                "behind_at": {r: (e.seq, e.op, e.state) if e else None for r, e in self.behind_at.items()},
                "ahead_at": (self.ahead_at.seq, self.ahead_at.op, self.ahead_at.state), "sources": self.sources}


def _last(entries: list[CollectiveEntry]) -> CollectiveEntry | None:
    return max(entries, key=lambda e: e.seq) if entries else None


def lagging_ranks(ranks: list[RankCollectives]) -> list[CollectiveLag]:
    """Who is behind; where the evidence is watchdog lines only and every rank given timed out in
    the same collective, that stall (a lag with no rank behind: `stalled_together`)."""
    ranks = [r for r in ranks if r.rank is not None]
    # one rank's line alone is the watchdog's own claim (analyze/watchdog_claims.py): no stall of several
    if len({r.rank for r in ranks}) > 1 and all(r.timed_out for r in ranks) and (stall := stalled_together(ranks)):
        return stall
    if len({r.rank for r in ranks}) < 2:
        return []
    out: list[CollectiveLag] = []
    recorded = [r for r in ranks if not r.timed_out]
    if recorded:
        out += _from_records(recorded)
    timed = [r for r in ranks if r.timed_out]
    if timed and not out:
        out += _from_watchdog(timed)
    return out


def _from_records(ranks: list[RankCollectives]) -> list[CollectiveLag]:
    out = []
    groups = sorted({e.pg for r in ranks for e in r.entries if not e.p2p})
    for pg in groups:
        last = {r.rank: _last([e for e in r.entries if e.pg == pg and not e.p2p]) for r in ranks}
        present = {k: v for k, v in last.items() if v is not None}
        if len(present) < 2:
            continue
        top = max(e.seq for e in present.values())
        ahead = sorted(k for k, e in present.items() if e.seq == top)
        behind = sorted(k for k in last if k not in ahead)
        ahead_entry = present[ahead[0]]
        sources = [r.source for r in ranks]
        if behind:
            lows = ", ".join(f"rank {k} at {last[k].seq} ({last[k].op}, {last[k].state})" if last[k] else
                             f"rank {k}: none recorded" for k in behind)
            out.append(CollectiveLag(pg, behind, {k: last[k] for k in behind}, ahead_entry, ahead,
                                     f"process group {pg}: ranks {_ranks(ahead)} issued collective #{top} "
                                     f"({ahead_entry.op}); {lows} never issued it", sources))
            continue
        if ahead_entry.state == "completed" and all(e.state == "completed" for e in present.values()):
            continue                            # every rank finished its last one: nobody waits here
        sched = sorted(k for k, e in present.items() if e.state == "scheduled")
        started = sorted(k for k, e in present.items() if e.state == "started")
        if sched and started:
            out.append(CollectiveLag(pg, sched, {k: present[k] for k in sched}, present[started[0]], started,
                                     f"process group {pg}: collective #{top} ({ahead_entry.op}) has started on "
                                     f"ranks {_ranks(started)} and is still only scheduled on ranks {_ranks(sched)} "
                                     f"(their GPU has not reached it)", sources))
    return out


def _from_watchdog(ranks: list[RankCollectives]) -> list[CollectiveLag]:
    last = {r.rank: _last(r.entries) for r in ranks}
    top = max(e.seq for e in last.values() if e)
    ahead = sorted(k for k, e in last.items() if e and e.seq == top)
    behind = sorted(k for k in last if k not in ahead)
    if not behind:
        return []
    e0 = last[ahead[0]]
    return [CollectiveLag("?", behind, {k: last[k] for k in behind}, e0, ahead,
                          f"watchdog lines: ranks {_ranks(ahead)} timed out in {e0.op} #{top}; ranks "
                          + ", ".join(f"{k} in #{last[k].seq}" for k in behind) + " were still before it",
                          [r.source for r in ranks])]


def stalled_together(ranks: list[RankCollectives]) -> list[CollectiveLag]:
    """Every rank whose watchdog line is given timed out in the same collective: a hang (each waited
    the whole timeout in it), but none is behind another in these lines, so which rank stopped first
    is unknown; the lowest collective number seen is that one."""
    last = {r.rank: _last(r.entries) for r in ranks}
    if not last or any(e is None for e in last.values()) or len({e.seq for e in last.values()}) != 1:
        return []
    ks = sorted(last)
    e0 = last[ks[0]]
    who = f"every rank given ({_ranks(ks)})"
    why = (f"watchdog lines: {who} timed out in {e0.op} #{e0.seq}, the lowest collective number seen: the "
           f"collective never completed, and none of these ranks is behind another in them, so which rank "
           f"stopped first is unknown (a rank whose line is not given, a flight record "
           f"(TORCH_NCCL_TRACE_BUFFER_SIZE) or the stacks of each rank tell)")
    return [CollectiveLag("?", [], {}, e0, ks, why, sorted({r.source for r in ranks}))]


def _ranks(ks: list[int]) -> str:
    return ", ".join(str(k) for k in ks)
