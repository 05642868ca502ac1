"""Record types shared by the stages.

Parsers return these plain records; analyses take and return them; exporters render them.
Every record keeps where it came from (file and line) so a report can point at the evidence.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Origin:
    """Where a record came from: a file and line, quoted in every report."""
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
    internal: bool = False           # a parser's own bug, caught on one line (tests assert there is none)

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
    kind: str  # vm-fault | hw-exception | queue-callback | queue-error | memory-fault-error | offload-fault | debug-agent-fault | system-event | hsakmt-fault | memory-error
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
    buffer: str | None = None        # libhsakmt: which known buffer holds the address, if any
    # a watchdog's collective timeout: collective, seq, timeout_ms, ran_ms, rank, process_group
    collective: dict[str, Any] | None = None


@dataclass
class Dispatch:
    """One kernel launch seen in a dispatch log (AMD_LOG_LEVEL) or a ROCclr hang analysis block."""
    origin: Origin
    source: str                      # shader-name | aql-packet | hang-analysis | library-log
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
    library: str | None = None       # library-log: the library that logged the launch (MIOpen)


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
    pid: int | None = None           # from the line's worker prefix, where the log interleaves processes
    process_tag: str | None = None


# Fault kinds that are a hang's symptom, not a GPU fault: a collective's watchdog timeout, the
# heartbeat monitor's note that the watchdog itself got stuck
HANG_SYMPTOMS = frozenset({"collective-timeout", "watchdog-stuck"})


@dataclass
class HostError:
    """A host-side error text: PyTorch HIP/CUDA errors and their enum names."""
    origin: Origin
    api: str                          # HIP | CUDA
    text: str
    exception: str | None = None
    enum: str | None = None
    code: int | None = None           # the error's number (codes.GPU_ERRORS: 700 ...)
    pid: int | None = None            # from the line's worker tag (`(VllmWorker pid=..)`)
    process_tag: str | None = None    # the worker tag or rank (`[rank3]:`, SGLang's `TP3`) on the line
    # where a library's error check reported it (ggml's `current device: D, in function F at FILE:LINE` and
    # the call it checked): the reporting site and the device, never the faulting kernel
    device: int | None = None
    reported_in: str | None = None    # `FILE:LINE in FUNCTION`
    call: str | None = None           # the checked call as printed (`cudaStreamSynchronize(cuda_ctx->stream())`)


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
class DriverException:
    """The CUDA driver's own report of a GPU exception, printed while it writes a core dump
    (`CUDA_COREDUMP_SHOW_PROGRESS=1`): the exception, where, and the excepting warp's stack."""
    origin: Origin
    exception: str                   # CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS
    code: int | None = None
    device: int | None = None
    sm: int | None = None
    warp: int | None = None
    warp_exited: bool = False        # "exception was detected after the warp has exited": no stack
    pc: int | None = None
    kernel: str | None = None        # stack frame #0
    pid: int | None = None
    process_tag: str | None = None
    frames: list[str] = field(default_factory=list)   # the excepting warp's stack, #0 first: the last is the kernel


@dataclass
class DeviceAssert:
    """A device-side assert the GPU runtime printed (CUDA `__assertfail`, HIP `__assert_fail`).
    The function is the one that asserted: a kernel or a device function inside one (PyTorch's
    index kernels print `operator()` of a lambda), so it names a location, not an entry point."""
    origin: Origin
    runtime: str                      # CUDA | HIP
    file: str
    line: int
    function: str | None              # None where the build printed none (CUDA on Windows)
    assertion: str
    block: tuple[int, ...] | None = None     # CUDA prints block and thread; HIP neither
    thread: tuple[int, ...] | None = None
    count: int = 1                    # identical lines (one per failing thread) folded into one
    pid: int | None = None
    process_tag: str | None = None


