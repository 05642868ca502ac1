"""Running an amplify experiment: rounds of (plain + every running amplifier arm) in a seeded order,
a look after each round (sequential.py), one trial per GPU set at a time.

It reuses trials wholesale: the plan (plan.json: the same order, the same fingerprints, the same
resume rules), the trial folders and `run_one` (a clean port, the arm's variables verified in
/proc, the bundle kept, start-up failures marked). What amplify adds: the amplifier arms, the agent
in every arm (equally: the only difference between arms is the amplifier), the proof that each
amplifier reached the GPU processes (a trial without it is not counted), the looks, parallel slots,
and the checkers' single trials. Another engine (a cluster's) calls `run_trial` the same way.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..capture.agent import agent_env
from ..capture.launcher import DeferredSigint, port_listening
from ..private_files import private_dir, write_private
from ..trials.placement import GPU_VARIABLES, placement
from ..trials.records import CRASH, FAILED_TO_START, PlanEntry, RecordError, TrialResult
from ..trials.runner import (PLAN, RESULT, Arm, TrialsError, load_or_create_plan, read_plan, read_result, run_one,
                             trial_dir)
from ..agent import files as agent_files
from . import arms as A
from . import reach
from .sequential import RUNNING, look

PLAIN = "plain"
ROUNDS_LOG = "rounds.json"
CHECKERS_DIR = "checkers"
NOT_REACHED_STOP = 2          # an arm whose amplifier reached none of its first trials is stopped
VISIBILITY = GPU_VARIABLES[:3]          # the runtimes' own visibility variables (trials' placement owns the list)
FAILED_TO_START_STATE, NOT_REACHED_STATE = "failed-to-start", "not-reached"


@dataclass
class Options:
    command: str
    out: Path
    client: str | None = None
    arms: tuple[str, ...] = A.DEFAULT
    sites: tuple[str, ...] = ()
    rounds: int = 10
    alpha: float = 0.05
    seed: int = 0
    port: int | None = None
    timeout_s: float = 2400.0
    ready_pattern: str | None = None
    gpus: tuple[str, ...] = ()
    gpus_per_trial: int = 1
    agent: bool = True
    coredump: bool = True
    alloc_history: bool = False
    black_box_trials: int = 1
    early_stop: bool = True       # False: every round runs and one look at the end decides (at alpha)


@dataclass
class Slot:
    gpus: tuple[str, ...]
    port: int | None


@dataclass
class ArmState:
    arm: Arm
    amp: A.Amplifier | None
    state: str = RUNNING
    decided_round: int | None = None
    at_decision: tuple | None = None     # ((crashes, n), (plain crashes, plain n), p) at the look that stopped it
    results: list[TrialResult] = field(default_factory=list)
    reached: dict[int, reach.Reach] = field(default_factory=dict)

    def counted(self) -> list[TrialResult]:
        return [r for r in self.results if r.counted and self.reached.get(r.index, reach.Reach(True)).ok]

    def rate(self) -> tuple[int, int]:
        c = self.counted()
        return sum(r.crashed for r in c), len(c)


class AmplifyError(TrialsError):
    """Said to the user: the experiment cannot run as asked."""


def slots(opts: Options) -> list[Slot]:
    """One GPU set per concurrent trial, disjoint; one port each (base + slot) when there is a port."""
    if not opts.gpus:
        return [Slot((), opts.port)]
    ids = [g.strip() for g in opts.gpus if g.strip()]
    if len(set(ids)) != len(ids):
        raise AmplifyError(f"--gpus names a GPU twice ({', '.join(ids)}): the GPU sets of parallel trials must be "
                           f"disjoint")
    k = opts.gpus_per_trial
    if k < 1 or len(ids) < k:
        raise AmplifyError(f"--gpus-per-trial {k} with {len(ids)} GPU(s) given")
    if len(ids) % k:
        raise AmplifyError(f"{len(ids)} GPUs do not split into sets of {k}: give a multiple of --gpus-per-trial")
    set_by = [v for v in VISIBILITY if os.environ.get(v)]
    if set_by:
        raise AmplifyError(f"{set_by[0]}={os.environ[set_by[0]]} is already set here: the trials' GPU sets would be "
                           f"chosen inside it, not as --gpus says. Unset it (or give --gpus inside it yourself)")
    sets = [tuple(ids[i:i + k]) for i in range(0, len(ids), k)]
    if len(sets) > 1 and opts.port and "{port}" not in opts.command:
        raise AmplifyError("parallel trials need a port each: write {port} in the server command (and the client) "
                           "where the port goes; --port is the first slot's, the next slots count up")
    return [Slot(s, (opts.port + i) if opts.port else None) for i, s in enumerate(sets)]


def visibility_var() -> str:
    # One variable only: ROCm's filter (ROCR) and HIP's (HIP/CUDA) compose, so setting both would
    # index the second into what the first left (GPU 2 of 1 visible = none).
    return "ROCR_VISIBLE_DEVICES" if os.path.exists("/dev/kfd") else "CUDA_VISIBLE_DEVICES"


def build_arms(opts: Options) -> tuple[list[ArmState], list[ArmState], list[dict]]:
    """The rate arms (plain first), the checkers, and the arms not run here with why."""
    rate, checkers, skipped = [ArmState(Arm(PLAIN, opts.command), None)], [], []
    for name in opts.arms:
        amp = A.BY_NAME.get(name)
        if amp is None:
            raise AmplifyError(f"no amplifier {name!r}; known: {', '.join(A.BY_NAME)}")
        why = A.applicable(amp, opts.command, list(opts.sites))
        if why:
            skipped.append({"arm": name, "why": why})
            continue
        env = A.arm_env(amp, list(opts.sites))
        for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
            if k in env and os.environ.get(k):          # the user's own options stay, the switch is added
                env[k] = f"{os.environ[k]},{env[k]}"
        st = ArmState(Arm(name, A.arm_command(amp, opts.command), env), amp)
        (checkers if amp.reads == A.ONE_TRIAL else rate).append(st)
    if len(rate) < 2 and not checkers:
        raise AmplifyError("no amplifier arm can run for this command here: " +
                           "; ".join(f"{s['arm']}: {s['why']}" for s in skipped))
    return rate, checkers, skipped


def trial_env(opts: Options, tdir: Path, slot: Slot) -> tuple[dict[str, str], dict[str, str]]:
    """(verified, bookkeeping): the slot's GPU set is verified like an amplifier's variable; the
    agent is the same in every arm and is not (the core-dump arming is run_one's, `cores`)."""
    verified = {visibility_var(): ",".join(slot.gpus)} if slot.gpus else {}
    extra: dict[str, str] = {agent_files.ENV_SEED: str(opts.seed)}
    if opts.agent:
        extra.update(agent_env(tdir, opts.alloc_history, extra))
    return verified, extra


PORT_WAIT_S = 30.0          # how long a slot's port may stay taken (a server from before still exiting)


def wait_for_port(slot: Slot) -> None:
    """The slot's port free within PORT_WAIT_S, or the error that says who holds it."""
    if slot.port is None:
        return
    end = time.monotonic() + PORT_WAIT_S
    while port_listening(slot.port):
        if time.monotonic() > end:
            raise AmplifyError(f"port {slot.port} is still in use: a server from before is listening; a trial "
                               f"would talk to it. Stop it and run again (finished trials are kept).")
        time.sleep(0.5)


def run_trial(opts: Options, st: ArmState, entry: PlanEntry, tdir: Path, slot: Slot,
              sigint: DeferredSigint | None = None) -> TrialResult:
    """One trial of one arm in one slot: the port free, the slot's GPUs and the port put in, run by
    trials' run_one. The function an engine calls (in turn, in a thread, on a node)."""
    wait_for_port(slot)
    verified, extra = trial_env(opts, tdir, slot)
    port = str(slot.port) if slot.port is not None else ""
    arm = Arm(st.arm.name, st.arm.command.replace("{port}", port), {**st.arm.env, **verified})
    client = opts.client.replace("{port}", port) if opts.client else None
    where = {**placement("local", slot=",".join(slot.gpus) or None), "gpus": verified}
    return run_one(tdir, entry, arm, client, slot.port, opts.timeout_s, opts.ready_pattern, placement=where,
                   extra_env=extra, sigint=sigint, cores=opts.coredump)


def _finished(tdir: Path, replay: bool = False) -> TrialResult | None:
    """A trial's result read back; an unreadable one is set aside to be run again, except by
    `amplify report` (replay), which reads the folder and changes nothing in it."""
    done = tdir / RESULT
    if not done.exists():
        return None
    try:
        r = read_result(done)
    except RecordError:
        if not replay:
            done.rename(done.with_name(RESULT + ".unreadable"))
        return None
    return r if r.outcome != FAILED_TO_START else None


OPTIONS = "amplify.json"


def save_options(opts: Options) -> None:
    """What `amplify report` needs to replay the looks; the commands redacted as in plan.json."""
    from .. import redact
    d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(opts).items() if k != "out"}
    d["command"] = redact.text(opts.command)
    d["client"] = redact.text(opts.client) if opts.client else None
    d["schema"] = "faultkit.amplify.options/1"
    write_private(opts.out / OPTIONS, json.dumps(d, indent=2))


