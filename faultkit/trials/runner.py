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

from .. import redact as redaction
from .._signals import exit_words
from ..capture.launcher import (DeferredSigint, Launch, clocks, ended_by_time_or_interrupt, port_from_command,
                                port_listening)
from ..capture.kmsg import KmsgFollower
from ..capture.proctree import TreeSampler, verify_env
from ..capture import watchdog
from ..capture.session import private_dir
from .metric import metric_from
from .signature import crash_signature

PLAN_SCHEMA = "faultkit.trials.plan/1"
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
RESULT_SCHEMA = "faultkit.trials.result/1"


class TrialsError(Exception):
    """A condition that makes running (more) trials meaningless; said to the user, no traceback."""


@dataclass
class Arm:
    name: str
    command: str
    env: dict[str, str] = field(default_factory=dict)


def make_plan(arms: list[Arm], n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    order = []
    for pair in range(n):
        names = [a.name for a in arms]
        rng.shuffle(names)
        for pos, name in enumerate(names):
            order.append({"index": len(order), "pair": pair, "position": pos, "arm": name})
    return order


def load_or_create_plan(out: Path, arms: list[Arm], n: int, seed: int, client: str | None, port: int | None,
                        timeout_s: float) -> dict:
    path = out / "plan.json"
    plan = _json_object(path) if path.exists() else None
    # Secrets in an arm's command or variables are written redacted; the fingerprints (salted per
    # experiment: the salt is in the plan) still tell a resumed run from a different experiment.
    salt = plan.get("salt") if isinstance(plan, dict) and isinstance(plan.get("salt"), str) else redaction.new_salt()
    spec = {"arms": [{"name": a.name, "command": redaction.text(a.command),
                      "command_fingerprint": redaction.fingerprint(a.command, salt), "env": redaction.env(a.env),
                      "env_fingerprints": {k: redaction.fingerprint(v, salt) for k, v in a.env.items()}}
                     for a in arms],
            "n": n, "seed": seed,
            "client": redaction.text(client) if client else client,
            "client_fingerprint": redaction.fingerprint(client, salt), "port": port, "trial_timeout_s": timeout_s}
    if path.exists():
        if plan is None or not isinstance(plan.get("order"), list) or not all(
                isinstance(e, dict) and {"index", "pair", "arm"} <= e.keys() for e in plan["order"]):
            raise TrialsError(f"{path} is cut or not a faultkit trials plan; finished trials are kept in their "
                              f"folders, but the order cannot be resumed from it: use another -o folder")
        if plan.get("spec") != spec:
            raise TrialsError(f"{path} was made for a different experiment (arms, n, seed, client, port or timeout "
                              f"differ); use another -o folder or the same arguments to resume")
        return plan
    private_dir(out)
    plan = {"schema": PLAN_SCHEMA, "spec": spec, "salt": salt, "order": make_plan(arms, n, seed),
            "created": time.time()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(plan, indent=2))
    os.replace(tmp, path)
    return plan


def trial_dir(out: Path, entry: dict) -> Path:
    return out / f"trial-{entry['index']:03d}-{entry['arm']}"


def run_trials(out: Path, arms: list[Arm], n: int, seed: int = 0, client: str | None = None,
               port: int | None = None, timeout_s: float = 2400.0, ready_pattern: str | None = None,
               port_wait_s: float = 30.0, echo=print, metric: str | None = None) -> list[dict]:
    if len({a.name for a in arms}) != len(arms) or len(arms) < 2:
        raise TrialsError("give at least two arms with different names")
    for a in arms:
        if not ARM_NAME.fullmatch(a.name):
            raise TrialsError(f"arm name {a.name!r}: use letters, digits, '_', '-' or '.' (at most 40, not starting "
                              f"with '.'): it names the trial folders")
    port = port or next((p for p in (port_from_command(a.command) for a in arms) if p), None)
    plan = load_or_create_plan(out, arms, n, seed, client, port, timeout_s)
    by_name = {a.name: a for a in arms}
    results = []
    for entry in plan["order"]:
        tdir = trial_dir(out, entry)
        done = tdir / "result.json"
        if done.exists():
            finished = _json_object(done)
            if _valid_result(finished):
                results.append(finished)
                continue
            echo(f"trial {entry['index'] + 1}: {done} is cut or malformed; the trial is run again")
            done.rename(done.with_name("result.json.unreadable"))
        if port is not None:
            _wait_port_free(port, port_wait_s)
        echo(f"trial {entry['index'] + 1}/{len(plan['order'])}: arm {entry['arm']} ...")
        result = run_one(tdir, entry, by_name[entry["arm"]], client, port, timeout_s, ready_pattern, metric)
        figure = f", metric {result['metric']:g}" if result.get("metric") is not None else ""
        echo(f"  -> {'CRASH' if result['crashed'] else 'no crash'} ({result['ended_by']}, "
             f"{result['duration_s']:.1f}s, env {'verified' if result['env']['ok'] else 'MISMATCH'}{figure})")
        results.append(result)
    return results


def _wait_port_free(port: int, wait_s: float) -> None:
    end = time.monotonic() + wait_s
    while port_listening(port):
        if time.monotonic() > end:
            raise TrialsError(f"port {port} is still in use: a server from before (or from another experiment) "
                              f"is listening. A trial would talk to that stale server and silently measure the "
                              f"wrong thing. Stop it and run again (finished trials are kept).")
        time.sleep(0.5)


def run_one(tdir: Path, entry: dict, arm: Arm, client: str | None, port: int | None, timeout_s: float,
            ready_pattern: str | None, metric: str | None = None) -> dict:
    tdir.mkdir(parents=True, exist_ok=True)
    for stale in ("server.log", "server.times.tsv", "client.log", "client.times.tsv", "kernel.log"):
        (tdir / stale).unlink(missing_ok=True)  # a trial interrupted half-way starts over
    env = dict(arm.env)
    env["FAULTKIT_TRIAL_INDEX"] = str(entry["index"])
    token = secrets.token_hex(8)
    env[watchdog.MARKER] = token            # what this trial started, daemons included, is killed after it
    kernel = KmsgFollower(tdir / "kernel.log")  # the trial's own kernel log: GPU faults give the signature
    kernel.start()
    server = Launch(arm.command, tdir, "server", env)
    ready = server.watch_for(ready_pattern) if ready_pattern else None
    server.start()
    sampler = TreeSampler(server.proc.pid)
    client_launch: Launch | None = None
    start = time.monotonic()
    ended_by = None
    sigint = DeferredSigint()
    sigint.__enter__()
    try:
        while ended_by is None:
            sampler.sample()
            if server.poll() is not None:
                ended_by = "server-exit"
            elif server.fault_line:
                time.sleep(0.5)  # let the runtime finish printing its fault report
                ended_by = "fault-line"
            elif client and client_launch is None and _is_ready(ready, port, start):
                client_launch = Launch(client, tdir, "client", {"FAULTKIT_TRIAL_INDEX": str(entry["index"])})
                client_launch.start()
            elif client_launch is not None and client_launch.poll() is not None:
                ended_by = "client-exit"
            else:
                ended_by = ended_by_time_or_interrupt(start, timeout_s, sigint)
    finally:
        sigint.__exit__()
        kernel.stop()
        end = clocks()
        exit_code = server.poll()
        if client_launch is not None:
            client_launch.stop()
        stopped_with = server.stop()
        leftovers = watchdog.kill_marked(token)
        if exit_code is None:
            exit_code = server.poll()
    duration = time.monotonic() - start
    records = sampler.records()
    env_check = verify_env(records, arm.env)    # the arm's own variables, not the bookkeeping ones
    crashed = ended_by == "fault-line" or (ended_by == "server-exit" and exit_code not in (0, None))
    result = {
        "schema": RESULT_SCHEMA, "index": entry["index"], "pair": entry["pair"], "arm": arm.name,
        "command": redaction.text(arm.command), "crashed": crashed, "ended_by": ended_by, "exit": exit_words(exit_code),
        "exit_code": exit_code, "duration_s": duration, "time_to_crash_s": duration if crashed else None,
        "fault_line": redaction.text(server.fault_line or "") or None, "stopped_with": stopped_with, "env": env_check,
        "killed_leftovers": leftovers,
        "signature": crash_signature(tdir, exit_code) if crashed else None,
        "clocks": {"start": server.started, "end": end},
        "metric": metric_from(tdir, metric) if metric else None, "metric_regex": metric,
    }
    (tdir / "environ.json").write_text(json.dumps([r.to_json() for r in records], indent=2))
    if ended_by == "interrupted":
        # not a valid trial: leave no result so that a resumed run repeats it
        raise KeyboardInterrupt
    tmp = tdir / "result.tmp"
    tmp.write_text(json.dumps(result, indent=2))
    os.replace(tmp, tdir / "result.json")
    return result


def _is_ready(ready, port, start) -> bool:
    if ready is not None:
        return ready.is_set()
    if port is not None:
        return port_listening(port)
    return True


def load_results(out: Path) -> tuple[dict | None, list[dict], list[str]]:
    """The plan, the finished trials, and what could not be read (said, never silently dropped)."""
    plan_path = out / "plan.json"
    problems = []
    plan = _json_object(plan_path) if plan_path.exists() else None
    if plan_path.exists() and plan is None:
        problems.append(f"{plan_path}: cut or not JSON; the trials are reported without their plan")
    results = []
    for p in sorted(out.glob("trial-*/result.json")):
        r = _json_object(p)
        if _valid_result(r):
            results.append(r)
        else:
            problems.append(f"{p}: cut or malformed; this trial is left out (run the same `trials run` to repeat it)")
    return plan, results, problems


def _json_object(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _valid_result(r: dict | None) -> bool:
    return isinstance(r, dict) and isinstance(r.get("arm"), str) and isinstance(r.get("crashed"), bool) \
        and isinstance(r.get("index"), int) and isinstance(r.get("duration_s"), (int, float))