@dataclass
class RuntimeLog:
    """Everything a runtime log says: faults, dispatches, wave dumps, host errors."""
    faults: list[RuntimeFault] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)
    waves: list[WaveDump] = field(default_factory=list)
    host_errors: list[HostError] = field(default_factory=list)
    report_points: list[ReportPoint] = field(default_factory=list)
    hints: list[Hint] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    driver_exceptions: list[DriverException] = field(default_factory=list)
    device_asserts: list[DeviceAssert] = field(default_factory=list)
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
    caused_by: int | None = None     # "caused by previous Xid N": a consequence, not a second error
    exception: str | None = None
    trusted: bool = True             # False for UNRECOGNIZED_* MMU fault records
    gpu_instance: int | None = None      # MIG attribution: `GPU-I:NN` / `GPU-CI:NN` after the PCI address
    compute_instance: int | None = None
    containment: str | None = None       # Xid 94/95: "Contained: <unit> (<loc>)" / "Uncontained: ..."
    reset_required: bool | None = None   # Xid 94/95 `RST: Yes|No`


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
    """Everything the kernel log says: GPU faults, Xids, events, and its timestamp style."""
    faults: list[VMFault] = field(default_factory=list)
    xids: list[Xid] = field(default_factory=list)
    events: list[KernelEvent] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    timestamp_style: str | None = None
    reversed_input: bool = False

    def extend(self, other: "KernelLog") -> None:
        for name in ("faults", "xids", "events", "problems"):
            getattr(self, name).extend(getattr(other, name))


# ---------------- debugger transcripts ----------------

@dataclass
class GpuPlace:
    """Where on the GPU a thread stopped: an AMDGPU wave/lane systag or a cuda-gdb focus."""
    systag: str
    agent: int | None = None
    queue: int | None = None
    dispatch: int | None = None
    wave: int | None = None
    workgroup: tuple[int | None, ...] | None = None   # None components: '?' (attached late)
    wave_in_group: int | None = None
    lane: int | None = None
    work_item: tuple[int | None, ...] | None = None
    device: int | None = None                          # cuda-gdb
    sm: int | None = None
    warp: int | None = None
    grid: int | None = None
    kernel_id: int | None = None
    block: tuple[int, ...] | None = None
    thread: tuple[int, ...] | None = None
    implied: bool = False     # no switch line: a wave stop inferred from rocgdb's imprecise-memory warning


@dataclass
class Frame:
    """One frame of a debugger backtrace."""
    text: str
    level: int | None = None
    pc: int | None = None
    function: str | None = None
    args: str | None = None
    file: str | None = None
    line: int | None = None
    objfile: str | None = None       # 'from ...': a library or a code-object URI
    launch: tuple[str, str] | None = None   # cuda-gdb <<<(grid),(block)>>>


@dataclass
class DebugStop:
    """One stop the debugger reported. GPU or host is decided by `gpu`, never by the signal."""
    origin: Origin
    kind: str                        # signal | catchpoint | breakpoint | cuda-exception | core | attach | mi
    text: str
    signal: str | None = None
    meaning: str | None = None
    thread: str | None = None        # gdb thread id ("6", "2.6")
    thread_name: str | None = None
    host_systag: str | None = None
    gpu: GpuPlace | None = None
    frame: Frame | None = None
    source_line: str | None = None
    imprecise_warning: bool = False  # rocgdb said the reported location may not be accurate
    lane_inactive: bool = False
    exception: str | None = None     # cuda-gdb "CUDA Exception: ..."
    error_pc: int | None = None      # cuda-gdb "triggered at PC": the faulting instruction
    error_function: str | None = None
    error_file: str | None = None
    error_line: int | None = None


@dataclass
class AgentRow:
    """One GPU agent as the debugger's `info agents` lists it."""
    origin: Origin
    id: str
    state: str
    gpuid: int
    arch: str
    name: str
    location: str
    current: bool = False


@dataclass
class QueueRow:
    """One GPU queue as the debugger's `info queues` lists it."""
    origin: Origin
    id: str
    agent: int
    queue: int
    qid: int
    type: str
    size: int
    address: int
    read: int | None = None
    write: int | None = None
    current: bool = False


@dataclass
class DispatchRow:
    """`info dispatches [-full]`: the kernel of every active dispatch."""
    origin: Origin
    id: str
    agent: int
    queue: int
    dispatch: int
    pkid: int
    grid: tuple[int, ...]
    workgroup: tuple[int, ...]
    kernel: str
    fence: str | None = None
    shared: int | None = None
    private: int | None = None
    kernel_descriptor: int | None = None
    kernel_args: int | None = None
    current: bool = False


