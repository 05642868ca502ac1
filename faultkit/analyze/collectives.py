"""Which rank is behind: each rank's collectives (flight recorder dumps, watchdog lines) compared.

Every rank numbers the collectives of a process group in the order it issues them, the same
number for the same operation on every rank. In a hang:
  - a rank whose last issued number is below the others' never reached the collective the others
    wait in (it is stuck before it: on its GPU, on the host, or it skipped one);
  - where all issued the same last number, a rank on which it is still `scheduled` (enqueued,
    not begun on the device) while it has `started` on the others is behind on its GPU;
  - watchdog lines only: the ranks whose watchdog timed out at the highest number waited; a rank
    that timed out at a lower number is behind, and a rank with no line at all did not time out;
  - one rank's watchdog line alone: that rank waits in the collective (its watchdog measured the
    wait), and the rank it waits for is not in its log: the wait is stated, the other is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..durations import exact_seconds
from ..hang_model import CollectiveEntry, RankCollectives, WatchdogWords

# What names the rank that never joined a collective: the same records of every rank, side by side.
COLLECT_EVERY_RANK = ("every rank's log, and every rank's flight record: run with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
                      "and TORCH_NCCL_DUMP_ON_TIMEOUT=1 on every rank (each writes its last collectives to "
                      "TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>, /tmp/nccl_trace_rank_<rank> by default) and give them "
                      "all to `faultkit triage`; or every rank's stacks while it hangs (`py-spy dump --pid PID`)")


@dataclass
class CollectiveLag:
    """Ranks of a process group behind the others: the sign of which rank a hang waits on."""
    pg: str
    behind: list[int]                # the ranks that are behind
    behind_at: dict[int, CollectiveEntry | None]   # each behind rank's last collective
    ahead_at: CollectiveEntry        # what the others are in
    ahead: list[int]
    why: str
    sources: list[str] = field(default_factory=list)
    watchdog: WatchdogWords | None = None    # one rank's watchdog lines: what they state beside the wait

    def to_json(self) -> dict:
        out = {"process_group": self.pg, "behind": self.behind, "ahead": self.ahead, "why": self.why,
               "behind_at": {r: (e.seq, e.op, e.state) if e else None for r, e in self.behind_at.items()},
               "ahead_at": (self.ahead_at.seq, self.ahead_at.op, self.ahead_at.state), "sources": self.sources}
        if self.watchdog is not None:
            e, w = self.ahead_at, self.watchdog
            out["waiting"] = {"rank": self.ahead[0], "pid": w.pid, "collective": e.op, "seq": e.seq,
                              "numel_in": e.numel_in, "numel_out": e.numel_out, "process_group": w.process_group,
                              "ran_ms": e.ran_ms, "timeout_ms": e.timeout_ms, "last_enqueued": w.last_enqueued,
                              "last_completed": w.last_completed, "dump_from": w.dump_from,
                              "flight_recorder_off": w.recorder_off, "call": [f.where for f in w.call],
                              "origin": w.origin}
        return out


def _last(entries: list[CollectiveEntry]) -> CollectiveEntry | None:
    return max(entries, key=lambda e: e.seq) if entries else None


def lagging_ranks(ranks: list[RankCollectives]) -> list[CollectiveLag]:
    """Who is behind; where the evidence is watchdog lines only and every rank given timed out in
    the same collective, that stall (a lag with no rank behind: `stalled_together`)."""
    ranks = [r for r in ranks if r.rank is not None]
    if len({r.rank for r in ranks}) > 1 and all(r.timed_out for r in ranks) and (stall := stalled_together(ranks)):
        return stall
    if len({r.rank for r in ranks}) < 2:
        return [one_rank_waits(r) for r in ranks[:1] if r.timed_out and r.entries]
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


def one_rank_waits(rc: RankCollectives) -> CollectiveLag:
    """One rank's watchdog timed out in a collective: who waits (rank, pid), in what (the collective,
    its number and size, the group), how long, how far its group got; the rank it waits for is not
    in this log, and what would name it."""
    # the first its watchdog reported (it checks its works in the order they were enqueued; later ones, of this
    # group or another whose numbers are its own, queue behind it)
    e, later = rc.entries[0], rc.entries[1:]
    w = rc.watchdog or WatchdogWords(rc.source)
    who = f"rank {rc.rank}" + (f" (pid {w.pid})" if w.pid else " (its pid is not in the log)")
    size = (f", {e.numel_in:,} elements in" + (f", {e.numel_out:,} out" if e.numel_out != e.numel_in else "")
            if e.numel_in is not None else "")
    group = f" of process group {w.process_group}" if w.process_group else ""
    waited = (f" for {exact_seconds(e.ran_ms)}" if e.ran_ms is not None else "") + \
        (f" (timeout {exact_seconds(e.timeout_ms)})" if e.timeout_ms is not None else "")
    why = f"one rank's watchdog: {who} waits in collective {e.op} #{e.seq}{group}{waited}{size} ({w.origin})"
    if w.last_enqueued is not None and w.last_completed is not None:
        on_gpu = w.last_completed < e.seq <= w.last_enqueued
        why += (f"; #{e.seq} is enqueued on its GPU stream and not completed" if on_gpu else "") + \
            f" (its group's last enqueued work {w.last_enqueued}, last completed {w.last_completed})"
    if w.call:
        mine = next((f for f in w.call if f.file and "/torch/" not in f.file), w.call[0])
        why += f"; the collective was issued at {w.call[0].where}, called from {mine.where}"
    if w.dump_from == "this local rank":
        why += "; its watchdog signalled every rank to dump its flight record"
    elif w.dump_from:
        why += f"; {w.dump_from}'s watchdog signalled the dump (it timed out too)"
    if w.recorder_off:
        why += "; no flight record was kept (TORCH_NCCL_TRACE_BUFFER_SIZE is 0)"
    if later:
        why += f"; {len(later)} more timed out after it (" + ", ".join(f"{x.op} #{x.seq}" for x in later[:4]) + \
            (", ..." if len(later) > 4 else "") + ")"
    return CollectiveLag(w.process_group or e.pg, [], {}, e, [rc.rank], why, [rc.source], w)


def unjoined(lag: CollectiveLag) -> str | None:
    """Whom one rank waits for, in words, where its log alone is the evidence: a rank of its group
    that never joined, not named by it; and what would name it."""
    if lag.watchdog is None or lag.behind:
        return None
    e = lag.ahead_at
    group = f" of process group {lag.pg}" if lag.pg != "?" else ""
    return (f"rank {lag.ahead[0]} waits for a rank{group} that never joined {e.op} #{e.seq}: which one is unknown "
            f"from one rank's log (it may be stuck on its GPU or the host, dead, or behind); to name it, collect "
            f"{COLLECT_EVERY_RANK}")


def _ranks(ks: list[int]) -> str:
    return ", ".join(str(k) for k in ks)
