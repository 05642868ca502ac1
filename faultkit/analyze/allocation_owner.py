"""Whose memory the fault address was: the agent's allocation map of the faulting process, joined with
the address the evidence gives (a GPU core's focused-lane operand, ROCm's `on address`, a kernel-log
page), and every thread's Python stack at the abort.

The map is PyTorch's caching allocator seen from inside: segments (device memory reserved from and
released to the driver) always, blocks (tensors) with --alloc-history. An address is
- inside a live block (which, how far in) or, at segment level, a live segment;
- inside a freed block whose segment the allocator kept (cached: the memory is still mapped), or a
  segment released to the driver (use after free, and how long before the fault);
- just past the end of a live block or segment (by how many bytes);
- in no allocation of this process (since the map began).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..agent_model import AgentLog, AgentProcess, StackDump
from ..model import Fault
from . import poison_address
from .placement import FREED, LIVE, NONE, PAST_END, past_end

if TYPE_CHECKING:
    from .debug_stop import Operand

PAGE = 4096
# No mapping of a Linux process lies below vm.mmap_min_addr (64 KiB by default), CUDA's and ROCm's
# device memory included (it is mapped into the process's address space): an operand below it is a
# value in a register, not where the memory access went. Above it any value may be an address (host
# memory the GPU reaches through UVA, a wild pointer such as 0xdead0000000): only said to be low.
LOWEST_MAPPING = 64 << 10
NOT_AN_ADDRESS = "not-an-address"     # the verdict on such an operand: it names no owner and makes no claim
OPEN = ("alloc", "segment_alloc", "segment_map")
SEGMENT_CLOSE = ("segment_free", "segment_unmap")


@dataclass
class Interval:
    """One allocation (a block or a segment) alive over a time span: the unit an address is looked up in."""
    level: str                    # block | segment
    base: int
    size: int
    allocated_ns: int
    stream: int
    alloc_site: int
    freed_ns: int | None = None   # block: free requested; segment: released to the driver
    free_site: int = 0
    free_completed_ns: int | None = None
    released_ns: int | None = None  # a block: when the segment holding it went back to the driver

    @property
    def end(self) -> int:
        return self.base + self.size

    def live(self, at: int | None) -> bool:
        return (at is None or self.allocated_ns <= at) and (self.freed_ns is None or (at is not None and self.freed_ns > at))

    def freed_by(self, at: int | None) -> bool:
        return self.freed_ns is not None and (at is None or self.freed_ns <= at)


def intervals(p: AgentProcess) -> list[Interval]:
    out: list[Interval] = []
    open_seg: dict[int, Interval] = {}
    open_blk: dict[int, Interval] = {}
    requested: dict[int, Interval] = {}
    for e in sorted(p.events, key=lambda x: x.seq):
        if e.kind in OPEN:
            iv = Interval("block" if e.kind == "alloc" else "segment", e.address, e.size, e.t_ns, e.stream, e.site)
            (open_blk if e.kind == "alloc" else open_seg)[e.address] = iv
            out.append(iv)
        elif e.kind == "free_requested":
            iv = open_blk.pop(e.address, None)
            if iv is not None:
                iv.freed_ns, iv.free_site = e.t_ns, e.site
                requested[e.address] = iv
        elif e.kind == "free_completed":
            iv = requested.pop(e.address, None)
            if iv is not None:
                iv.free_completed_ns = e.t_ns
        elif e.kind in SEGMENT_CLOSE:
            iv = open_seg.pop(e.address, None)
            if iv is not None:
                iv.freed_ns, iv.free_site = e.t_ns, e.site
            for b in out:
                if b.level == "block" and b.released_ns is None and b.freed_ns is not None and \
                        e.address <= b.base < e.address + e.size:
                    b.released_ns = e.t_ns
    return out


@dataclass
class AllocationOwner:
    """Whose memory a fault address was in (live, freed, past the end, none), in words for the report."""
    pid: int
    address: int
    verdict: str                   # live | freed | past-end | none | no-map
    text: str
    address_basis: str
    level: str | None = None       # block | segment
    base: int | None = None
    size: int | None = None
    offset: int | None = None      # from the base (inside) or past the end (past-end)
    stream: int | None = None
    allocated_at: str | None = None
    freed_at: str | None = None
    freed_ms_before: float | None = None
    released: bool | None = None   # the memory went back to the driver (else the allocator kept it)
    notes: list[str] = field(default_factory=list)
    # why the address may not be where the fault was (one lane's register value below every allocation):
    # then the owner is shown and makes no claim (sources/agent.py), so it is never the decisive finding
    doubt: str | None = None

    def to_json(self) -> dict:
        return {"pid": self.pid, "address": f"0x{self.address:x}", "verdict": self.verdict, "text": self.text,
                "address_doubt": self.doubt,
                "address_basis": self.address_basis, "level": self.level,
                "base": f"0x{self.base:x}" if self.base is not None else None, "size": self.size,
                "offset": self.offset, "stream": f"0x{self.stream:x}" if self.stream is not None else None,
                "allocated_at": self.allocated_at, "freed_at": self.freed_at,
                "freed_ms_before_fault": self.freed_ms_before, "released_to_driver": self.released, "notes": self.notes}


@dataclass
class ThreadView:
    """One thread's stack as the report shows it, with why it is the one to look at."""
    thread: str
    frames: list[str]
    mark: str | None               # why this thread is the one to look at, where one is

    def to_json(self) -> dict:
        return {"thread": self.thread, "mark": self.mark, "frames": self.frames}


