"""A collective's watchdog timeout (and the heartbeat monitor's stuck watchdog) as a hang claim: who
waits, on what.

PyTorch's ProcessGroupNCCL (RCCL builds print the same) times out a collective that a rank
enqueued and its GPU never finished: `Watchdog caught collective operation timeout:
WorkNCCL(SeqNum=N, OpType=OP, ..., Timeout(ms)=T) ran for M milliseconds`, and, after it, `...
detected by watchdog at work: N, last enqueued NCCL work: E, last completed NCCL work: C`. With
C < N <= E the collective is on the rank's GPU stream and has not completed: the rank waits in it
for a peer that never joined (dead, hung in a kernel, stuck on the host). No kernel is named: the
collective's own kernel waits, it did not fault.
"""

from __future__ import annotations

from ..judge.claims import Basis, Claim, Identities
from .collectives import COLLECT_EVERY_RANK
from ..model import RuntimeLog


def _stuck_claim(f, c: dict) -> Claim:
    """The heartbeat monitor's `watchdog got stuck for N seconds`: the watchdog thread itself made no
    progress (ProcessGroupNCCL.cpp: "a NCCL/CUDA API hang blocking the watchdog"), so the rank's host
    is stuck in a CUDA or NCCL call, not one collective on the GPU stream."""
    who = f"rank {c['rank']}" if "rank" in c else (f.process_tag or "a rank")
    why = (f"a stuck NCCL watchdog, a hang: {who}'s watchdog made no progress for {c['stuck_s']:g} s ({f.origin}): "
           f"a CUDA or NCCL call on {who}'s host blocks it (another thread holding the GIL inside a CUDA call, or a "
           f"deadlock); no kernel is named")
    return Claim(None, Basis("watchdog-timeout", "ProcessGroupNCCL heartbeat monitor"), why, Identities(pid=f.pid),
                 str(f.origin), headline=f"hang: {who}'s NCCL watchdog stuck for {c['stuck_s']:g} s")


def _signalled_claims(runtime: RuntimeLog, timed_out: set) -> list[Claim]:
    """A rank that got another rank's dump signal and did not time out itself (its log has no timeout
    line): the job hung in a collective on that rank, and this rank's group states whether it has a
    collective in flight. With every collective it enqueued completed, it waits in none of that group:
    it may be the rank the others wait for (stuck before its next collective). Nothing more is known
    from its log; no kernel is named."""
    out, seen = [], set()
    for n in runtime.notes:
        f = n.fields
        if n.kind != "watchdog-dump" or f.get("from_rank") is None or f.get("rank") in timed_out:
            continue
        if (f.get("rank"), f.get("process_group")) in seen:
            continue
        seen.add((f.get("rank"), f.get("process_group")))
        who = f"rank {f['rank']}" if f.get("rank") is not None else "this rank"
        group = f" of process group {f['process_group']}" if f.get("process_group") else ""
        why = (f"a collective timed out on rank {f['from_rank']}, a hang: its watchdog signalled every rank to dump "
               f"its flight record ({n.origin}), and {who} did not time out itself in this log")
        enq, done = f.get("last_enqueued"), f.get("last_completed")
        if enq is not None and done is not None and enq == done:
            why += (f"; {who} had completed every collective it enqueued{group} (last enqueued {enq}, last completed "
                    f"{done}): it waits in none of them, so it may be the rank rank {f['from_rank']} waits for (stuck "
                    f"before its next collective, on its GPU or the host), or rank {f['from_rank']}'s collective is "
                    f"in another group")
        elif enq is not None and done is not None:
            why += f"; {who} has work {done + 1}{group} enqueued and not completed (last enqueued {enq}): it waits too"
        why += f"; to tell, collect {COLLECT_EVERY_RANK}; no kernel is named"
        out.append(Claim(None, Basis("watchdog-timeout", "ProcessGroupNCCL heartbeat monitor"), why, Identities(),
                         str(n.origin), headline=f"hang: rank {f['from_rank']}'s collective timed out; {who} got its "
                                                 f"dump signal"))
    return out


def watchdog_claims(runtime: RuntimeLog) -> list[Claim]:
    work = {}
    for n in runtime.notes:
        if n.kind == "watchdog-work":
            work[(n.fields.get("rank"), n.fields.get("work"))] = n
    out = []
    for f in runtime.faults:
        c = f.collective
        if f.kind == "watchdog-stuck" and c:
            out.append(_stuck_claim(f, c))
        if f.kind != "collective-timeout" or not c:
            continue
        who = f"rank {c['rank']}" if "rank" in c else (f.process_tag or "a rank")
        what = f"{c['collective']} #{c['seq']}"
        waited = f"{c['ran_ms'] / 1000:g} s" + (f" (timeout {c['timeout_ms'] / 1000:g} s)" if "timeout_ms" in c else "")
        why = f"a collective timed out, a hang: {who} waited in {what} for {waited} ({f.origin})"
        note = work.get((c.get("rank"), c["seq"])) or work.get((None, c["seq"]))   # (a note without its prefix)
        if note is not None:
            enq, done = note.fields["last_enqueued"], note.fields["last_completed"]
            state = ("enqueued on its GPU stream and not completed" if done < c["seq"] <= enq
                     else f"last enqueued {enq}, last completed {done}")
            why += f"; the watchdog: work {c['seq']} {state} (last enqueued {enq}, last completed {done}) ({note.origin})"
        why += (f": {who} is stuck in collective {what}, its kernel waiting for a peer that never joined it (dead, "
                f"hung in a kernel, or stuck on the host); no kernel is named: this one waits, none was seen faulting")
        # no kernel: the verdict says this in words (judge.decide.HOST), it ranks no candidate
        out.append(Claim(None, Basis("watchdog-timeout", "ProcessGroupNCCL watchdog"), why, Identities(pid=f.pid),
                         str(f.origin), headline=f"hang: {who} waits in collective {what} ({waited})"))
    timed_out = {f.collective.get("rank") for f in runtime.faults if f.kind == "collective-timeout" and f.collective}
    return out + _signalled_claims(runtime, timed_out)
