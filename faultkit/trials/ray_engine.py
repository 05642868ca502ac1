"""Trials as Ray tasks: one task a trial, `num_gpus` per trial, on the cluster `ray.init` joins.

A node that sees the experiment folder (a shared file system: the driver leaves a token file there
and the task looks for it) writes the trial's bundle in place; a node that does not runs the trial in
a private temporary folder and ships the bundle back as a tar archive, which the driver unpacks.
Tasks are never retried by Ray itself (`max_retries=0`): a worker or node lost mid-trial is seen by
the driver as the engine's failure, recorded, and rerun or left uncounted by faultkit's own rule.
"""

from __future__ import annotations

import io
import secrets
import shutil
import tarfile
import tempfile
from pathlib import Path

from .records import Plan
from .placement import placement
from .task import TrialTask, run_task

SHARED_TOKEN = ".faultkit-shared"


def available() -> str | None:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed (pip install 'ray>=2'): --on ray needs it where faultkit runs and on every node"
    return None


def shared_token(out: Path) -> str:
    """Written once per driver run: a task that reads the same token at the same path shares the folder."""
    token = secrets.token_hex(8)
    from ..private_files import write_private
    write_private(out / SHARED_TOKEN, token)
    return token


def _run_remote(task: dict, plan_json: dict, token: str) -> tuple[dict, bytes | None]:
    """The task's body on a Ray worker: the trial's result, and its bundle when the folder is not shared."""
    import ray

    ctx = ray.get_runtime_context()
    where = placement("ray", job_id=ctx.get_job_id(), task_id=ctx.get_task_id(), node_id=ctx.get_node_id())
    t = TrialTask(**task)
    plan = Plan.from_json(plan_json)
    try:
        shared = (Path(t.out) / SHARED_TOKEN).read_text() == token
    except OSError:
        shared = False
    if shared:
        return run_task(t, plan, where).to_json(), None
    tmp = Path(tempfile.mkdtemp(prefix="faultkit-trial-"))
    try:
        t.out = str(tmp)
        result = run_task(t, plan, where)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for p in tmp.iterdir():
                tar.add(p, arcname=p.name)
        return result.to_json(), buf.getvalue()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def unpack(out: Path, archive: bytes) -> None:
    """A bundle shipped back from a node that does not share the folder, unpacked into it (only
    plain files and folders, never outside it)."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(out, filter="data")


class RayPool:
    """Submits trials as Ray tasks and hands back each one's outcome as it ends."""

    def __init__(self, address: str | None, gpus_per_trial: float, num_cpus: int | None = None):
        import ray

        self.ray = ray
        if not ray.is_initialized():
            kwargs = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            if address:
                kwargs["address"] = address
            elif num_cpus:
                kwargs["num_cpus"] = num_cpus
            ray.init(**kwargs)
        self.remote = ray.remote(num_cpus=1, num_gpus=gpus_per_trial, max_retries=0)(_run_remote)
        self.pending: dict = {}

    def submit(self, task: TrialTask, plan: Plan, token: str) -> None:
        ref = self.remote.remote(task.__dict__.copy(), plan.to_json(), token)
        self.pending[ref] = task.index

    def wait(self, timeout: float = 1.0):
        """Yields (index, result JSON or None, archive or None, the engine's error or None) as tasks end."""
        if not self.pending:
            return
        done, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=timeout)
        for ref in done:
            index = self.pending.pop(ref)
            try:
                result, archive = self.ray.get(ref)
            except Exception as exc:      # a lost worker or node, a task the cluster could not run: the engine's
                yield index, None, None, _engine_error(exc)
            else:
                yield index, result, archive, None

    def close(self) -> None:
        self.ray.shutdown()


def _engine_error(exc: Exception) -> dict:
    name = type(exc).__name__
    kind = ("worker-died" if "WorkerCrashed" in name or "ActorDied" in name else
            "node-died" if "NodeDied" in name or "ObjectLost" in name else
            "task-error" if "TaskError" in name else "engine-error")
    text = str(exc).strip().splitlines()
    return {"state": kind, "error": name, "detail": (text[-1] if text else "")[:500]}

