"""Record types shared by the stages.

Parsers return these plain records; analyses take and return them; exporters render them.
Every record keeps where it came from (file and line) so a report can point at the evidence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Origin:
    file: str
    line: int | None = None  # 1-based line in that file

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class Problem:
    """Something a parser met and could not fully use. Never fatal."""
    file: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


@dataclass
class Stamp:
    """A timestamp as the source printed it, and what it means where that is known.

    clock: 'monotonic' (seconds since boot, plain dmesg), 'wall' (local or UTC wall clock),
    'relative' (dmesg -H deltas without an anchor), 'rocclr-us' (ROCclr host microseconds), or None.
    """
    raw: str
    clock: str | None = None
    seconds: float | None = None   # monotonic / rocclr seconds
    wall: str | None = None        # ISO 8601 when resolvable (year may be guessed: see wall_note)
    wall_note: str | None = None


# ---------------- runtime log ----------------

@dataclass
class RuntimeFault:
    """A runtime line that reports a GPU error: ROCr, ROCclr, LLVM offload, old debug agent."""
    kind: str  # vm-fault | hw-exception | queue-callback | queue-error | memory-fault-error | offload-fault | debug-agent-fault | system-event
    origin: Origin
    text: str
    node: int | None = None          # KFD topology node (ROCr node-N)
    gpu_index: int | None = None     # ROCclr device index
    agent_handle: str | None = None
    address: int | None = None
    imprecise: bool = False
    reason: str | None = None
    code: int | None = None
    status: str | None = None
    queue: str | None = None
    kernel: str | None = None
    host: str | None = None
    pid: int | None = None
    process_tag: str | None = None   # e.g. "Worker_TP3_EP3 pid=891", "pid=63079", "9" (ctest)
    stamp: Stamp | None = None
    rocclr_line: int | None = None   # __LINE__ of the ClPrint: a version hint


@dataclass
class Dispatch:
    """One kernel launch seen in a dispatch log (AMD_LOG_LEVEL) or a ROCclr hang analysis block."""
    origin: Origin
    source: str                      # shader-name | aql-packet | hang-analysis
    kernel: str | None = None
    hw_queue: str | None = None
    kernel_obj: str | None = None
    grid: tuple[int, ...] | None = None
    workgroup: tuple[int, ...] | None = None
    correlation_id: int | None = None
    rptr: int | None = None
    wptr: int | None = None
    pid: int | None = None
    us: int | None = None


@dataclass
class WaveDump:
    """A stopped wave printed by rocm-debug-agent (all header generations)."""
    origin: Origin
    generation: str                  # v1 | v2 | v2-kernel-entry | v2-kernargs
    wave: int | None = None
    pc: int | None = None
    kernel: str | None = None        # from kernel_code_entry <SYM> or "Disassembly for function"
    kernel_code_entry: int | None = None
    kernargs: int | None = None
    reasons: list[str] = field(default_factory=list)
    running: bool = False
    code_object: str | None = None
    loaded_at: tuple[int, int] | None = None
    disassembly: list[str] = field(default_factory=list)
    marked_pc: int | None = None     # the '=>' line of the disassembly
    source_lines: list[str] = field(default_factory=list)
    exec_mask: str | None = None
    waves_at_pc: int | None = None   # v1: "N wavefront(s) found in @PC"


@dataclass
class HostError:
    """A host-side error text: PyTorch HIP/CUDA errors and their enum names."""
    origin: Origin
    api: str                          # HIP | CUDA
    text: str
    exception: str | None = None
    enum: str | None = None


@dataclass
class ReportPoint:
    """Where the error was *reported* on the host: never the faulting site."""
    origin: Origin
    kind: str                         # python-traceback | fatal-python-error | abort | native-stack
    frame: str
    exception: str | None = None
    process_tag: str | None = None


@dataclass
class Hint:
    """A line that names a kernel being prepared or loaded right before a fault."""
    origin: Origin
    kind: str                         # miopen-prepare | aiter-load | offload-kernel | triton-jit
    kernel: str


@dataclass
class Note:
    """Other runtime facts worth showing: core dumps, abort lines, nearby memory maps."""
    origin: Origin
    kind: str
    text: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class RuntimeLog:
    faults: list[RuntimeFault] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)
    waves: list[WaveDump] = field(default_factory=list)
    host_errors: list[HostError] = field(default_factory=list)
    report_points: list[ReportPoint] = field(default_factory=list)
    hints: list[Hint] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def extend(self, other: "RuntimeLog") -> None:
        for name in self.__dataclass_fields__:
            getattr(self, name).extend(getattr(other, name))


# ---------------- kernel log ----------------

@dataclass
class VMFault:
    """One amdgpu VM fault report (header + address + status lines), any generation."""
    origin: Origin
    stamp: Stamp | None = None
    pci: str | None = None
    hub: str | None = None
    retry: bool | None = None
    src_id: int | None = None
    ring: int | None = None
    vmid: int | None = None
    pasid: int | None = None
    process: str | None = None
    pid: int | None = None
    thread: str | None = None
    tid: int | None = None
    address: int | None = None       # page address as printed
    ih_client: int | None = None
    ih_client_name: str | None = None
    status: int | None = None
    status_register: str | None = None
    client_id: int | None = None
    client_name: str | None = None
    rw: int | None = None            # 0 read, 1 write
    permission_faults: int | None = None
    walker_error: int | None = None
    mapping_error: int | None = None
    more_faults: int | None = None
    die: str | None = None
    generation: str | None = None    # gfx8 | gfx9 | gfx10 | gfx11 | gfx12 (best guess)
    format_hint: str | None = None   # kernel-version fingerprint
    secondary: bool = False          # all-zero status: a fault latched behind an earlier one
    lines: list[str] = field(default_factory=list)


@dataclass
class Xid:
    """One NVIDIA NVRM Xid line."""
    origin: Origin
    xid: int
    pci: str
    text: str
    stamp: Stamp | None = None
    pid: int | None = None
    process: str | None = None
    channel: str | None = None
    address: int | None = None
    fault_type: str | None = None
    access: str | None = None
    engine: str | None = None
    client: str | None = None
    location: str | None = None      # GPC/TPC/SM
    exception: str | None = None
    trusted: bool = True             # False for UNRECOGNIZED_* MMU fault records


@dataclass
class KernelEvent:
    """A kernel-log message that is not a fault block: timeouts, resets, MES/KFD, RAS, boot facts."""
    origin: Origin
    kind: str                        # ring-timeout | gpu-reset | reset-method | reset-result | vram-lost | mes | kfd | ras | sq-intr | callbacks-suppressed | task | device | iommu
    text: str
    stamp: Stamp | None = None
    pci: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class KernelLog:
    faults: list[VMFault] = field(default_factory=list)
    xids: list[Xid] = field(default_factory=list)
    events: list[KernelEvent] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    timestamp_style: str | None = None
    reversed_input: bool = False

    def extend(self, other: "KernelLog") -> None:
        for name in ("faults", "xids", "events", "problems"):
            getattr(self, name).extend(getattr(other, name))


# ---------------- correlated incident ----------------

@dataclass
class Fault:
    """A fault as the report shows it (the JSON contract's `faults[]`)."""
    source: str                      # runtime | kernel-log | debugger | tracer | sanitizer
    kind: str
    address: int | None = None
    code: int | None = None
    gpu: str | None = None
    pid: int | None = None
    process: str | None = None
    time: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    meaning: str | None = None
    origin: Origin | None = None
    group: int | None = None         # incident group: same event seen by several sources

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "address": hex_or_none(self.address),
            "code": hex_or_none(self.code),
            "gpu": self.gpu,
            "pid": self.pid,
            "process": self.process,
            "time": self.time,
            "detail": {**self.detail, "meaning": self.meaning,
                       "origin": str(self.origin) if self.origin else None,
                       "group": self.group},
        }


@dataclass
class Candidate:
    kernel: str
    score: float
    why: str


@dataclass
class Verdict:
    level: str                       # certain | likely | candidates | unknown
    kernel: str | None
    why: str
    candidates: list[Candidate] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "kernel": self.kernel,
                "candidates": [asdict(c) for c in self.candidates], "why": self.why}


def hex_or_none(value: int | None) -> str | None:
    return None if value is None else f"0x{value:x}"
