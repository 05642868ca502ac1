"""One trial as a unit of work an engine can carry: what to run, and running it on this node.

The local runner, a Slurm array task and a Ray task all run a trial through `run_task`, so a trial
on a cluster has the same guarantees as one on this machine: the port free on the node that runs
it, the arm's variables verified in /proc there, its bundle written, and where it ran recorded in
its result (`placement`). The arms' real commands travel to a task in memory (Ray's object store)
or in the job's environment (Slurm); `plan.json` holds them only redacted, and a task refuses an
arm whose command or variables do not match the plan's fingerprints (another experiment's).
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import redact as redaction
from ..private_files import open_lock
from .records import Plan, PlanEntry, TrialResult
from .runner import Arm, _wait_port_free, run_one, trial_dir

# Where a Slurm task finds the arms' real commands (set in sbatch's environment by the driver).
ARMS_VARIABLE = "FAULTKIT_TRIALS_ARMS"


class TaskError(Exception):
    """A task that cannot run its trial (no plan, an arm that is not the plan's): said, not counted."""


@dataclass
class TrialTask:
    """Everything a node needs to run one trial of a plan (the real commands, unredacted)."""
    out: str
    index: int
    arm: str
    command: str
    env: dict[str, str] = field(default_factory=dict)
    client: str | None = None
    port: int | None = None
    timeout_s: float = 2400.0
    ready_pattern: str | None = None
    metric: str | None = None
    port_wait_s: float = 30.0


@dataclass
class Experiment:
    """The arms and settings shared by every task of one `trials run` (what a Slurm job carries)."""
    arms: dict[str, dict]                 # name -> {"command": ..., "env": {...}}
    client: str | None
    port: int | None
    timeout_s: float
    ready_pattern: str | None
    metric: str | None
    port_wait_s: float = 30.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Experiment":
        try:
            d = json.loads(text)
            return cls(arms={str(k): {"command": str(v["command"]), "env": {str(a): str(b) for a, b in
                                                                             dict(v.get("env") or {}).items()}}
                             for k, v in dict(d["arms"]).items()},
                       client=d.get("client"), port=d.get("port"), timeout_s=float(d["timeout_s"]),
                       ready_pattern=d.get("ready_pattern"), metric=d.get("metric"),
                       port_wait_s=float(d.get("port_wait_s", 30.0)))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise TaskError(f"${ARMS_VARIABLE} is not a faultkit experiment ({exc})") from None

    def task(self, out: Path, entry: PlanEntry) -> TrialTask:
        arm = self.arms.get(entry.arm)
        if arm is None:
            raise TaskError(f"trial {entry.index}: arm {entry.arm!r} is not one of this job's arms")
        return TrialTask(out=str(out), index=entry.index, arm=entry.arm, command=arm["command"], env=arm["env"],
                         client=self.client, port=self.port, timeout_s=self.timeout_s,
                         ready_pattern=self.ready_pattern, metric=self.metric, port_wait_s=self.port_wait_s)


def check_against_plan(plan: Plan, task: TrialTask) -> PlanEntry:
    """The plan's entry for this task, refusing a task whose arm is not the plan's (a resubmitted
    job of another experiment writing into this folder)."""
    entry = next((e for e in plan.order if e.index == task.index), None)
    if entry is None or entry.arm != task.arm:
        raise TaskError(f"trial {task.index}: not in the plan of {task.out} as arm {task.arm!r}")
    spec = next(a for a in plan.spec.arms if a.name == task.arm)
    salt = plan.salt or ""
    if spec.command_fingerprint and redaction.fingerprint(task.command, salt) != spec.command_fingerprint:
        raise TaskError(f"trial {task.index}: arm {task.arm}'s command differs from the plan's")
    for k, v in task.env.items():
        fp = spec.env_fingerprints.get(k)
        if fp and redaction.fingerprint(v, salt) != fp:
            raise TaskError(f"trial {task.index}: arm {task.arm}'s variable {k} differs from the plan's")
    return entry


class _NodePortLock:
    """Trials of one experiment on one node take its port in turn: two tasks an engine placed side by
    side would otherwise meet each other's server (each would see the port in use, or worse, talk to
    the other's). The lock is per node, port and user, so it also holds across one user's experiments;
    another user's server on the port is what the port check before each trial refuses (a lock file of
    one user's, 0600, cannot be opened by another)."""

    def __init__(self, port: int | None):
        self.path = Path(f"/tmp/faultkit-trials-port-{port}-uid{os.getuid()}.lock") if port else None
        self.fh = None

    def __enter__(self):
        if self.path is not None:
            self.fh = open_lock(self.path)
            fcntl.flock(self.fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fh is not None:
            fcntl.flock(self.fh, fcntl.LOCK_UN)
            self.fh.close()


def run_task(task: TrialTask, plan: Plan, where: dict) -> TrialResult:
    """Run one trial here, as the local runner does, and record where it ran. A signal that ends
    the task (scancel, pre-emption) raises KeyboardInterrupt and leaves no result (run_one)."""

    entry = check_against_plan(plan, task)
    tdir = trial_dir(Path(task.out), entry)
    with _NodePortLock(task.port):
        if task.port is not None:
            _wait_port_free(task.port, task.port_wait_s)
        result = run_one(tdir, entry, Arm(task.arm, task.command, dict(task.env)), task.client, task.port,
                         task.timeout_s, task.ready_pattern, task.metric, placement=where)
    return result