@dataclass
class BlackBox:
    """What the black box adds to an incident: the address's owners and the threads at the abort."""
    owners: list[AllocationOwner] = field(default_factory=list)
    threads: dict[int, list[ThreadView]] = field(default_factory=dict)     # per pid, at the abort
    dumps: dict[int, str] = field(default_factory=dict)                    # per pid: which dump, from where
    processes: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    log: AgentLog | None = None          # the records joined (the timeline draws their events)

    def to_json(self) -> dict:
        return {"owners": [o.to_json() for o in self.owners], "notes": self.notes, "processes": [
            {**p, "threads_at_abort": [t.to_json() for t in self.threads.get(p["pid"], [])],
             "stack_dump": self.dumps.get(p["pid"])} for p in self.processes]}


def _site(p: AgentProcess, sid: int) -> str | None:
    if not sid:
        return None
    s = p.sites.get(sid)
    if s is None:
        return "an unresolved site (the process died before the agent named it)"
    return s.where if s.where != "-" else s.inner


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.1f} ms"


def locate(p: AgentProcess, address: int, at: int | None, basis: str, page: bool = False,
           operand: "Operand | None" = None) -> AllocationOwner:
    """`at`: the fault's time (CLOCK_BOOTTIME ns), None when not known (then the map's end is used).
    `operand`: the address was read from one lane's registers (a GPU core's faulting instruction)."""
    ivs = intervals(p)
    o = AllocationOwner(p.pid, address, "no-map", "", basis)
    lowest = min((iv.base for iv in ivs), default=None)
    if operand is not None and address < LOWEST_MAPPING:
        return _register_value(o, operand, lowest)
    if not ivs:
        alloc = p.header.get("alloc") or {}
        # The H200's caching-off trials: the tracker attached and saw nothing, because PyTorch's uncached
        # path (PYTORCH_NO_CUDA_MEMORY_CACHING) calls cudaMalloc/cudaFree itself, past the allocator's trace
        why = alloc.get("note") or ("the tracker attached and saw no allocation: with PYTORCH_NO_CUDA_MEMORY_CACHING "
                                    "set, PyTorch's memory bypasses the caching allocator and its trace"
                                    if alloc.get("mechanism") else "the tracker did not attach")
        o.text = f"pid {p.pid}: the agent recorded no device memory ({why})"
        return o
    lo, hi = (address, address + PAGE) if page else (address, address + 1)
    where = f"0x{address:x}" + (f" (the page 0x{address:x}-0x{hi:x}: the evidence gives the page, not the byte)"
                                if page else "")
    blocks = p.blocks
    covers = [iv for iv in ivs if iv.base < hi and lo < iv.end]

    def fill(iv: Interval, verdict: str) -> AllocationOwner:
        o.verdict, o.level, o.base, o.size, o.stream = verdict, iv.level, iv.base, iv.size, iv.stream
        o.offset = address - iv.base if verdict != PAST_END else address - iv.end
        o.allocated_at = _site(p, iv.alloc_site)
        o.freed_at = _site(p, iv.free_site) if iv.freed_ns is not None else None
        if iv.freed_ns is not None and at is not None:
            o.freed_ms_before = round((at - iv.freed_ns) / 1e6, 3)
        return o

    def what(iv: Interval) -> str:
        return (f"the {iv.size:,}-byte {iv.level} at 0x{iv.base:x}" +
                (f" allocated at {_site(p, iv.alloc_site)}" if _site(p, iv.alloc_site) else
                 " (no Python site: allocated outside Python or before the agent named it)"))

    live_blocks = [iv for iv in covers if iv.level == "block" and iv.live(at)]
    if live_blocks:
        iv = max(live_blocks, key=lambda x: x.allocated_ns)
        fill(iv, LIVE)
        o.text = f"{where} is {address - iv.base:,} bytes inside {what(iv)}, live at the fault (pid {p.pid})"
        return o
    live_segs = [iv for iv in covers if iv.level == "segment" and iv.live(at)]
    freed_blocks = [iv for iv in covers if iv.level == "block" and iv.freed_by(at)]
    if live_segs:
        seg = live_segs[0]
        inside = [b for b in freed_blocks if seg.base <= b.base < seg.end]
        if inside:
            b = max(inside, key=lambda x: x.freed_ns)
            fill(b, FREED)
            o.released = False
            ago = f" {_ms(at - b.freed_ns)} before the fault" if at is not None else " before the fault"
            o.text = (f"{where} is in {what(b)}, freed{ago}" + (f" at {o.freed_at}" if o.freed_at else "") +
                      f"; the allocator kept the memory cached (its segment 0x{seg.base:x} is still reserved), so the "
                      f"read hit stale or reused memory rather than faulting by itself (pid {p.pid})")
            return o
        fill(seg, LIVE)
        o.text = (f"{where} is {address - seg.base:,} bytes inside {what(seg)}, reserved at the fault"
                  + ("" if blocks else "; which tensor is not known at segment level (--alloc-history names the block)")
                  + f" (pid {p.pid})")
        return o
    freed_segs = [iv for iv in covers if iv.level == "segment" and iv.freed_by(at)]
    if freed_segs:
        seg = max(freed_segs, key=lambda x: x.freed_ns)
        inside = [b for b in freed_blocks if seg.base <= b.base < seg.end]
        b = max(inside, key=lambda x: x.freed_ns) if inside else None
        iv = b or seg
        fill(iv, FREED)
        o.released = True
        o.freed_ms_before = round((at - seg.freed_ns) / 1e6, 3) if at is not None else None
        ago = f"{_ms(at - seg.freed_ns)} before the fault" if at is not None else "before the fault (its time unknown)"
        freed_where = _site(p, seg.free_site)
        o.text = (f"{where} is {address - iv.base:,} bytes into {what(iv)}: freed and released to the driver {ago}"
                  + (f" (released at {freed_where})" if freed_where else "") + f": a use after free (pid {p.pid})")
        return o
    poisoned = _poison_owner(p, ivs, address, at, basis, what)
    if poisoned is not None:
        return poisoned
    # blocks where the map has them (a block says which tensor), else segments
    has_blocks = bool(blocks) and any(b.level == "block" for b in ivs)
    iv = past_end(lo, (x for x in ivs if x.live(at) and (x.level == "block" or not has_blocks)),
                  lambda x: x.end, prefer=lambda x: x.level == "block")
    if iv is not None:
        if not any(iv.end <= x.base < hi for x in ivs if x is not iv and x.live(at)):
            fill(iv, PAST_END)
            o.text = f"{where} is {address - iv.end:,} bytes past the end of {what(iv)} (pid {p.pid})"
            return o
    o.verdict = NONE
    since = (p.header.get("alloc") or {}).get("attached") or {}
    o.text = f"{where} is in no allocation of this process (pid {p.pid})"
    if p.ring and p.ring.get("wrapped"):
        o.notes.append("the ring had wrapped: allocations older than its first record are not in it")
    if since:
        o.notes.append("the map begins when the agent attached, at CUDA start")
    if operand is not None and address < lowest:
        # the H200's release and caching-off cores: 0x8000000091 from R20=0x81, R21=0x80 in four processes whose
        # maps lay elsewhere. A wild pointer can be there too, so it stays "in no allocation", without a claim
        o.doubt = (f"0x{address:x} is below every allocation of this process (the lowest at 0x{lowest:x}) and was "
                   f"read from one lane's registers ({operand.pair} = 0x{operand.base:x}): it may be a value the "
                   f"kernel loaded or reused there rather than the address the warp faulted on")
        o.notes.append(o.doubt)
    return o


