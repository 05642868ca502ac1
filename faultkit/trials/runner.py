"""Run crash-rate trials: arms alternate in pairs, seeded order within each pair, one bundle a trial.

Every trial starts from a clean state (the previous tree gone, the port free), has the arm's
environment verified in /proc of the processes it started, and ends at a crash, at the client's
end, or at its timeout. `plan.json` fixes the order once; `result.json` marks a finished trial,
so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout
from .. import redact as redaction
from .._signals import exit_words
from ..capture.launcher import (DeferredSigint, Launch, clocks, ended_by_time_or_interrupt, port_from_command,
                                port_listening)
from ..capture.kmsg import KmsgFollower
from ..capture.proctree import TreeSampler, describe_env_check, verify_env
from ..capture import coredump, watchdog
from ..capture.backends import FaultGrace
from ..private_files import private_dir, private_tree, write_private
from .metric import metric_from
from .records import (CRASH, FAILED_TO_START, NO_CRASH, ArmSpec, EnvCheck, Plan, PlanEntry, PlanSpec, RecordError,
                      TrialResult)
from .signature import crash_signature
from .stats import DEFAULT_ALTERNATIVE
from .start import start_failure
from .placement import placement

PLAN = "plan.json"
RESULT = layout.TRIAL_RESULT

FAULT_GRACE_S = 0.5      # after the fault line (and after a GPU core is written): the runtime's report ends
KERNEL_SETTLE_S = 0.3    # after the tree is stopped: the driver's records of its teardown reach the kernel log
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")


class TrialsError(Exception):
    """A condition that makes running (more) trials meaningless; said to the user, no traceback."""


class StartFailure(TrialsError):
    """An arm's server did not start in the first pair: every later trial of it would too."""


@dataclass
class Arm:
    name: str
    command: str
    env: dict[str, str] = field(default_factory=dict)


def make_plan(arms: list[Arm], n: int, seed: int) -> list[PlanEntry]:
    rng = random.Random(seed)
    order: list[PlanEntry] = []
    for pair in range(n):
        names = [a.name for a in arms]
        rng.shuffle(names)
        for pos, name in enumerate(names):
            order.append(PlanEntry(index=len(order), pair=pair, position=pos, arm=name))
    return order


def plan_spec(arms: list[Arm], n: int, seed: int, client: str | None, port: int | None, timeout_s: float,
              salt: str, alternative: str = DEFAULT_ALTERNATIVE) -> PlanSpec:
    # Secrets in an arm's command, its variables or the client are written redacted (as in a
    # bundle); the fingerprints (HMACs under the plan's salt) still tell a resumed run from a
    # different experiment.
    return PlanSpec(arms=[ArmSpec(a.name, redaction.text(a.command), redaction.fingerprint(a.command, salt),
                                  redaction.env(a.env), {k: redaction.fingerprint(v, salt) for k, v in a.env.items()})
                          for a in arms],
                    n=n, seed=seed, client=redaction.text(client) if client else None, port=port,
                    trial_timeout_s=float(timeout_s), client_fingerprint=redaction.fingerprint(client, salt),
                    alternative=alternative)


def load_or_create_plan(out: Path, arms: list[Arm], n: int, seed: int, client: str | None, port: int | None,
                        timeout_s: float, alternative: str | None = None) -> Plan:
    path = out / PLAN
    old = None
    if path.exists():
        try:
            old = read_plan(path)
        except RecordError as exc:
            raise TrialsError(f"{path} is cut or not a faultkit trials plan ({exc}); finished trials are kept in "
                              f"their folders, but the order cannot be resumed from it: use another -o folder")
    # The fingerprints are salted per experiment: a resumed run takes the salt its plan stored.
    salt = old.salt if old is not None and old.salt else redaction.new_salt()
    # the test's sidedness is the plan's once chosen: a resume that does not say it keeps it
    alternative = alternative or (old.spec.alternative if old is not None else DEFAULT_ALTERNATIVE)
    spec = plan_spec(arms, n, seed, client, port, timeout_s, salt, alternative)
    if old is not None:
        plan = old
        if plan.spec != spec:
            raise TrialsError(f"{path} was made for a different experiment (arms, n, seed, client, port, timeout or "
                              f"the test's sidedness differ); use another -o folder or the same arguments to resume")
        return plan
    private_dir(out)
    plan = Plan(spec=spec, order=make_plan(arms, n, seed), created=time.time(), salt=salt)
    write_private(path, json.dumps(plan.to_json(), indent=2))
    return plan