def load_options(out: Path) -> Options:
    try:
        d = json.loads((out / OPTIONS).read_text())
        d.pop("schema", None)
        return Options(out=out, **{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})
    except (OSError, ValueError, TypeError, AttributeError, RecursionError) as exc:    # nested too deep, not a dict
        raise AmplifyError(f"{out / OPTIONS} is missing or not an amplify record ({exc}): is {out} an amplify "
                           f"folder?") from None


def run(opts: Options, echo=print, warn=None, replay: bool = False) -> dict:
    """Runs (or resumes) the experiment; returns the facts the report is made of. `replay`: only
    read the finished trials and redo the looks (the report of a folder)."""
    warn = warn or echo
    rate, checkers, skipped = build_arms(opts)
    pool = slots(opts) if not replay else [Slot(tuple(opts.gpus), opts.port)]
    if replay:
        try:
            plan = read_plan(opts.out / PLAN)
        except RecordError as exc:
            raise AmplifyError(str(exc)) from None
    else:
        plan = load_or_create_plan(opts.out, [s.arm for s in rate], opts.rounds, opts.seed, opts.client, opts.port,
                                   opts.timeout_s)
        save_options(opts)
        if opts.agent:
            from .prebuild import prebuild
            prebuild(opts.command, any(s.amp and agent_files.ARMED_POISON in s.amp.agent for s in rate), echo, warn)
    by_name = {s.arm.name: s for s in rate}
    rounds_log = _read_rounds(opts.out)
    sigint = DeferredSigint()
    sigint.__enter__()
    try:
        for r in range(opts.rounds):
            running = [s for s in rate[1:] if s.state == RUNNING]
            if not running:
                break
            entries = [e for e in plan.order if e.pair == r and (e.arm == PLAIN or by_name[e.arm].state == RUNNING)]
            t0 = time.monotonic()
            fresh = _run_round(opts, entries, by_name, pool, sigint, echo, warn, replay)
            wall = time.monotonic() - t0
            before = (rounds_log.get(str(r)) or {}).get("wall_s", 0.0)      # a resumed round adds its time
            rounds_log[str(r)] = {"wall_s": round(before + (wall if fresh else 0.0), 3), "trials": len(entries)}
            _looks(opts, rate, r, echo)
            rounds_log[str(r)]["states"] = {s.arm.name: s.state for s in rate[1:]}
            if not replay:
                write_private(opts.out / ROUNDS_LOG, json.dumps(rounds_log, indent=2))
            if sigint.hit:
                raise KeyboardInterrupt
        check_results = _run_checkers(opts, checkers, pool[0], sigint, echo, replay)
    finally:
        sigint.__exit__()
    return {"options": opts, "arms": rate, "checkers": check_results, "skipped": skipped, "slots": pool,
            "rounds": rounds_log, "plan": plan}