def _register_value(o: AllocationOwner, op: "Operand", lowest: int | None) -> AllocationOwner:
    """A lane operand too low to be an address (the H200's release and caching-off cores: `[R20.64+0x10]`
    with R20=0x1, R21=0x0): the register pair holds a value, not a pointer, and the address the warp
    faulted on is not in this lane's registers. "In no allocation" is true of the value and says
    nothing of the fault: a note, never the finding."""
    o.verdict = NOT_AN_ADDRESS
    lo, hi = op.base & 0xFFFFFFFF, op.base >> 32
    below = f"no mapping lies below 0x{LOWEST_MAPPING:x}" + (
        f", and this process's lowest allocation is at 0x{lowest:x}" if lowest is not None else "")
    o.text = (f"the operand's base register pair {op.pair} holds 0x{op.base:x} ({op.register}=0x{lo:x}, "
              f"R{int(op.register[1:]) + 1}=0x{hi:x}){f' plus the offset 0x{op.offset:x}' if op.offset else ''}: "
              f"a small integer, not a device pointer ({below}): a value loaded through a stale pointer, or a "
              f"register the kernel reused after the access; the address the warp faulted on is not known from "
              f"one lane's registers (pid {o.pid})")
    o.notes.append(f"0x{o.address:x} is in no allocation of this process (pid {o.pid}); as an address it is a "
                   f"candidate at most")
    return o


