"""What the GPU was running when a core was taken without an exception (a user-triggered dump
of a hung process): the kernels active in each process, with the warp's place in the source."""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Candidate, CoreRecord, DebuggerLog, Verdict


@dataclass
class RunningKernel:
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
            name = row.name.split("(")[0] if row.name else "?"
            where = f"{frame.file}:{frame.line}" if frame and frame.function == name and frame.file else None
            out.append(RunningKernel(core.path, core.pid, name, where, row.grid, str(row.origin)))
    return out


def hang_verdict(running: list[RunningKernel], ended_by: str | None) -> Verdict | None:
    """Only where nothing faulted: the kernels a hung server was running. One kernel across every
    dump of a capture that ended on silence is `likely` the hang; otherwise they are candidates."""
    if not running:
        return None
    names = list(dict.fromkeys(r.kernel for r in running))
    cands = [Candidate(n, 0.6, "running when the user-triggered GPU core dump was taken ("
                       + "; ".join(f"pid {r.pid}" + (f" at {r.where}" if r.where else "") + f", {r.origin}"
                                   for r in running if r.kernel == n) + ")") for n in names]
    ended = {"hang": "the target printed nothing for the --hang-after time",
             "timeout": "the capture reached its --timeout"}.get(ended_by or "", "the dump was taken")
    if len(names) == 1 and ended_by == "hang":
        return Verdict("likely", names[0], f"no GPU exception; {ended}, and every GPU process's core dump shows only "
                                           f"this kernel running: {cands[0].why}", cands)
    return Verdict("candidates", None, f"no GPU exception; {ended}; the GPU core dumps show these kernels running "
                                       f"(a hung server's kernel is among them; a healthy one was just busy)", cands)
