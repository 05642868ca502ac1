"""`trials run --on slurm|ray`: the same plan, each trial a task of the cluster's engine.

The plan (arms, seed, order within pairs) is made here, once, exactly as for a local run, so the
same seed gives the same trials wherever they run. Each trial runs through `task.run_task` on its
node. What the engine does to a task is recorded beside the trial (`engine.json` in its folder):
a task that ended without a result (cancelled, pre-empted, its node or worker lost) is rerun up to
`retries` times where it was not the user's doing (a cancel is), and otherwise left unrun, so it is
never counted as a crash or a survival, and the same command resumes it later. Finished trials are
never resubmitted; trials still queued or running from an earlier submission are waited on, not
submitted twice.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..private_files import private_dir, write_private
from .records import RecordError, TrialResult
from .runner import (RESULT, Arm, TrialsError, check_arms, load_or_create_plan, outcome_line, read_result,
                     trial_dir)
from .task import Experiment

ENGINES = ("local", "slurm", "ray")
ENGINE_STATE = "engine.json"          # the experiment folder's submissions (engine, job ids, indices)
ENGINE_RECORD = "engine.json"         # in a trial folder: what the engine did to its last task


def run_on(engine: str, out: Path, arms: list[Arm], n: int, seed: int = 0, client: str | None = None,
           port: int | None = None, timeout_s: float = 2400.0, ready_pattern: str | None = None,
           port_wait_s: float = 30.0, echo=print, warn=None, metric: str | None = None, gpus_per_trial: float = 0,
           engine_args: list[str] | None = None, retries: int = 1, wait: bool = True,
           ray_address: str | None = None, poll_s: float = 1.0, alternative: str | None = None) -> list[TrialResult]:
    warn = warn or echo
    port = check_arms(arms, port)
    plan = load_or_create_plan(out, arms, n, seed, client, port, timeout_s, alternative)
    experiment = Experiment(arms={a.name: {"command": a.command, "env": dict(a.env)} for a in arms}, client=client,
                            port=port, timeout_s=timeout_s, ready_pattern=ready_pattern, metric=metric,
                            port_wait_s=port_wait_s)
    done = {r.index for r in _finished(out, plan)}
    todo = [e for e in plan.order if e.index not in done]
    if not todo:
        return _finished(out, plan)
    runner = (_Slurm(out, plan, experiment, gpus_per_trial, engine_args) if engine == "slurm" else
              _Ray(out, plan, experiment, gpus_per_trial, ray_address))
    attempts: dict[int, int] = {}
    try:
        in_flight = runner.resume_in_flight()
        fresh = [e.index for e in todo if e.index not in in_flight]
        if in_flight:
            echo(f"waiting for {len(in_flight)} trial(s) still queued or running on {engine} from before")
        if fresh:
            runner.submit(fresh)
            echo(f"submitted {len(fresh)} trial(s) to {engine}" + (f" (job {runner.job})" if runner.job else ""))
        if not wait:
            echo(f"not waiting: `faultkit trials report {out}` reports what has finished so far")
            return _finished(out, plan)
        while True:
            ended = runner.ended(poll_s)
            for index, state, detail in ended:
                entry = plan.order[index] if index < len(plan.order) else None
                tdir = trial_dir(out, entry)
                result = _read(tdir)
                if result is not None:
                    (echo if result.counted else warn)(f"trial {index + 1}/{len(plan.order)} ({entry.arm}, "
                                                       f"{result.placement.get('node', '?')}): {outcome_line(result)}")
                    continue
                attempts[index] = attempts.get(index, 0) + 1
                rerun = runner.rerunnable(state) and attempts[index] <= retries
                _record(tdir, engine, runner.job, state, detail, attempts[index], rerun)
                warn(f"warning: trial {index + 1} ({entry.arm}): {engine} ended its task without a result ({state}"
                     + (f": {detail}" if detail else "") + "); " +
                     ("run again" if rerun else "not counted; the same `trials run` runs it again later"))
                if rerun:
                    runner.submit([index])
            if runner.idle():
                break
    except KeyboardInterrupt:
        runner.interrupt()
        raise
    finally:
        runner.close()
    return _finished(out, plan)


def _finished(out: Path, plan) -> list[TrialResult]:
    got = []
    for e in plan.order:
        r = _read(trial_dir(out, e))
        if r is not None and r.counted:
            got.append(r)
    return got


def _read(tdir: Path) -> TrialResult | None:
    try:
        return read_result(tdir / RESULT) if (tdir / RESULT).exists() else None
    except RecordError:
        return None


def _record(tdir: Path, engine: str, job: str | None, state: str, detail: str, attempt: int, rerun: bool) -> None:
    private_dir(tdir)
    write_private(tdir / ENGINE_RECORD, json.dumps({"engine": engine, "job_id": job, "state": state,
                                                     "detail": detail, "attempt": attempt, "rerun": rerun,
                                                     "time": time.time()}, indent=2))


def engine_state(out: Path) -> dict:
    """The experiment's submissions, as `trials report` shows them ({} for a local experiment)."""
    try:
        d = json.loads((out / ENGINE_STATE).read_text())
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def in_flight(out: Path) -> dict[int, str]:
    """Trials an engine still has queued or running (by index, their state), for a partial report."""
    state = engine_state(out)
    if state.get("engine") != "slurm":
        return {}
    from . import slurm
    got: dict[int, str] = {}
    for job in state.get("jobs", []):
        got.update({i: s for i, s in slurm.states(str(job)).items() if s not in slurm.FINAL})
    return got


