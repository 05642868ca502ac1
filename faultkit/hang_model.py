"""The records of a hang: host stacks of live processes (py-spy, gdb, faulthandler) and each
rank's collectives (PyTorch's flight recorder, its watchdog lines).

A model-layer module: the parsers (ingest/stacks.py, ingest/flight_recorder.py) build these
records, the collector (capture/stacks.py) adds what /proc says about each thread, and the
analyses (analyze/waits.py, analyze/hang.py, analyze/collectives.py) read them. Frames are
innermost first, as every tool prints them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class StackFrame:
    """One frame of a thread's stack, Python or native."""
    function: str | None
    file: str | None = None
    line: int | None = None
    library: str | None = None       # the shared object a native frame is in (libc.so.6, libamdhip64.so)
    native: bool = False             # a C/C++ frame; False: a Python frame
    code: str | None = None          # the source line, where the dump's reader could read it (ingest/source_lines.py)

    @property
    def where(self) -> str:
        """`file:line function`, the way a user looks it up."""
        place = f"{self.file}:{self.line}" if self.file and self.line else (self.file or self.library or "?")
        return f"{place} {self.function or '??'}"


@dataclass
class ThreadStack:
    """One thread's stack, innermost frame first, with its scheduler state where known."""
    tid: int | None                  # the OS thread id (LWP)
    name: str | None = None
    frames: list[StackFrame] = field(default_factory=list)     # innermost first
    active: bool | None = None       # py-spy: on a CPU, not idle; None where the tool does not say
    state: str | None = None         # the kernel's scheduler state from /proc (R running, S sleeping, D disk)
    cpu_ticks: int | None = None     # utime+stime from /proc, in clock ticks: a spinning wait burns them


@dataclass
class ProcessStacks:
    """Every thread's stack of one process as a stack tool (py-spy, gdb, faulthandler) took it."""
    pid: int
    source: str                      # py-spy | py-spy --native | gdb | faulthandler
    threads: list[ThreadStack] = field(default_factory=list)
    taken_at: float | None = None    # wall-clock time of the sample
    command: str | None = None
    rank: int | None = None          # the distributed rank its launcher gave it (RANK), where set
    ppid: int | None = None
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "ProcessStacks":
        """Back from `to_json`; a value of the wrong type (a damaged or foreign file) is dropped."""
        def frame(f: dict) -> StackFrame:
            return StackFrame(_t(f.get("function"), str), _t(f.get("file"), str), _t(f.get("line"), int),
                              _t(f.get("library"), str), f.get("native") is True, _t(f.get("code"), str))

        threads = [ThreadStack(_t(t.get("tid"), int), _t(t.get("name"), str), [frame(f) for f in _list(t.get("frames"))
                                                                             if isinstance(f, dict)],
                               _t(t.get("active"), bool), _t(t.get("state"), str), _t(t.get("cpu_ticks"), int))
                   for t in _list(d.get("threads")) if isinstance(t, dict)]
        return cls(_t(d.get("pid"), int) or 0, _t(d.get("source"), str) or "?", threads, _t(d.get("taken_at"), float),
                   _t(d.get("command"), str), _t(d.get("rank"), int), _t(d.get("ppid"), int),
                   [str(p) for p in _list(d.get("problems"))])


def _t(v, kind):
    if kind is float:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    return v if isinstance(v, kind) and (kind is bool or not isinstance(v, bool)) else None


def _list(v) -> list:
    return v if isinstance(v, list) else []


@dataclass(frozen=True)
class CollectiveEntry:
    """One collective a rank issued, as its flight recorder (or watchdog) saw it."""
    pg: str                          # the process group (its id, or name)
    seq: int                         # collective_seq_id (p2p_seq_id for a p2p op): the same op on every rank
    op: str                          # profiling_name: nccl:all_reduce, gloo:all_reduce ...
    state: str                       # scheduled (enqueued, not begun on the device) | started | completed
    p2p: bool = False
    # what a watchdog's timeout line states of the collective (WorkNCCL(..., NumelIn=, NumelOut=, Timeout(ms)=)
    # ran for M milliseconds); None where the record does not say
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None


@dataclass(frozen=True)
class WatchdogWords:
    """What one rank's watchdog printed beside its timeout (ProcessGroupNCCL.cpp): how far its
    process group got, whether it asked for a flight-recorder dump and from whom, and the Python
    call that issued the collective (its flight recorder's stack, where one was kept)."""
    origin: str                      # file:line of the timeout line
    pid: int | None = None           # a launcher's worker tag (`(RayWorkerWrapper pid=4009)`), where the line kept it
    process_group: str | None = None    # `[PG ID 0 PG GUID 0(default_pg) Rank 3]`: its name, else its id
    last_enqueued: int | None = None
    last_completed: int | None = None
    dump_from: str | None = None     # `this local rank` | `rank N`: whose timeout signalled the dump
    recorder_off: bool = False       # `Stack trace of the failed collective not found ... FlightRecorder is disabled`
    call: list[StackFrame] = field(default_factory=list)     # `Stack trace of the failed collective:`, innermost first


@dataclass
class RankCollectives:
    """One rank's collectives from its flight recorder dump or watchdog line."""
    rank: int | None
    source: str                      # the dump file, or the log the watchdog line came from
    entries: list[CollectiveEntry] = field(default_factory=list)
    version: str | None = None
    timed_out: bool = False          # a watchdog line: the rank's watchdog gave up on its last entry
    watchdog: WatchdogWords | None = None   # the rest of what its watchdog printed (watchdog lines only)
    problems: list[str] = field(default_factory=list)
    internal: list[str] = field(default_factory=list)   # the reader's own bugs, caught (tests assert there is none)
