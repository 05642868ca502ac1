"""One hang verdict from two (or more) samples of every process's stacks: who is stuck, where, on
what, and who waits on whom.

The rule (the one place it is written; `capture --hang-after` and `faultkit dump` both apply it):
  - a thread is STUCK when it waits on the GPU or in a collective (analyze/waits.py) and its stack
    is the same in every sample: the GPU did not finish the work, or the collective did not
    complete, in the time between them (a `hang-stuck` claim: the judge allows it `likely`); a
    collective wait of one process while another is stuck on its GPU WAITS ON that one (`waiting`,
    not stuck): the collective cannot complete before the stuck rank joins it;
  - a process is IDLE when every thread waits for work (sockets, queues, pipe reads, sleeps,
    condition variables, parked pool threads, its children) or is a background thread (NCCL's
    proxy, the c10d watchdog, the helpers of analyze/waits.py: resource trackers, queue feeders,
    gRPC's and rayon's pools): a server with no request in flight. Idle is not hung;
  - a process is BLOCKED when a thread waits on a lock (held by someone: a mutex, a Python
    Lock.acquire) with the same stack in every sample and nothing else moves (a host deadlock: a
    `hang-blocked` claim, `candidates`). A read is no lock: a pipe read waits for input like a socket;
  - a tree is CLOSED when every process is idle, no thread waits on anything from outside the
    tree (a socket, a message queue, an event loop, a timer) and one waits on another of the tree
    (its child, a thread it joins): what each waits for can only come from another that waits too,
    so it never comes (a parent joining a worker that waits for a task nobody sends: `hang-blocked`);
  - a process is BUSY when a thread is on a CPU outside any known wait, or its stack moved;
  - one sample cannot tell stuck from slow: a GPU wait seen once is `waiting`, never stuck.
A hang is silence AND one of: a stuck thread, a blocked process, a collective a rank is behind in,
a closed tree.
A request in flight shows in the stacks: the thread working on it is busy (its stack moves: work
in progress, judged again at the next silence) or waits on the GPU or a collective for it (stuck
when that wait does not move). Silence with every process idle is idle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hang_model import ProcessStacks, ThreadStack
from ..judge.claims import BASES, Basis, Claim, Identities
from .collectives import COLLECT_EVERY_RANK, CollectiveLag, unjoined
from .running import RunningKernel
from .waits import (BLOCKED_CALL, COLLECTIVE, GPU, HOST, OUTSIDE_KINDS, RUNNING, WAITS_ON_OTHER, Wait, classify,
                    signature)

STUCK, BLOCKED, BUSY, IDLE, WAITING, EXITED, UNKNOWN = ("stuck", "blocked", "busy", "idle", "waiting", "exited",
                                                       "unknown")
BLOCKING_HOST = frozenset({"lock"})
# A thread stuck on the GPU or in a collective across the samples, or a rank behind the others, is
# a hang; a host lock held through them, or a dead worker the rest waits for, is one explanation.
SURE_SIGNS = frozenset({"stuck", "behind", "stalled"})


@dataclass
class ThreadFinding:
    """One thread of a hang and what it waits on, over how many samples."""
    pid: int
    tid: int | None
    name: str | None
    wait: Wait
    samples: int                     # in how many samples this thread was seen
    unchanged: bool | None           # the same stack in every sample (None: one sample)
    cpu_ticks: int | None            # CPU time used between the first and the last sample
    stuck: bool = False

    @property
    def label(self) -> str:
        if self.tid is None and not self.name:     # a stack pasted without its thread's header
            return "a thread (its header is not in the dump)"
        return f'thread {self.tid if self.tid is not None else "?"}' + (f' "{self.name}"' if self.name else "")

    def describe(self, gap: str = "") -> str:
        w = self.wait
        at = f" at {w.where.where}" if w.where else ""
        moved = ("" if self.unchanged is None else
                 f", unchanged across {self.samples} samples{gap}" if self.unchanged else ", moved between samples")
        spin = f" (spinning: {self.cpu_ticks} CPU ticks meanwhile)" if self.cpu_ticks else ""
        return f"{self.label} waits in {w.on}{at}{moved}{spin}"

    def to_json(self) -> dict:
        w = self.wait
        return {"pid": self.pid, "tid": self.tid, "name": self.name, "category": w.category, "kind": w.kind,
                "on": w.frame.function if w.frame else None, "where": w.where.where if w.where else None,
                "background": w.background, "idle": w.idle, "samples": self.samples, "unchanged": self.unchanged,
                "cpu_ticks": self.cpu_ticks, "stuck": self.stuck}


@dataclass
class ProcessFinding:
    """One process of a hang: its rank and its threads' waits, for the hang report."""
    pid: int
    rank: int | None
    ppid: int | None
    command: str | None
    source: str
    state: str
    threads: list[ThreadFinding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if not self.pid:                # a pasted dump that does not say its pid
            return "the process (its pid is not in the dump)" + (f" (rank {self.rank})" if self.rank is not None else "")
        return f"pid {self.pid}" + (f" (rank {self.rank})" if self.rank is not None else "")

    def to_json(self) -> dict:
        return {"pid": self.pid, "rank": self.rank, "ppid": self.ppid, "command": self.command, "source": self.source,
                "state": self.state, "threads": [t.to_json() for t in self.threads], "problems": self.problems}


@dataclass
class HangFinding:
    """The verdict's evidence, typed: what judge turns into a verdict."""
    state: str                       # hung | idle | busy | one-sample | unknown
    sign: str | None                 # what shows the hang: stuck | behind | blocked | orphaned | closed (hung only)
    summary: str
    stuck: list[ThreadFinding] = field(default_factory=list)
    waits_on: list[str] = field(default_factory=list)      # who waits on whom, one sentence each
    processes: list[ProcessFinding] = field(default_factory=list)
    lags: list[CollectiveLag] = field(default_factory=list)
    kernels: list[RunningKernel] = field(default_factory=list)
    samples: int = 0
    interval_s: float | None = None

    @property
    def basis(self) -> str | None:
        """The kind of evidence the hang is to the judge (judge.claims.BASES)."""
        return None if self.state != "hung" else "hang-stuck" if self.sign in SURE_SIGNS else "hang-blocked"

    @property
    def level(self) -> str | None:
        """The highest level the judge allows this kind of hang (its claim's ceiling)."""
        return BASES[self.basis][0] if self.basis else None

    def to_json(self) -> dict:
        return {"state": self.state, "level": self.level, "sign": self.sign, "summary": self.summary,
                "samples": self.samples,
                "interval_s": self.interval_s, "stuck": [t.to_json() for t in self.stuck], "waits_on": self.waits_on,
                "processes": [p.to_json() for p in self.processes], "collectives": [c.to_json() for c in self.lags],
                "running_kernels": [k.to_json() for k in self.kernels]}


def _key(t: ThreadStack, i: int) -> tuple:
    return ("tid", t.tid) if t.tid is not None else ("name", t.name, i)


def process_finding(samples: list[ProcessStacks | None]) -> ProcessFinding:
    """One process across the samples (None where it was not seen)."""
    seen = [s for s in samples if s is not None]
    last = seen[-1]
    pf = ProcessFinding(last.pid, last.rank, last.ppid, last.command, last.source, UNKNOWN,
                        problems=list(dict.fromkeys(p for s in seen for p in s.problems)))
    if samples[-1] is None:
        pf.state = EXITED
        return pf
    history: dict[tuple, list[ThreadStack]] = {}
    for s in seen:
        for i, t in enumerate(s.threads):
            history.setdefault(_key(t, i), []).append(t)
    for i, t in enumerate(last.threads):
        runs = history.get(_key(t, i), [t])
        w = classify(t, last.command)
        unchanged = None if len(runs) < 2 else len({signature(r, wait=classify(r, last.command)) for r in runs}) == 1
        ticks = (runs[-1].cpu_ticks - runs[0].cpu_ticks
                 if len(runs) > 1 and runs[0].cpu_ticks is not None and runs[-1].cpu_ticks is not None else None)
        stuck = w.category in (GPU, COLLECTIVE) and not w.background and unchanged is True
        pf.threads.append(ThreadFinding(last.pid, t.tid, t.name, w, len(runs), unchanged, ticks, stuck))
    pf.state = _state(pf.threads)
    return pf


def _state(threads: list[ThreadFinding]) -> str:
    if not threads:
        return UNKNOWN
    if any(t.stuck for t in threads):
        return STUCK
    fg = [t for t in threads if not t.wait.idle]
    if any(t.wait.category == RUNNING or (t.unchanged is False and (t.wait.category != HOST or
                                                                   t.wait.kind == BLOCKED_CALL)) for t in fg):
        return BUSY
    if any(t.wait.category in (GPU, COLLECTIVE) for t in fg):
        return WAITING                       # seen once, or it moved: not stuck, not idle
    if any(t.wait.kind in BLOCKING_HOST and t.unchanged for t in fg) or _blocked_joined(threads):
        return BLOCKED
    if all(t.wait.idle for t in threads):
        return IDLE
    return UNKNOWN


def _blocked_joined(threads: list[ThreadFinding]) -> list[ThreadFinding]:
    """Two or more threads blocked in hidden calls (py-spy without --native: analyze/hidden_call.py),
    unchanged, while another thread joins them: the program waits on threads that do not return."""
    hidden = [t for t in threads if t.wait.kind == BLOCKED_CALL and t.unchanged]
    joining = any(t.wait.kind == "join" for t in threads)
    return hidden if len(hidden) >= 2 and joining else []


def _blocked_words(threads: list[ThreadFinding], gap: str) -> str:
    """The blocked threads in words: two or more locks waited for while another joins is a
    lock-wait deadlock; hidden calls are named by their place, with how to see which call."""
    fg = [t for t in threads if not t.wait.idle or t.wait.kind == "join"]
    locks = [t for t in fg if t.wait.kind in BLOCKING_HOST and t.unchanged]
    join = next((t for t in fg if t.wait.kind == "join"), None)
    joins = f" while {join.label} joins them" if join else ""
    if len(locks) >= 2:
        return f"a lock-wait deadlock{joins}: " + "; ".join(t.describe(gap) for t in locks)
    if locks:
        return locks[0].describe(gap)
    hidden = _blocked_joined(threads)
    return (f"{len(hidden)} threads do not return{joins}: " + "; ".join(
        f"{t.label} is blocked in a call at {t.wait.where.file}:{t.wait.where.line} (run py-spy with --native to see "
        f"which), unchanged across {t.samples} samples{gap}" for t in hidden))


@dataclass(frozen=True)
class GoneWorker:
    """A process of the tree that used a GPU and exited before the samples (capture saw it)."""
    pid: int
    ppid: int | None
    command: str


def analyse(samples: list[list[ProcessStacks]], interval_s: float | None = None,
            lags: list[CollectiveLag] = (), kernels: list[RunningKernel] = (),
            gone: list[GoneWorker] = ()) -> HangFinding:
    """`samples`: every process's stacks at each sampling moment, in order. `gone`: GPU workers
    that died before them: with the rest idle, the requests they were given go unanswered."""
    pids = list(dict.fromkeys(p.pid for s in samples for p in s))
    procs = []
    for pid in pids:
        per = [next((p for p in s if p.pid == pid), None) for s in samples]
        procs.append(process_finding(per))
    _waiting_on_gpu(procs)
    # the cause first: a process stuck on its GPU, one whose core shows a kernel running before others
    running = {k.pid for k in kernels}
    stuck = sorted((t for p in procs for t in p.threads if t.stuck),
                   key=lambda t: (t.wait.category != GPU, t.pid not in running))
    hf = HangFinding(UNKNOWN, None, "", stuck, [], procs, list(lags), list(kernels), len(samples), interval_s)
    states = {p.state for p in procs}
    blocked = [p for p in procs if p.state == BLOCKED]
    gap = f" {interval_s:g} s apart" if interval_s else ""
    if stuck:
        hf.state, hf.sign = "hung", "stuck"
        first = stuck[0]
        pf = next(p for p in procs if p.pid == first.pid)
        hf.summary = f"{pf.label} is stuck: {first.describe(gap)}"
    elif hf.lags:
        # a rank behind the others, or (watchdog lines only) every rank stalled in one collective
        hf.state, hf.sign = "hung", "behind" if hf.lags[0].behind else "stalled"
        hf.summary = hf.lags[0].why
    elif blocked:
        hf.state, hf.sign = "hung", "blocked"
        hf.summary = f"{blocked[0].label} is blocked on the host: {_blocked_words(blocked[0].threads, gap)}"
    elif procs and states <= {IDLE, EXITED} and gone:
        hf.state, hf.sign = "hung", "orphaned"
        g = gone[0]
        hf.summary = (f"GPU worker pid {g.pid} ({g.command[:80]}) died and the rest waits for work: what was sent "
                      f"to it is not answered")
    elif procs and states <= {IDLE, EXITED} and closed_tree(procs):
        hf.state, hf.sign = "hung", "closed"
        hf.summary = closed_tree(procs)
    elif len(samples) == 1 and procs and any(p.threads for p in procs) and not gone:
        # One sample cannot tell a hang from a pause (a deadlock and a server between requests
        # look the same once): say where each thread waits, never "not hung".
        hf.state = ONE_SAMPLE
        hf.summary = "one sample: " + "; ".join(_waits_in(p) for p in procs if p.threads) + \
            f"; {SECOND_SAMPLE}"
    elif procs and states <= {IDLE, EXITED}:
        hf.state = "idle"
        hf.summary = ("every thread waits for work (" +
                      ", ".join(sorted({t.wait.kind for p in procs for t in p.threads})) + ")" +
                      (f" in {len(samples)} samples{gap}" if len(samples) > 1 else ""))
    elif BUSY in states or WAITING in states:
        hf.state = "busy"
        busy = [p for p in procs if p.state in (BUSY, WAITING)]
        hf.summary = ("working, not stuck: " + "; ".join(
            f"{p.label} " + ("has a thread on a CPU or moving" if p.state == BUSY else
                             "waits on the GPU or a collective in one sample only (take two to tell stuck from slow)")
            for p in busy))
    else:
        why = next((x for p in procs for x in p.problems), None)
        known = sorted({t.wait.kind for p in procs for t in p.threads if t.wait.category != UNKNOWN})
        hf.summary = (f"no stacks could be read{f' ({why})' if why else ''}" if not any(p.threads for p in procs) else
                      f"no wait seen stuck (the threads wait in: {', '.join(known)})" if known else
                      "the threads wait on nothing faultkit knows (see their stacks)")
    hf.waits_on = who_waits_on_whom(procs, hf.lags, hf.kernels)
    live = {p.pid: p for p in procs}
    hf.waits_on += [f"GPU worker pid {g.pid} died before the samples; its parent pid {g.ppid} goes on "
                    f"({live[g.ppid].state})" for g in gone if g.ppid in live]
    return hf


def _waiting_on_gpu(procs: list[ProcessFinding]) -> None:
    """A collective wait that does not move, in a tree where another process is stuck on its GPU,
    waits on that one: the all-reduce cannot complete until the stuck rank joins it. Its process is
    `waiting`, not stuck; the cause is the other (who waits on whom says so)."""
    on_gpu = {p.pid for p in procs if any(t.stuck and t.wait.category == GPU for t in p.threads)}
    for p in procs:
        if not (on_gpu - {p.pid}):
            continue
        coll = [t for t in p.threads if t.stuck and t.wait.category == COLLECTIVE]
        if coll and not any(t.stuck and t.wait.category == GPU for t in p.threads):
            for t in coll:
                t.stuck = False
            p.state = _state(p.threads)


# the state of a finding from a single sample: where each thread waits, not yet judged
ONE_SAMPLE = "one-sample"
SECOND_SAMPLE = ("take a second sample to tell stuck from slow: `faultkit dump --pid PID --samples 2`, or the same "
                 "dump (py-spy dump, gdb `thread apply all bt`) again a few seconds later, both given to "
                 "`faultkit dump --read FIRST --read SECOND` or to triage")


def _waits_in(p: ProcessFinding) -> str:
    """Each foreground thread's wait (file:line function, and on what); background ones counted."""
    fg = [t for t in p.threads if not t.wait.background]
    parts = [t.describe() for t in fg[:6]]
    if len(fg) > len(parts):
        parts.append(f"{len(fg) - len(parts)} more")
    bg = [t for t in p.threads if t.wait.background]
    if bg:
        parts.append(f"{len(bg)} background thread(s) (" + ", ".join(dict.fromkeys(t.wait.on for t in bg)) + ")")
    who = p.label
    return f"{who}: " + ", ".join(parts)


def closed_tree(procs: list[ProcessFinding]) -> str | None:
    """Why nothing can wake a tree that only waits on itself, or None: some thread waits on the
    outside (a client, a timer), or nobody waits on another of the tree."""
    live = [p for p in procs if p.state != EXITED]
    fg = [(p, t) for p in live for t in p.threads if not t.wait.background]
    if not fg or any(t.wait.kind in OUTSIDE_KINDS for _, t in fg):
        return None
    waiting = next(((p, t) for p, t in fg if t.wait.kind in WAITS_ON_OTHER), None)
    if waiting is None:
        return None
    p, t = waiting
    if t.wait.kind == "subprocess":      # what its child waits in
        on = next(((q, u) for q in live if q.ppid == p.pid for u in q.threads if not u.wait.background), None)
    else:                                # a join: what its other threads wait in
        on = next(((p, u) for u in p.threads if u is not t and not u.wait.background), None)
    them = ""
    if on is not None:
        whose = "" if on[0] is p else f"its child {on[0].label}'s "
        them = f"; {whose}{on[1].describe()}"
    return (f"{p.label} waits on another of its tree and nothing outside it can start work (no thread waits on a "
            f"socket, a message queue, an event loop or a timer): its {t.describe()}{them}")


def who_waits_on_whom(procs: list[ProcessFinding], lags: list[CollectiveLag],
                      kernels: list[RunningKernel]) -> list[str]:
    out = []
    by_rank = {p.rank: p for p in procs if p.rank is not None}
    gpu_stuck = [p for p in procs if any(t.stuck and t.wait.category == GPU for t in p.threads)]
    coll = [p for p in procs if any(t.wait.category == COLLECTIVE and not t.wait.background for t in p.threads)]
    for p in coll:
        for q in gpu_stuck:
            if q.pid != p.pid:
                t = next(t for t in q.threads if t.stuck and t.wait.category == GPU)
                w = next(t for t in p.threads if t.wait.category == COLLECTIVE and not t.wait.background)
                out.append(f"{p.label} waits in {w.wait.on} while {q.label} is stuck on its GPU in {t.wait.on}"
                           + (f" at {t.wait.where.where}" if t.wait.where else ""))
    for lag in lags:
        if (words := unjoined(lag)) is not None:
            out.append(words)
        for r in lag.behind:
            q = by_rank.get(r)
            doing = ""
            if q is not None:
                # what the rank behind does: its stuck thread, else a busy one, else its main thread
                t = next((t for t in q.threads if t.stuck), None) or next(
                    (t for t in q.threads if not t.wait.idle), None) or next(
                    (t for t in q.threads if t.name == "MainThread"), None) or (q.threads or [None])[0]
                doing = f"; it is {q.state}" + (f": its {t.describe()}" if t else "")
            out.append(f"ranks {', '.join(map(str, lag.ahead))} wait in {lag.ahead_at.op} #{lag.ahead_at.seq} "
                       f"for rank {r}" + doing)
    by_pid = {p.pid: p for p in procs}
    for p in procs:
        if p.state == EXITED and p.ppid in by_pid and by_pid[p.ppid].state != EXITED:
            out.append(f"{p.label} exited between the samples; its parent pid {p.ppid} goes on "
                       f"({by_pid[p.ppid].state})")
        if any(t.wait.kind == "subprocess" for t in p.threads):
            kids = [q for q in procs if q.ppid == p.pid and q.state in (STUCK, BLOCKED, EXITED)]
            out += [f"{p.label} waits for its child {q.label}, which is {q.state}" for q in kids]
    for k in kernels:
        q = by_pid.get(k.pid)
        if q is not None and q.state == STUCK:
            out.append(f"{q.label}'s GPU was running {k.kernel}" + (f" at {k.where}" if k.where else "")
                       + f" ({k.origin}, user-triggered core)")
    return list(dict.fromkeys(out))


def counted_running(hf: HangFinding | None, running: list[RunningKernel]) -> list[RunningKernel]:
    """The kernels in user-triggered cores that still say something: none of an idle tree (a
    kernel an idle server's GPU was running is no finding), every one otherwise; a stuck
    process's kernel is claimed by `hang_claims` instead."""
    if hf is None:
        return running
    if hf.state == "idle":
        return []
    stuck = {t.pid for t in hf.stuck}
    return [k for k in running if k.pid not in stuck]


def hang_claims(hf: HangFinding | None, faulted: bool) -> list[Claim]:
    """What the stacks say to the judge. The kernel running on the GPU of a process whose stacks
    show it stuck is a claim (where nothing faulted: then the fault is the story); the hang
    itself, with no kernel, gives the verdict its words where no kernel can be named."""
    if hf is None or hf.state == UNKNOWN:
        return []
    words = "; ".join([hf.summary, *hf.waits_on])
    out = []
    stuck = {t.pid: t for t in hf.stuck}
    for k in hf.kernels if not faulted else []:
        t = stuck.get(k.pid)
        if t is not None:
            out.append(Claim(k.kernel, Basis("hang-stuck-kernel", "GPU core dump and host stacks"),
                             f"running on the GPU of pid {k.pid}" + (f" at {k.where}" if k.where else "")
                             + f" ({k.origin}), whose {t.describe()}", Identities(pid=k.pid), k.core,
                             ceiling_note="no GPU exception stopped it: the kernel the GPU was running while the host "
                                          "waited on it, not one seen faulting"))
    lead = {"idle": "idle, not hung", "busy": "working, not stuck",
            ONE_SAMPLE: "stacks of one moment (a hang is not told from a pause by one)"}.get(hf.state, f"hang ({hf.level})")
    out.append(Claim(None, Basis(hf.basis or "hang-stacks", "host stacks"), f"no GPU exception; {lead}: {words}"))
    return out


def hang_steps(hf: HangFinding | None) -> list[str]:
    """A hang's next steps, from what its stacks say (none where there are no stacks): what a
    no-fault report says instead of asking for a crash log."""
    if hf is None or hf.state == UNKNOWN and not hf.processes:
        return []
    if hf.state == "hung" and any(t.wait.category in (GPU, COLLECTIVE) for t in hf.stuck):
        return ["A thread waits on the GPU or a collective and does not move: see what each GPU runs at that moment "
                "with `faultkit capture --hang-after 5m -- <launch command>` (each GPU process is asked for a core "
                "dump of its running kernels before anything is stopped), and compare the ranks' last collectives "
                "(the flight records in the bundle's collectives/)."]
    if hf.state == "hung" and hf.lags and not hf.stuck and not any(p.state == BLOCKED for p in hf.processes):
        return [f"A rank waits in a collective another never joined: to see which rank and where it is, collect "
                f"{COLLECT_EVERY_RANK}."]
    if hf.state == "hung" and any(p.state == BLOCKED for p in hf.processes) and not any(
            t.wait.kind in BLOCKING_HOST for p in hf.processes for t in p.threads):
        return ["Threads are blocked in calls Python does not show (py-spy without --native): take the dumps again "
                "with `py-spy dump --native --pid PID` (or `faultkit dump --pid PID`, which does) to see which call "
                "each waits in."]
    if hf.state == "hung" and any(p.state == BLOCKED for p in hf.processes):
        return ["A thread waits on a lock that is not released: the thread holding it is among the others in the "
                "hang analysis (one that took the lock and now waits on something else); `py-spy dump --locals "
                "--pid PID` shows which lock each frame holds."]
    if hf.state == "hung":
        return ["Every process waits on another of its tree and none on the outside: find the message that is "
                "never sent (a task's end marker, a reply, a child's result) between the waits the hang analysis "
                "lists."]
    if hf.state == "idle":
        return ["The target was idle when the capture ended (every thread waited for work): no request was in "
                "flight. Send it the request that hangs while capturing with `--hang-after` (an idle server is let "
                "run; a stuck one is stopped with its stacks)."]
    if hf.state == "busy":
        return ["The target was working when the capture ended (a thread on a CPU, or stacks that moved): give it "
                "longer (`--timeout`), or take its stacks again with `faultkit dump BUNDLE` while it runs."]
    return ["The stacks could not tell a hang (see the hang analysis): take them again with `faultkit dump --pid PID` "
            "where py-spy or gdb can read the processes."]