def read_plan(path: Path) -> Plan:
    return Plan.from_json(_json(path), str(path))


def read_result(path: Path) -> TrialResult:
    return TrialResult.from_json(_json(path), str(path))


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except RecursionError:
        raise RecordError(f"{path}: nested too deeply to be a faultkit trials file")
    except OSError as exc:
        raise RecordError(f"{path}: unreadable ({exc.strerror or exc})")
    except ValueError as exc:
        raise RecordError(f"{path}: cut or not JSON ({exc})")


def trial_name(index: int, arm: str) -> str:
    """A trial's folder name: what every message about the trial names (its number counts from 0)."""
    return f"trial-{index:03d}-{arm}"


def trial_dir(out: Path, entry: PlanEntry | TrialResult) -> Path:
    return out / trial_name(entry.index, entry.arm)


def run_trials(out: Path, arms: list[Arm], n: int, seed: int = 0, client: str | None = None,
               port: int | None = None, timeout_s: float = 2400.0, ready_pattern: str | None = None,
               port_wait_s: float = 30.0, echo=print, metric: str | None = None, warn=None,
               verbose: bool = False, alternative: str | None = None) -> list[TrialResult]:
    """`echo` says each trial's progress (silenced by -q), `warn` what the user must know (never
    silenced); `verbose` adds each trial's fault line and signature."""
    warn = warn or echo
    port = check_arms(arms, port)
    plan = load_or_create_plan(out, arms, n, seed, client, port, timeout_s, alternative)
    by_name = {a.name: a for a in arms}
    results = []
    for entry in plan.order:
        tdir = trial_dir(out, entry)
        done = tdir / RESULT
        if done.exists():
            try:
                finished = read_result(done)
            except RecordError as exc:
                warn(f"warning: trial {entry.index + 1}: {done} is cut or malformed ({exc}); the trial is run again")
                done.rename(done.with_name(RESULT + ".unreadable"))
            else:
                if finished.counted:
                    results.append(finished)
                    continue
                warn(f"warning: trial {entry.index + 1}: failed to start last time ({finished.failed_to_start}); "
                     f"run again")
        if port is not None:
            _wait_port_free(port, port_wait_s)
        echo(f"trial {entry.index + 1}/{len(plan.order)}: arm {entry.arm} ...")
        result = run_one(tdir, entry, by_name[entry.arm], client, port, timeout_s, ready_pattern, metric,
                         placement=placement("local"))
        (echo if result.counted else warn)("  -> " + outcome_line(result) if result.counted else
                                           f"warning: trial {entry.index + 1} ({entry.arm}): " + outcome_line(result))
        if verbose and result.fault_line:
            echo(f"     fault line: {result.fault_line[:200]}")
        if verbose and result.signature:
            echo(f"     signature: {result.signature}")
        if not result.counted and entry.pair == 0:
            raise StartFailure(f"arm {entry.arm} failed to start in its first trial: {result.failed_to_start}. The "
                               f"experiment is stopped: every trial of this arm would fail the same way, and a "
                               f"start-up failure says nothing about crash rates. Its output is in "
                               f"{tdir / layout.log_of(layout.SERVER)}. Fix the arm's command and run again (a "
                               f"changed command needs a new -o folder).")
        results.append(result)
    return results


def check_arms(arms: list[Arm], port: int | None) -> int | None:
    """Refuse arms that cannot make an experiment; the port the trials use (given, or the arms' own)."""
    if len({a.name for a in arms}) != len(arms) or len(arms) < 2:
        raise TrialsError("give at least two arms with different names")
    for a in arms:
        if not ARM_NAME.fullmatch(a.name):
            raise TrialsError(f"arm name {a.name!r}: use letters, digits, '_', '-' or '.' (at most 40, not starting "
                              f"with '.'): it names the trial folders")
    return port or next((p for p in (port_from_command(a.command) for a in arms) if p), None)


def outcome_line(r: TrialResult) -> str:
    if r.outcome == FAILED_TO_START:
        return f"FAILED TO START ({r.failed_to_start}; not counted)"
    figure = f", metric {r.metric:g}" if r.metric is not None else ""
    return (f"{'CRASH' if r.crashed else 'no crash'} ({r.ended_by}, {r.duration_s:.1f}s, "
            f"env {describe_env_check(r.env.to_json())}{figure})")


