"""Which launcher started a process, and its place in the job: read from the variables each launcher
sets. One table, read by capture (the `-o` patterns, the manifest's `launch` record) and by the
readers of bundles (the registry's job id, the triage of one job's bundles).

Sources: Slurm's srun (SLURM_JOB_ID, SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_NTASKS);
torchrun / torch.distributed.elastic (TORCHELASTIC_RUN_ID, RANK, LOCAL_RANK, GROUP_RANK, WORLD_SIZE);
Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _NODE_RANK, _SIZE); MPICH/Intel MPI's Hydra
(PMI_RANK, MPI_LOCALRANKID, PMI_SIZE); Kubernetes' LeaderWorkerSet (LWS_WORKER_INDEX, LWS_GROUP_SIZE,
LWS_LEADER_ADDRESS: one pod per node, so the worker index is the node's rank); Ray (RAY_JOB_ID; its
workers get no rank of their own).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

# launcher, job id, global rank, local rank, node rank, world size (None: the launcher sets none)
LAUNCHERS: tuple[tuple[str, str | None, str | None, str | None, str | None, str | None], ...] = (
    ("slurm", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS"),
    ("torchrun", "TORCHELASTIC_RUN_ID", "RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE"),
    ("openmpi", None, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_NODE_RANK",
     "OMPI_COMM_WORLD_SIZE"),
    ("hydra", None, "PMI_RANK", "MPI_LOCALRANKID", None, "PMI_SIZE"),
    ("kubernetes-lws", "LWS_LEADER_ADDRESS", "LWS_WORKER_INDEX", None, "LWS_WORKER_INDEX", "LWS_GROUP_SIZE"),
    ("ray", "RAY_JOB_ID", None, None, None, None),
)
NODE_RANK = "NODE_RANK"            # torchrun's --node-rank and many servers' own convention


@dataclass(frozen=True)
class Launch:
    """Which launcher started a process, and the job, rank and node it says it is (from its environment)."""
    launcher: str | None = None
    job: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    node_rank: int | None = None
    world_size: int | None = None
    host: str | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data) -> "Launch":
        if not isinstance(data, dict):
            return cls()
        ok = lambda k, t: data.get(k) if isinstance(data.get(k), t) and not isinstance(data.get(k), bool) else None  # noqa: E731
        return cls(ok("launcher", str), ok("job", str), ok("rank", int), ok("local_rank", int), ok("node_rank", int),
                   ok("world_size", int), ok("host", str))


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def launch_of(env: dict[str, str], host: str | None = None) -> Launch:
    """The first launcher whose rank or job variable is set."""
    for name, job, rank, local, node, size in LAUNCHERS:
        if any(v and env.get(v) for v in (job, rank)):
            node_rank = _int(env.get(node)) if node else None
            return Launch(name, env.get(job) if job else None, _int(env.get(rank)) if rank else None,
                          _int(env.get(local)) if local else None,
                          node_rank if node_rank is not None else _int(env.get(NODE_RANK)),
                          _int(env.get(size)) if size else None, host)
    return Launch(None, None, None, None, _int(env.get(NODE_RANK)), None, host)


class PatternError(ValueError):
    """An output pattern asks for what the environment does not give."""


_TOKEN = re.compile(r"%(.)")


def path_part(value: str) -> str:
    """A value from the environment as one folder name: what the pattern's author wrote decides where
    the bundle goes, never the value (a host name `../../x`, a job id `..`): no separator, and no
    name made of dots only."""
    part = re.sub(r"[^A-Za-z0-9._-]", "_", value)[:128]
    return part if part.strip(".") else part.replace(".", "_") or "_"


def expand(pattern: str, launch: Launch, pid: int) -> str:
    """`-o` patterns: %h host, %p pid, %r rank (the node rank where the launcher gives one per node, else
    the global rank), %j job id, %% a percent sign. A pattern with %r or %j under no launcher is refused."""
    def sub(m: re.Match) -> str:
        c = m.group(1)
        if c == "%":
            return "%"
        if c == "h":
            return path_part(launch.host or "unknown-host")
        if c == "p":
            return str(pid)
        if c == "r":
            r = launch.rank if launch.rank is not None else launch.node_rank
            if r is None:
                raise PatternError("%r: no launcher's rank variable is set (SLURM_PROCID, RANK, OMPI_COMM_WORLD_RANK, "
                                   "PMI_RANK, LWS_WORKER_INDEX, NODE_RANK)")
            return str(r)
        if c == "j":
            if not launch.job:
                raise PatternError("%j: no launcher's job id is set (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, RAY_JOB_ID, ...)")
            return path_part(launch.job)
        raise PatternError(f"%{c}: unknown in an output pattern (use %h, %p, %r, %j or %%)")
    return _TOKEN.sub(sub, pattern)