class _Slurm:
    def __init__(self, out: Path, plan, experiment: Experiment, gpus: float, args: list[str] | None):
        from . import slurm
        self.slurm, self.out, self.experiment, self.gpus, self.args = slurm, out, experiment, gpus, args or []
        self.plan = plan
        self.job: str | None = None
        state = engine_state(out)
        self.jobs: list[str] = [str(j) for j in state.get("jobs", [])]
        self.submitted: dict[str, list[int]] = {str(k): v for k, v in (state.get("indices") or {}).items()}
        self.watching: dict[int, str] = {}          # index -> job id

    def _done(self, index: int) -> bool:
        return _read(trial_dir(self.out, self.plan.order[index])) is not None

    def resume_in_flight(self) -> set[int]:
        """Trials of earlier submissions that Slurm still has queued or running. A task missing from
        `scontrol`'s answer while its job is still known is taken as still out (Slurm splits a pending
        array into tasks as it starts them), never resubmitted."""
        for job in self.jobs:
            states = self.slurm.states(job)
            if not states:
                continue
            for index in self.submitted.get(job, list(states)):
                if states.get(index) not in self.slurm.FINAL and not self._done(index):
                    self.watching[index] = job
        return set(self.watching)

    def submit(self, indices: list[int]) -> None:
        try:
            self.job = self.slurm.submit(self.out, indices, self.experiment, int(self.gpus), self.args)
        except self.slurm.SlurmError as exc:
            raise TrialsError(str(exc)) from None
        self.jobs.append(self.job)
        self.submitted[self.job] = sorted(indices)
        write_private(self.out / ENGINE_STATE, json.dumps({"engine": "slurm", "jobs": self.jobs,
                                                            "indices": self.submitted}, indent=2))
        self.watching.update({i: self.job for i in indices})

    def ended(self, poll_s: float):
        time.sleep(poll_s)
        got = []
        by_job: dict[str, dict[int, str]] = {}
        for index, job in list(self.watching.items()):
            if job not in by_job:
                by_job[job] = self.slurm.states(job)
            state = by_job[job].get(index)
            if state in self.slurm.FINAL:
                del self.watching[index]
                got.append((index, state, _tail(self.out / f"slurm-{job}_{index}.out")))
            elif state is None and not by_job[job]:      # Slurm forgot the whole job (MinJobAge passed)
                del self.watching[index]
                got.append((index, "COMPLETED" if self._done(index) else "FORGOTTEN",
                            "Slurm no longer knows the job"))
        return got

    def rerunnable(self, state: str) -> bool:
        return state in self.slurm.RERUN

    def idle(self) -> bool:
        return not self.watching

    def interrupt(self) -> None:
        for job in {*self.watching.values()}:
            self.slurm.cancel(job)

    def close(self) -> None:
        pass


def _tail(path: Path, limit: int = 300) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


class _Ray:
    job = None

    def __init__(self, out: Path, plan, experiment: Experiment, gpus: float, address: str | None):
        from . import ray_engine
        why = ray_engine.available()
        if why:
            raise TrialsError(why)
        self.ray_engine, self.out, self.plan, self.experiment = ray_engine, out, plan, experiment
        self.pool = ray_engine.RayPool(address, gpus)
        self.token = ray_engine.shared_token(out)
        write_private(out / ENGINE_STATE, json.dumps({"engine": "ray", "address": address or "local"}, indent=2))
        self._ended: list = []

    def resume_in_flight(self) -> set[int]:
        return set()                  # a Ray task does not outlive its driver

    def submit(self, indices: list[int]) -> None:
        for i in indices:
            self.pool.submit(self.experiment.task(self.out, self.plan.order[i]), self.plan, self.token)

    def ended(self, poll_s: float):
        got = []
        for index, result, archive, error in self.pool.wait(poll_s):
            if archive is not None:          # the trial's folder, made on a node that does not share ours
                self.ray_engine.unpack(self.out, archive)
            if error is not None:
                got.append((index, error["state"], f"{error['error']}: {error['detail']}"))
            else:
                got.append((index, "FINISHED", ""))
        return got

    def rerunnable(self, state: str) -> bool:
        return state in ("worker-died", "node-died")

    def idle(self) -> bool:
        return not self.pool.pending

    def interrupt(self) -> None:
        pass

    def close(self) -> None:
        self.pool.close()