@dataclass
class ThreadRow:
    """`info threads` / `info lanes` rows (wrapped frames joined)."""
    origin: Origin
    id: str
    systag: str
    frame: str
    name: str | None = None
    gpu: GpuPlace | None = None
    lanes: str | None = None
    state: str | None = None         # info lanes: A I U R
    current: bool = False


@dataclass
class CudaKernelRow:
    """One kernel as cuda-gdb's `info cuda kernels` lists it."""
    origin: Origin
    kernel_id: int
    device: int
    grid: int
    status: str
    grid_dim: str
    block_dim: str
    name: str
    current: bool = False


@dataclass
class CodeObjectRef:
    """A row of `info sharedlibrary` (or a frame's `from`) naming a GPU code object by URI."""
    origin: Origin
    uri: str
    scheme: str                      # file | memory
    path: str
    offset: int | None = None
    size: int | None = None
    low: int | None = None           # From/To columns: the loaded text range
    high: int | None = None


@dataclass
class DisasmLine:
    """One line of a debugger's disassembly around a stop."""
    origin: Origin
    text: str
    pc: int | None = None
    symbol: str | None = None
    offset: int | None = None
    instruction: str = ""
    marker: str = ""                 # '=>' current pc, '*>' cuda-gdb error pc, '*=>' both


@dataclass(frozen=True)
class KernelMention:
    """A kernel named away from the fault line (ingest/kernel_mentions.py): where it was built,
    dispatched, launched, tuned or disassembled, or named by a person's words beside a fault."""
    origin: Origin
    kernel: str                 # as printed (demangled where it was mangled)
    basis: str                  # disassembled | dispatched | launched | built | tuned | named-in-text
    producer: str               # whose format: gdb, rocprofv3, PyTorch profiler, nsys, ptxas, Triton ...
    said: str                   # what the line says of it, in words
    fault: str | None = None    # named in the text: the fault the same line names (warp-illegal-address ...)
    cut: bool = False           # a table cut the name at its column's width (its end is lost)


@dataclass
class SanitizerReport:
    """One compute-sanitizer memcheck error block."""
    origin: Origin
    space: str                       # global | shared | local
    access: str                      # read | write
    size: int
    kernel: str | None = None
    offset: int | None = None
    file: str | None = None
    line: int | None = None
    thread: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    address: int | None = None
    distance: int | None = None
    direction: str | None = None     # after | before | inside the nearest allocation
    misaligned: bool = False         # the address is misaligned (not out of bounds)
    allocation: int | None = None
    allocation_size: int | None = None
    host_frames: list[str] = field(default_factory=list)
    device_frames: list[str] = field(default_factory=list)   # `Device Frame:` functions, innermost first
    # the report went on past its device frames (its host backtrace, the next report): the outermost
    # device frame shown is the launched kernel; False where the paste ends in them (the kernel cut)
    device_frames_end: bool = False


@dataclass
class SanitizerFinding:
    """A compute-sanitizer report that is not a memcheck access error: initcheck's uninitialised
    reads, racecheck's races and hazards, synccheck's barrier errors, memcheck's hardware
    exceptions. It names the kernel where it happened; only a hardware exception ended the kernel."""
    origin: Origin
    tool: str                        # memcheck | racecheck | initcheck | synccheck
    kind: str                        # memcheck: the exception (illegal-instruction, invalid-pc, misaligned-address, double-free, ...) or device-assert | uninitialized-read | race | hazard | barrier-error
    text: str                        # the report's head line, as printed
    kernel: str | None = None
    offset: int | None = None
    file: str | None = None
    line: int | None = None
    thread: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    address: int | None = None
    size: int | None = None
    space: str | None = None         # global | shared
    accesses: list[str] = field(default_factory=list)   # racecheck: "Write", "Read" ...
    hazards: int | None = None       # racecheck: "[N hazards]", summed over the report's lines
    mangled: str | None = None       # the kernel as printed, where it was mangled (`kernel` is demangled)
    device_frames: list[str] = field(default_factory=list)   # `Device Frame:` functions, innermost first
    device_frames_end: bool = False  # the report went on past them (as SanitizerReport's)
    sites: list[str] = field(default_factory=list)   # racecheck: the function of each access, as printed (demangled)