def _poison_owner(p: AgentProcess, ivs: list[Interval], address: int, at: int | None, basis: str,
                  what) -> AllocationOwner | None:
    """An address made of the poison amplifier's bytes (analyze/poison_address.py): the freed block
    whose poison the kernel read, from the ring's record of that fill."""
    fills = [e for e in p.events if e.kind == "poison"]
    if not fills:
        return None
    read = poison_address.decode(address, fills, [iv for iv in ivs if iv.live(at)], at)
    if read is None:
        return None
    f = read.fill
    holder = max((iv for iv in ivs if iv.base <= f.address < iv.end and iv.allocated_ns <= f.t_ns),
                 key=lambda iv: iv.allocated_ns, default=None)
    o = AllocationOwner(p.pid, address, FREED, "", basis, level="block", base=f.address, size=f.size,
                        offset=None, stream=f.stream, released=False)
    o.allocated_at = _site(p, holder.alloc_site) if holder is not None else None
    if at is not None:
        o.freed_ms_before = round((at - f.t_ns) / 1e6, 3)
    how = (f"a pointer read from poison 0x{read.byte:02x}" if read.how == "pointer" else
           f"poison 0x{read.byte:02x} read as an index (scaled by " + " or ".join(f"{1 << k:,}" for k in read.shifts)
           + f" bytes) into {what(read.into)}")
    if holder is None:
        where = "(the map has no allocation holding it: it began after the block was made)"
    elif holder.level == "block" or holder.base == f.address:
        where = "allocated at " + (o.allocated_at or "no Python site")
    else:
        where = f"in {what(holder)}"
    ago = f"{_ms(at - f.t_ns)} before the fault" if at is not None else "before the fault (its time unknown)"
    o.text = (f"0x{address:x} is {how}: the poison came from the {f.size:,}-byte block at 0x{f.address:x} "
              f"{where}, freed and filled with poison 0x{read.byte:02x} {ago}: a use after free (pid {p.pid})")
    o.notes.append(f"the fault address is the poison amplifier's: 0x{poison_address.word(read.byte):016x}"
                   + (f" << {read.shifts[0]}" if read.shifts else "") + " plus a live base or offset; no real address is "
                   f"at or above 0x{poison_address.NOT_A_REAL_ADDRESS:x}")
    if read.earlier_same_byte:
        o.notes.append(f"{read.earlier_same_byte} earlier fill(s) in the ring used the same byte; the latest before "
                       f"the fault is named")
    return o