def _wait_port_free(port: int, wait_s: float) -> None:
    end = time.monotonic() + wait_s
    while port_listening(port):
        if time.monotonic() > end:
            raise TrialsError(f"port {port} is still in use: a server from before (or from another experiment) "
                              f"is listening. A trial would talk to that stale server and silently measure the "
                              f"wrong thing. Stop it and run again (finished trials are kept).")
        time.sleep(0.5)


def run_one(tdir: Path, entry: PlanEntry, arm: Arm, client: str | None, port: int | None, timeout_s: float,
            ready_pattern: str | None, metric: str | None = None, placement: dict | None = None,
            extra_env: dict[str, str] | None = None, sigint: DeferredSigint | None = None,
            cores: bool = False) -> TrialResult:
    """One trial in `tdir`, start to result.json: the function every engine calls (in turn, in threads,
    on a cluster's node). `placement` says where it ran (trials.task.placement), recorded in its result.
    `arm.env` is what the trial tests and is verified in /proc; `extra_env` is bookkeeping the server
    gets unverified (the agent's folder, core-dump arming). `sigint`: a DeferredSigint the caller holds
    (threads cannot install signal handlers), else its own. `cores`: arm the runtimes' GPU core dumps
    as a capture does (capture.coredump: the variables, the core-size limit) and collect what they wrote
    into the trial's cores/ (result.cores); after a fault line the trial waits, as a capture does
    (FaultGrace), until a core being written is done: a signal mid-dump leaves no core."""
    private_dir(tdir)
    for stale in ("server.log", "server.times.tsv", "client.log", "client.times.tsv", "kernel.log"):
        (tdir / stale).unlink(missing_ok=True)  # a trial interrupted half-way starts over
    arming = None
    if cores:
        private_dir(tdir / layout.CORES_DIR)
        arming = coredump.arm(tdir)
    env = {**(arming.env if arming else {}), **(extra_env or {}), **arm.env}
    env["FAULTKIT_TRIAL_INDEX"] = str(entry.index)
    token = secrets.token_hex(8)
    env[watchdog.MARKER] = token            # what this trial started, daemons included, is killed after it
    kernel = KmsgFollower(tdir / layout.KERNEL_FOLLOW)  # the trial's own kernel log: GPU faults give the signature
    kernel.start()
    server = Launch(arm.command, tdir, layout.SERVER, env, arming.core_limit if arming else None)
    ready = server.watch_for(ready_pattern) if ready_pattern else None
    waits_for_ready = bool(client) and (ready is not None or port is not None)
    start = time.monotonic()
    try:
        server.start()
    except OSError as exc:                  # a command started without a shell that cannot be spawned
        kernel.stop()
        return _finish(tdir, TrialResult(
            index=entry.index, pair=entry.pair, arm=arm.name, outcome=FAILED_TO_START, ended_by="not-started",
            duration_s=0.0, env=EnvCheck(ok=False, wanted=redaction.env(arm.env)), command=redaction.text(arm.command),
            exit="not started", failed_to_start=f"could not be started ({exc.strerror or exc})"), [])
    sampler = TreeSampler(server.proc.pid)
    client_launch: Launch | None = None
    ended_by = None
    grace = FaultGrace(FAULT_GRACE_S)
    fault_at: float | None = None
    own_sigint = sigint is None
    if own_sigint:
        sigint = DeferredSigint()
        sigint.__enter__()
    try:
        while ended_by is None:
            sampler.sample()
            if server.poll() is not None:
                ended_by = "server-exit"
            elif server.fault_line:
                # the runtime's report (and a GPU core being written: the CUDA driver takes seconds on
                # an H200, and a signal then leaves no core) is let finish before the tree is stopped
                fault_at = fault_at or time.monotonic()
                ended_by = "fault-line" if grace.step(server.tee) else \
                    ended_by_time_or_interrupt(start, timeout_s, sigint)
            elif client and client_launch is None and _is_ready(ready, port, start):
                client_launch = Launch(client, tdir, "client", {"FAULTKIT_TRIAL_INDEX": str(entry.index)})
                client_launch.start()
            elif client_launch is not None and client_launch.poll() is not None:
                ended_by = "client-exit"
            else:
                ended_by = ended_by_time_or_interrupt(start, timeout_s, sigint)
    finally:
        if own_sigint:
            sigint.__exit__()
        end = clocks()
        exit_code = server.poll()
        if client_launch is not None:
            client_launch.stop()
        stopped_with = server.stop()
        leftovers = watchdog.kill_marked(token)
        if exit_code is None:
            exit_code = server.poll()
        # The NVIDIA driver logs a context's MMU fault (Xid 31, the record with an address) when the
        # process's GPU context is torn down, after it died: followed until then, it lands in this
        # trial's kernel log, not in the next trial's (seen on the H200).
        time.sleep(KERNEL_SETTLE_S)
        kernel.stop()
    duration = time.monotonic() - start
    records = sampler.records()
    found = (coredump.find_cores(tdir, [r.pid for r in records], os.getcwd(), server.started["wall"],
                                 session=server.proc.pid) if arming else [])
    env_check = EnvCheck.from_json(verify_env(records, arm.env))   # the arm's own variables, not the bookkeeping ones
    if ended_by == "interrupted" or sigint.hit:
        # not a valid trial: leave no result so that a resumed run repeats it. A signal that came
        # while the server was ending counts too: Ctrl-C reaches the terminal's whole process group
        # and scancel every process of a Slurm task, so the server's death is the signal's, not a crash
        _write_environ(tdir, records)
        raise KeyboardInterrupt
    crashed = ended_by == "fault-line" or (ended_by == "server-exit" and exit_code not in (0, None))
    failed = start_failure(exit_code, ended_by, _output(tdir), waits_for_ready, client_launch is not None,
                           server.fault_line)
    outcome = FAILED_TO_START if failed else CRASH if crashed else NO_CRASH
    # the status as a shell says it (139 for SIGSEGV), whether the server ran under one or was exec'd
    status = None if exit_code is None else 128 - exit_code if exit_code < 0 else exit_code
    result = TrialResult(
        index=entry.index, pair=entry.pair, arm=arm.name, outcome=outcome, ended_by=ended_by, duration_s=duration,
        env=env_check, command=redaction.text(arm.command), exit=exit_words(exit_code), exit_code=status,
        time_to_crash_s=((fault_at or start + duration) - start) if outcome == CRASH else None,
        fault_line=redaction.text(server.fault_line or "") or None, failed_to_start=failed,
        stopped_with=stopped_with, killed_leftovers=leftovers,
        signature=crash_signature(tdir, exit_code) if outcome == CRASH else None,
        clocks={"start": server.started, "end": end},
        metric=metric_from(tdir, metric) if metric and outcome != FAILED_TO_START else None, metric_regex=metric,
        placement=placement or {}, cores=[c.to_json() for c in found])
    return _finish(tdir, result, records)