@dataclass
class DebugEvent:
    """Process and debugger life: exits, forks, execs, internal errors, unavailable commands."""
    origin: Origin
    kind: str
    text: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class DebuggerLog:
    """Everything a debugger's output says: stops, agents, queues, dispatches."""
    debugger: str | None = None      # rocgdb | gdb | cuda-gdb | compute-sanitizer (best guess)
    stops: list[DebugStop] = field(default_factory=list)
    agents: list[AgentRow] = field(default_factory=list)
    queues: list[QueueRow] = field(default_factory=list)
    dispatches: list[DispatchRow] = field(default_factory=list)
    threads: list[ThreadRow] = field(default_factory=list)
    lanes: list[ThreadRow] = field(default_factory=list)
    cuda_kernels: list[CudaKernelRow] = field(default_factory=list)
    code_objects: list[CodeObjectRef] = field(default_factory=list)
    disassembly: list[list[DisasmLine]] = field(default_factory=list)
    backtrace: list[Frame] = field(default_factory=list)
    sanitizer: list[SanitizerReport] = field(default_factory=list)
    sanitizer_findings: list[SanitizerFinding] = field(default_factory=list)
    events: list[DebugEvent] = field(default_factory=list)
    precise_memory: str | None = None    # enabled | disabled | off | could-not-enable | requested
    precise_origin: Origin | None = None
    registers: dict[str, int] = field(default_factory=dict)   # `info registers` of the focused thread/lane
    problems: list[Problem] = field(default_factory=list)

    def first_backtrace(self) -> list[Frame]:
        """The stopped thread's own `bt`: the frames up to where the next backtrace starts again at
        level 0 (a capture's `thread apply all bt` repeats that thread after it)."""
        out: list[Frame] = []
        for f in self.backtrace:
            if out and f.level == 0:
                break
            out.append(f)
        return out

    def extend(self, other: "DebuggerLog") -> None:
        for name in self.__dataclass_fields__:
            value = getattr(other, name)
            if isinstance(value, list):
                getattr(self, name).extend(value)
        self.registers.update(other.registers)
        self.debugger = self.debugger or other.debugger
        if other.precise_memory:
            self.precise_memory, self.precise_origin = other.precise_memory, other.precise_origin


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
    detail: dict[str, Any] = field(default_factory=dict)   # shown in reports; analyses read the fields below
    meaning: str | None = None
    origin: Origin | None = None
    group: int | None = None         # incident group: same event seen by several sources
    client: str | None = None        # the kernel log's UTCL2/MMU client name
    engine: str | None = None        # codes.engine_of(client): shader, copy, command-processor, firmware, ...
    vmid: int | None = None
    pasid: int | None = None
    node: int | None = None          # KFD node of `GPU node-N`
    secondary: bool = False          # a block latched behind an earlier fault: says nothing of the engine
    kernel: str | None = None        # a kernel the fault record itself names (debugger, sanitizer, core, runtime)
    decimal_code: bool = False       # a CUDA/HIP error number (700), printed as its runtime prints it

    def code_text(self) -> str | None:
        """The code as its producer prints it: an HSA status in hex, a CUDA/HIP error in decimal."""
        return str(self.code) if self.decimal_code and self.code is not None else hex_or_none(self.code)

    @property
    def hsa_code(self) -> int | None:
        """The HSA status code, where the code is one (a CUDA/HIP error number is not)."""
        return None if self.decimal_code else self.code

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "address": hex_or_none(self.address),
            "code": self.code_text(),
            "gpu": self.gpu,
            "pid": self.pid,
            "process": self.process,
            "time": self.time,
            "engine": self.engine,
            "detail": {**self.detail, "meaning": self.meaning,
                       "origin": str(self.origin) if self.origin else None,
                       "group": self.group},
        }


@dataclass
class Candidate:
    """A kernel the verdict names as possible, with its score and why."""
    kernel: str
    score: float
    why: str
    claims: list[str] = field(default_factory=list)   # ids of the verdict's claims behind it (Claim.id)