def threads_at_abort(dumps: list[StackDump]) -> tuple[list[ThreadView], str | None]:
    """The last fatal dump (else the last one asked for), each thread with a mark where it was inside
    the GPU runtime or raised the signal."""
    fatal = [d for d in dumps if d.fatal]
    d = fatal[-1] if fatal else (dumps[-1] if dumps else None)
    if d is None:
        return [], None
    views = []
    for t in d.threads:
        top = t.frames[0] if t.frames else ""
        mark = None
        if any("/faultkit/agent/" in f for f in t.frames):
            mark = "faultkit's agent (its site resolver): not the target's"
        elif "/torch/cuda/" in top or top.endswith((" synchronize", " item", " _lazy_init")):
            mark = f"inside the GPU runtime ({top.rsplit(' ', 1)[-1]}): waiting on the GPU, where a GPU error reaches the host"
        elif t.current:
            mark = "the thread that received the signal"
        views.append(ThreadView(t.thread, t.frames, mark))
    return views, f"{d.fatal or 'stacks asked for (SIGUSR2)'} ({d.origin})"


@dataclass
class FaultAddress:
    """A faulting address with the process it belongs to and what said it."""
    address: int
    pid: int | None
    basis: str
    page: bool = False
    operand: "Operand | None" = None     # read from one lane's registers (debug_stop.Operand)


def fault_addresses(faults: list[Fault], lanes: list[tuple]) -> list[FaultAddress]:
    """`lanes`: (address, pid, basis, operand) from the debugger stops' focused-lane operands: the exact
    byte, first; then the runtime's and the kernel log's fault addresses (pages)."""
    out = [FaultAddress(a, pid, basis, operand=op) for a, pid, basis, op in lanes]
    for f in faults:
        if f.address is None:
            continue
        page = f.source == "kernel-log" or f.address % PAGE == 0
        src = {"runtime": "the runtime's fault line", "kernel-log": "the kernel log's fault"}.get(f.source, f.source)
        out.append(FaultAddress(f.address, f.pid, f"{src} ({f.origin})", page))
    return out


def black_box(log: AgentLog, addresses: list[FaultAddress], fault_ns: int | None) -> BlackBox:
    bb = BlackBox(log=log)
    for pid, p in sorted(log.processes.items()):
        alloc = p.header.get("alloc") or {}
        bb.processes.append({"pid": pid, "ppid": p.header.get("ppid"), "armed": p.header.get("armed"),
                             "allocations": alloc.get("mechanism"), "mode": alloc.get("mode"),
                             "events": len(p.events), "sites": len(p.sites), "ring": p.ring,
                             "note": alloc.get("note") or alloc.get("sites_note"),
                             "failures": p.header.get("failures") or []})
        views, which = threads_at_abort(p.dumps)
        if views:
            bb.threads[pid], bb.dumps[pid] = views, which
    mapped = [p for p in log.processes.values() if p.events]
    seen = set()
    for fa in addresses:
        procs = [log.processes[fa.pid]] if fa.pid in log.processes else mapped
        if fa.pid is not None and fa.pid not in log.processes and mapped:
            bb.notes.append(f"the fault names pid {fa.pid}, which did not run the agent: its address was looked "
                            f"up in every process that did")
        for p in procs:
            if (p.pid, fa.address) in seen:
                continue
            seen.add((p.pid, fa.address))
            bb.owners.append(locate(p, fa.address, fault_ns, fa.basis, fa.page, fa.operand))
    if fault_ns is None and bb.owners:
        bb.notes.append("the fault's time is not known: 'live' and 'freed' are judged at the map's end")
    return bb
