"""What the GPU cores say without an exception: the kernels active in each process when a
user-triggered dump of a hung process was taken (with the warp's place in the source), and cores
no debugger opened here (a runtime saw a GPU exception, even where nothing else says so)."""

from __future__ import annotations

from dataclasses import dataclass

from ..judge.claims import Basis, Claim, Identities
from ..judge.names import kernel_name
from ..model import CoreRecord, DebuggerLog


@dataclass
class RunningKernel:
    """A kernel a GPU core dump shows running, with the focused warp's place."""
    core: str
    pid: int | None
    kernel: str
    where: str | None          # file:line of the focused warp's frame
    grid: int | None
    origin: str

    def to_json(self) -> dict:
        return {"core": self.core, "pid": self.pid, "kernel": self.kernel, "where": self.where, "grid": self.grid,
                "origin": self.origin}


def running_kernels(cores: list[tuple[CoreRecord, DebuggerLog]]) -> list[RunningKernel]:
    out = []
    for core, log in cores:
        if log.stops:
            continue                       # an exception stop: the fault, not a snapshot
        frame = next((f for f in log.backtrace if f.launch and f.function), None)
        for row in log.cuda_kernels:
            if row.status and row.status.lower() != "active":
                continue
            name = kernel_name(row.name) if row.name else "?"
            where = f"{frame.file}:{frame.line}" if frame and frame.function == name and frame.file else None
            out.append(RunningKernel(core.path, core.pid, name, where, row.grid, str(row.origin)))
    return out


def running_claims(running: list[RunningKernel]) -> list[Claim]:
    """One claim per kernel running at the dumps (a snapshot: the judge weighs it by how the capture
    ended and whether another kernel was running)."""
    names = list(dict.fromkeys(r.kernel for r in running))
    return [Claim(n, Basis("running-at-dump", "GPU core dump"),
                  "running when the user-triggered GPU core dump was taken ("
                  + "; ".join(f"pid {r.pid}" + (f" at {r.where}" if r.where else "") + f", {r.origin}"
                              for r in running if r.kernel == n) + ")",
                  Identities(pid=next(r.pid for r in running if r.kernel == n)),
                  next(r.origin for r in running if r.kernel == n)) for n in names]


def core_claims(cores: list[CoreRecord]) -> list[Claim]:
    """GPU cores on disk that no debugger opened: no kernel, but a GPU exception happened."""
    unopened = [c for c in cores if c.platform in ("cuda", "rocm-gpu", "rocm-unified") and not c.analysed_with]
    if not unopened:
        return []
    return [Claim(None, Basis("unopened-core", unopened[0].platform),
                  f"{len(unopened)} GPU core dump(s) among the inputs ({unopened[0].path}) hold the excepting wave "
                  f"or warp, but no debugger opened them here; see the next steps for the command",
                  origin=unopened[0].path)]
