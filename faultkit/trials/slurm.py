"""Trials as a Slurm job array: one array task a trial, submitted with `sbatch`, watched with
`scontrol`.

Why sbatch and not submitit: submitit pickles a Python callable into the shared folder and needs
itself installed on every node; an array task that runs `python -m faultkit.cli trials task` needs
only faultkit where the trial runs, is what a Slurm user reads in `squeue`, and its state is
Slurm's own (`scontrol show job`), so a cancelled, pre-empted or node-failed task is seen as such.

The experiment folder must be on a file system every node sees (the bundles are written there);
the arms' real commands reach the tasks in the job's environment (sbatch exports it), never in a file.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .task import ARMS_VARIABLE, Experiment

# Slurm's job states (squeue(1) "JOB STATE CODES"): those after which a task runs no more, and
# among them the ones that are the engine's doing, not the trial's: such a trial is rerun (up to
# the retries) or left uncounted, never counted as a crash or a survival.
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
RERUN = {"NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "REVOKED"}   # not the trial's fault: run it again
# Pending tasks of an array are shown as one record with a range ("ArrayTaskId=3-5,7%2").
_TASK = re.compile(r"\bArrayTaskId=([\d,\-]+)(?:%\d+)?\s.*?\bJobState=([A-Z_]+)")


class SlurmError(Exception):
    """Slurm refused or is not there: said to the user with what it printed."""


def available() -> str | None:
    """None when sbatch and scontrol are on PATH, else why not."""
    missing = [c for c in ("sbatch", "scontrol") if shutil.which(c) is None]
    return f"{' and '.join(missing)} not found: --on slurm needs Slurm's client commands" if missing else None


def submit(out: Path, indices: list[int], experiment: Experiment, gpus_per_trial: int = 0,
           sbatch_args: list[str] | None = None) -> str:
    """Submit one array task per trial index; returns the array job id."""
    why = available()
    if why:
        raise SlurmError(why)
    task = (f"exec {shlex.quote(sys.executable)} -m faultkit.cli trials task {shlex.quote(str(out.resolve()))} "
            f"--index \"$SLURM_ARRAY_TASK_ID\" --engine slurm")
    cmd = ["sbatch", "--parsable", f"--array={','.join(map(str, sorted(indices)))}", "--job-name=faultkit-trials",
           f"--output={out.resolve()}/slurm-%A_%a.out", f"--chdir={out.resolve()}", "--ntasks=1"]
    if gpus_per_trial:
        cmd.append(f"--gpus-per-task={gpus_per_trial}")
    cmd += list(sbatch_args or []) + ["--wrap", task]
    env = dict(os.environ, **{ARMS_VARIABLE: experiment.to_json()})
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"sbatch could not be run ({exc})") from None
    if res.returncode != 0:
        raise SlurmError(f"sbatch refused the array: {res.stderr.strip() or res.stdout.strip()}")
    job = res.stdout.strip().split(";")[0]
    if not job.isdigit():
        raise SlurmError(f"sbatch printed no job id: {res.stdout.strip()!r}")
    return job


def states(job: str) -> dict[int, str]:
    """Each array task's state, by trial index (tasks Slurm has forgotten are absent)."""
    try:
        res = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out = {}
    for line in res.stdout.splitlines():
        m = _TASK.search(line)
        if m:
            for index in _indices(m.group(1)):
                out[index] = m.group(2)
    return out


def _indices(spec: str) -> list[int]:
    got = []
    for part in filter(None, spec.split(",")):
        lo, _, hi = part.partition("-")
        got.extend(range(int(lo), int(hi or lo) + 1))
    return got


def cancel(job: str) -> None:
    subprocess.run(["scancel", job], capture_output=True, timeout=60)