@dataclass
class Verdict:
    """Built only by faultkit.judge (tests/test_architecture.py checks it)."""
    level: str                       # certain | likely | candidates | unknown
    kernel: str | None
    why: str
    candidates: list[Candidate] = field(default_factory=list)
    claims: list[Any] = field(default_factory=list)    # judge.claims.Claim: the evidence behind it, ranked
    decisive: str | None = None      # the finding that narrows the search most (judge/decisive.py)

    def claim(self, claim_id: str):
        """The claim a candidate points at, by its id."""
        return next(c for c in self.claims if c.id == claim_id)

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "kernel": self.kernel,
                "candidates": [asdict(c) for c in self.candidates], "why": self.why,
                "claims": [c.to_json() for c in self.claims]}


def hex_or_none(value: int | None) -> str | None:
    return None if value is None else f"0x{value:x}"


# ---------------- code objects ----------------

@dataclass
class KernelArg:
    """One argument of a kernel as the code object's metadata declares it."""
    name: str | None
    offset: int
    size: int
    kind: str | None                 # .value_kind: global_buffer, by_value, hidden_*
    address_space: str | None = None
    type_name: str | None = None


@dataclass
class Kernel:
    """One kernel of a code object: its symbol, entry and descriptor."""
    name: str                        # the symbol (mangled where the language mangles)
    address: int                     # ELF virtual address of the entry
    size: int
    descriptor: int | None = None    # address of <name>.kd
    display_name: str | None = None  # metadata .name
    args: list[KernelArg] = field(default_factory=list)
    lds_bytes: int | None = None     # .group_segment_fixed_size
    scratch_bytes: int | None = None  # .private_segment_fixed_size
    wavefront_size: int | None = None
    sgprs: int | None = None
    vgprs: int | None = None
    kernarg_bytes: int | None = None


@dataclass
class Resolved:
    """A PC resolved to a kernel and offset, with its source line where known."""
    kernel: str
    offset: int
    vaddr: int
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f" at {self.file}:{self.line}" if self.file else " (no line information)"
        return f"{self.kernel}+0x{self.offset:x}{where}"


@dataclass
class CodeObject:
    """A GPU code object's kernels and functions: what a PC is resolved against."""
    target: str                      # e.g. gfx90a:sramecc+:xnack-
    kernels: list[Kernel] = field(default_factory=list)
    functions: list[tuple[int, int, str]] = field(default_factory=list)   # every FUNC symbol: (addr, size, name)
    text_address: int | None = None
    metadata: dict[str, Any] | None = None
    lines: list[tuple[int, str, int]] = field(default_factory=list)       # (address, file, line), sorted
    problems: list[Problem] = field(default_factory=list)

    def kernel(self, name: str) -> Kernel | None:
        return next((k for k in self.kernels if name in (k.name, k.display_name)), None)

    def resolve(self, pc: int, load_base: int | None = None, text_start: int | None = None) -> Resolved | None:
        """Map an absolute PC to function+offset and source line.

        Give the load base (where vaddr 0 is mapped) or the loaded start of .text (the `From`
        column of `info sharedlibrary`); with neither, `pc` is taken as an ELF address."""
        if load_base is None and text_start is not None and self.text_address is not None:
            load_base = text_start - self.text_address
        vaddr = pc - (load_base or 0)
        hit = next(((a, s, n) for a, s, n in self.functions if a <= vaddr < a + max(s, 1)), None)
        if hit is None:
            return None
        out = Resolved(hit[2], vaddr - hit[0], vaddr)
        if self.lines:
            i = bisect_right([a for a, _, _ in self.lines], vaddr) - 1
            if i >= 0 and self.lines[i][0] >= hit[0]:
                out.file, out.line = self.lines[i][1], self.lines[i][2]
        return out


# ---------------- core dumps ----------------

@dataclass
class CoreRecord:
    """One core dump among the inputs, and what was done with it (the JSON's `cores[]`)."""
    path: str
    platform: str                    # cuda | rocm-gpu | rocm-unified | host | not a core
    pid: int | None = None
    size: int | None = None
    how_found: str | None = None     # a capture's record: armed pattern, working directory, core_pattern, ...
    analysed_with: str | None = None # the debugger that opened it
    transcript: str | None = None    # the transcript's name among the inputs
    open_with: str | None = None     # the command to run where it was not opened
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