def _run_round(opts, entries, by_name, pool, sigint, echo, warn, replay=False) -> int:
    """The round's trials, each in a free slot; finished ones (resume) are read back. Returns how many ran."""
    todo = []
    for e in entries:
        tdir = trial_dir(opts.out, e)
        prev = _finished(tdir, replay)
        if prev is not None:
            _record(by_name[e.arm], prev, tdir)
        else:
            todo.append((e, tdir))
    if not todo or replay:
        return 0
    free: queue.Queue = queue.Queue()
    for s in pool:
        free.put(s)
    errors: list[BaseException] = []
    lock = threading.Lock()

    def one(e, tdir, slot):
        try:
            res = run_trial(opts, by_name[e.arm], e, tdir, slot, sigint)
            with lock:
                _record(by_name[e.arm], res, tdir)
                _say(by_name[e.arm], res, slot, echo, warn)
        except BaseException as exc:          # KeyboardInterrupt from run_one, a port in use
            errors.append(exc)
        finally:
            free.put(slot)

    threads = []
    for e, tdir in todo:
        if errors or sigint.hit:
            break
        slot = free.get()
        try:
            wait_for_port(slot)       # before the trial is announced: a taken port runs no trial
        except AmplifyError as exc:
            errors.append(exc)
            free.put(slot)
            break
        echo(f"trial {e.index + 1}: round {e.pair + 1}, arm {e.arm}, in {tdir.name}"
             + (f", GPUs {','.join(slot.gpus)}" if slot.gpus else "") + " ...")
        if len(pool) == 1:
            one(e, tdir, slot)
            continue
        t = threading.Thread(target=one, args=(e, tdir, slot), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    if sigint.hit:
        raise KeyboardInterrupt
    return len(todo)


def _record(st: ArmState, res: TrialResult, tdir: Path) -> None:
    st.results = [r for r in st.results if r.index != res.index] + [res]
    st.reached[res.index] = reach.check(st.amp, res, tdir) if res.counted else reach.Reach(False, "failed to start")


def _say(st: ArmState, res: TrialResult, slot: Slot, echo, warn) -> None:
    from ..trials.runner import outcome_line, trial_name
    r = st.reached[res.index]
    name = trial_name(res.index, res.arm)                 # the folder, as the verdict and report name it
    if not res.counted:
        warn(f"warning: trial {res.index + 1} ({name}): {outcome_line(res)}")
    elif not r.ok:
        warn(f"warning: trial {res.index + 1} ({name}) NOT COUNTED: the amplifier did not reach the work: "
             f"{r.why}")
    else:
        echo("  -> " + outcome_line(res))


def _looks(opts: Options, rate: list[ArmState], r: int, echo) -> None:
    plain = rate[0]
    if plain.results and not plain.counted() and r == 0 and not plain.results[0].counted:
        raise AmplifyError(f"the plain arm failed to start: {plain.results[0].failed_to_start}. Nothing can be "
                           f"compared; fix the command and run again (a changed command needs a new -o folder)")
    for st in rate[1:]:
        if st.state != RUNNING:
            continue
        if st.results and r == 0 and not st.results[0].counted:
            st.state = FAILED_TO_START_STATE
            echo(f"  arm {st.arm.name} failed to start in its first trial: stopped ({st.results[0].failed_to_start})")
            continue
        started = [x for x in st.results if x.counted]
        if started and not any(st.reached[x.index].ok for x in started):
            if len(started) >= NOT_REACHED_STOP:
                st.state = NOT_REACHED_STATE
                echo(f"  arm {st.arm.name}: the amplifier reached none of its first {len(started)} trials: stopped "
                     f"({st.reached[started[-1].index].why})")
            continue                  # nothing counted yet: nothing to look at
        if not opts.early_stop:
            if r + 1 < opts.rounds:
                continue
            # one look, after the last round: Fisher's test at alpha itself (a fixed design)
            res = look(st.rate(), plain.rate(), 1, 1, opts.alpha)
        else:
            res = look(st.rate(), plain.rate(), r + 1, opts.rounds, opts.alpha)
        if res.state != RUNNING:
            st.state, st.decided_round = res.state, r + 1
            st.at_decision = (st.rate(), plain.rate(), res.p)
            (ca, na), (cp, np_) = st.rate(), plain.rate()
            echo(f"  arm {st.arm.name} {res.state} after round {r + 1}: {ca}/{na} vs plain {cp}/{np_} "
                 f"(p = {res.p:.2g}, threshold {res.threshold:.2g})")


def _run_checkers(opts: Options, checkers: list[ArmState], slot: Slot, sigint, echo, replay=False) -> list[dict]:
    out = []
    for i, st in enumerate(checkers):
        tdir = opts.out / CHECKERS_DIR / st.arm.name
        entry = PlanEntry(index=10000 + i, pair=0, position=0, arm=st.arm.name)
        res = _finished(tdir, replay)
        if res is None and replay:
            continue
        if res is None:
            wait_for_port(slot)       # before the trial is announced, as a round's trials
            echo(f"checker {st.arm.name}: one trial ...")
            res = run_trial(opts, st, entry, tdir, slot, sigint)
        out.append({"arm": st.arm.name, "result": res, "dir": tdir})
    return out


def _read_rounds(out: Path) -> dict:
    try:
        d = json.loads((out / ROUNDS_LOG).read_text())
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError, RecursionError):      # a log nested too deep is no log
        return {}


def crashed_dirs(out: Path, st: ArmState) -> list[Path]:
    return [trial_dir(out, r) for r in sorted(st.counted(), key=lambda r: r.index) if r.outcome == CRASH]
