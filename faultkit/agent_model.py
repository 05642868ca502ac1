"""Records of the in-process agent's files (parsed by ingest/agent_files.py, joined by
analyze/allocation_owner.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import Problem


@dataclass
class AllocEvent:
    """One allocator event from the agent's ring: what the owner of a fault address is read from."""
    seq: int
    kind: str                # alloc | free_requested | free_completed | segment_alloc | segment_free | segment_map | ...
    t_ns: int                # CLOCK_BOOTTIME ns (from the ring's clock anchors; CLOCK_MONOTONIC where it has none)
    address: int
    size: int
    stream: int
    device: int
    site: int                # 0: no Python frame
    tid: int
    extra: int = 0           # a poison record: the byte the block was filled with


@dataclass
class Site:
    """A call site the agent recorded once and events refer to by id (the code that allocated)."""
    id: int
    where: str               # the first frame outside torch: file:line function ("-" if none)
    inner: str               # the innermost Python frame


@dataclass
class ThreadStack:
    """One thread of a faulthandler dump, innermost frame first."""
    thread: str              # faulthandler's thread id (0x...)
    current: bool            # the thread that received the signal
    frames: list[str] = field(default_factory=list)    # innermost first: file:line function


@dataclass
class StackDump:
    """A faulthandler dump the agent kept: every thread's Python stack at an abort or on request."""
    fatal: str | None        # "Fatal Python error: Aborted", None for a dump asked for (SIGUSR2)
    threads: list[ThreadStack]
    origin: str              # file:line of its first line


@dataclass
class AgentProcess:
    """One process's black box: its header, allocator events, call sites and stack dumps."""
    pid: int
    header: dict = field(default_factory=dict)
    events: list[AllocEvent] = field(default_factory=list)
    sites: dict[int, Site] = field(default_factory=dict)
    dumps: list[StackDump] = field(default_factory=list)
    ring: dict | None = None       # capacity, producer, first_seq, last_seq, torn, wrapped, file
    files: list[str] = field(default_factory=list)

    @property
    def blocks(self) -> bool:
        return bool(self.ring and "blocks" in str(self.ring.get("producer")))


@dataclass
class AgentLog:
    """Everything the in-process agent's files say, per process, and what could not be read."""
    processes: dict[int, AgentProcess] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