def _finish(tdir: Path, result: TrialResult, records) -> TrialResult:
    _write_environ(tdir, records)
    write_private(tdir / RESULT, json.dumps(result.to_json(), indent=2))
    private_tree(tdir)                      # what the server wrote into its trial folder too
    return result


def _write_environ(tdir: Path, records) -> None:
    write_private(tdir / layout.ENVIRON, json.dumps([r.to_json() for r in records], indent=2))


def _output(tdir: Path, limit: int = 1 << 16) -> str:
    """The head and the tail of the server's output: what a start-up failure says."""
    try:
        with open(tdir / layout.log_of(layout.SERVER), "rb") as fh:
            head = fh.read(limit)
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(len(head), size - limit))
            return (head + b"\n" + fh.read()).decode("utf-8", "replace")
    except OSError:
        return ""


def _is_ready(ready, port, start) -> bool:
    if ready is not None:
        return ready.is_set()
    if port is not None:
        return port_listening(port)
    return True


def load_results(out: Path) -> tuple[Plan | None, list[TrialResult], list[str]]:
    """The plan, the finished trials, and what could not be read (said, never silently dropped)."""
    plan_path = out / PLAN
    problems = []
    plan = None
    if plan_path.exists():
        try:
            plan = read_plan(plan_path)
        except RecordError as exc:
            problems.append(f"{exc}; the trials are reported without their plan")
    results = []
    for p in sorted(out.glob(f"trial-*/{RESULT}")):
        try:
            results.append(read_result(p))
        except RecordError as exc:
            problems.append(f"{p}: cut or malformed ({exc}); this trial is left out (run the same `trials run` "
                            f"to repeat it)")
    if plan is not None:
        known = set(plan.arm_names)
        for r in [r for r in results if r.arm not in known]:
            problems.append(f"{trial_dir(out, r)}: arm {r.arm!r} is not in the plan; this trial is left out")
            results.remove(r)
    return plan, results, problems
