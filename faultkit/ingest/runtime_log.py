"""Parser for what a crashing GPU process writes to stdout/stderr.

Shapes and regexes follow ../shared/reference/runtime_messages.md. Lines from several processes
interleave, arrive behind foreign prefixes or glued to progress bars, and may be cut: every
pattern is searched, never anchored, and a line that matches nothing is simply skipped.
"""

from __future__ import annotations

from .. import lazy_re as re   # compiled at first use: start-up (issue #35)

from ..codes import HSA_STATUS_BY_NAME, VM_FAULT_REASONS
from ..durations import exact_seconds
from ..limits import small_int
from ..model import (DeviceAssert, Dispatch, DriverException, Hint, HostError, Note, Origin, Problem, ReportPoint,
                     RuntimeFault, RuntimeLog, Stamp, WaveDump)
from . import gpu_errors
from .debugger import SANITIZER_HEAD
from .prefilter import RUNTIME, anchored, continuation, may_matter, words
from .text import Line, LineSource, cut_problem, decode

HEX = r"0x[0-9a-fA-F]+"

VM_FAULT = re.compile(
    r"Memory access fault by GPU node-(?P<node>\d+)(?: \(Agent handle: (?P<agent>0x[0-9a-f]+|\(nil\))\))?"
    r" on address (?P<addr>0x[0-9a-fA-F]+|\(nil\))(?P<imprecise>\(may not be exact address\))?\."
    r"(?: Reason: (?P<reason>Page not present or supervisor privilege|Write access to a read-only page|"
    r"Execute access to a page marked NX|Host access only|DRAM ECC failure|SRAM ECC failure|"
    r"Generic hang recovery|ECC failure \(if supported by HW\)|Unknown))?")
anchored(RUNTIME, VM_FAULT, 'Memory access fault by GPU')
VM_FAULT_HEAD = re.compile(r"Memory access fault by GPU node-(?P<node>\d+)")
anchored(RUNTIME, VM_FAULT_HEAD, 'Memory access fault by GPU')


def _prefixes(template: str) -> str:
    """A regex matching every prefix of `template`, where `#` stands for a run of hex digits."""
    tokens = ["[0-9a-fA-F]*" if ch == "#" else re.escape(ch) for ch in template]
    out = ""
    for tok in reversed(tokens):
        out = f"(?:{tok}{out})?"
    return out


# what follows the head of a fault line, cut anywhere (a crash mid-write, a log cut at its size limit)
VM_FAULT_CUT_TAIL = re.compile(rf"(?:{_prefixes(' (Agent handle: 0x#) on address 0x#')}|"
                               rf"{_prefixes(' on address 0x#')})\s*")
continuation(RUNTIME, VM_FAULT_CUT_TAIL)
HW_EXCEPTION = re.compile(r"HW Exception by GPU node-(?P<node>\d+) \(Agent handle: (?P<agent>0x[0-9a-f]+|\(nil\))\)"
                          r" reason ?:\s?(?P<cause>ECC|GPU Hang)")
anchored(RUNTIME, HW_EXCEPTION, 'HW Exception by GPU')
QUEUE_INACTIVATED = re.compile(r"Queue at (?P<queue>0x[0-9a-f]+|\(nil\)) inactivated due to async error")
anchored(RUNTIME, QUEUE_INACTIVATED, 'inactivated due to async error')
QUEUE_ERROR = re.compile(r"(?:Warning: )?Queue error(?: -|:) (?P<status>HSA_(?:EXT_)?STATUS_[A-Z_]+)")
anchored(RUNTIME, QUEUE_ERROR, 'Queue error')
ROCCLR_PREFIX = re.compile(
    r":(?P<lvl>\d+):(?P<file>[\w.]+)\s*:(?P<line>\d+)\s*:\s*(?:(?P<us>\d+)d? us:|<ts>:)?\s?"
    r"(?:(?P<pid_a>\d+)\s*: \[tid:0x[0-9a-f]+\] |\[pid:\s*(?P<pid_b>\d+)\s+tid: ?0x[0-9a-f]+\] )?\s*")
continuation(RUNTIME, ROCCLR_PREFIX)
CALLBACK = re.compile(
    r"(?:Device::callbackQueue|Callback: Queue (?P<queue>0x[0-9a-f<>.]+)) [Aa]borting with"
    r"(?: status: 0x(?P<code_old>[0-9a-f]+)| error\s*:\s*(?P<status>HSA_(?:EXT_)?STATUS_[A-Z_]+|\(null\)):?"
    # (the description never runs into the next record: a lazy `.*?` from every record of a line
    # of many records joined, ones cut before `code:`, read to the line's end each: quadratic)
    r"\s*(?P<desc>(?:(?!Device::callbackQueue|Callback: Queue )[^\n])*?)\s+[Cc]ode: 0x(?P<code>[0-9a-f]+)(?: Available Free mem : (?P<free_mb>\d+) MB)?"
    r"(?: \[(?:host: (?P<host>[^,]+), )?GPU index: (?P<gpu>\d+), kernel: (?P<kernel>.*)\])?)")
anchored(RUNTIME, CALLBACK, 'borting with', 'Callback: Queue ', 'Device::callbackQueue')
BARE_STATUS = re.compile(r"(?<![\w(])(?P<status>HSA_STATUS_ERROR_[A-Z_]+)\b(?::(?:(?!HSA_STATUS_ERROR_)[^\n])*?(?:[Cc]ode:\s*0x(?P<code>[0-9a-fA-F]+))|"
                         r"\s+0x(?P<code2>[0-9a-fA-F]+))")
anchored(RUNTIME, BARE_STATUS, 'HSA_STATUS_ERROR_')
CALLBACK_START = re.compile(r"(?:Device::callbackQueue|Callback: Queue \S+) [Aa]borting with error")
anchored(RUNTIME, CALLBACK_START, 'borting with')
FALLBACK_STATUS = re.compile(r"(HSA_(?:EXT_)?STATUS_[A-Z_]+)")
anchored(RUNTIME, FALLBACK_STATUS, 'HSA_')
FALLBACK_CODE = re.compile(r"[Cc]ode: 0x([0-9a-f]+)")
continuation(RUNTIME, FALLBACK_CODE)
MEMORY_FAULT_ERROR = re.compile(
    r"Memory Fault Error \[(?:host: (?P<host>[^,]+), )?GPU index: (?P<gpu>\d+),\s*"
    # the kernel runs to the line's last `]`: a lambda's name holds brackets (`k<[lambda(int) ...]>`)
    r"(?:faulting addr: (?P<addr>0x[0-9a-f]+),\s*)?kernel: (?P<kernel>.*)\]", re.S)
anchored(RUNTIME, MEMORY_FAULT_ERROR, 'Memory Fault Error [')
OFFLOAD = re.compile(r"OFFLOAD ERROR: memory access fault by GPU (?P<dev>\d+) \(agent (?P<agent>0x[0-9a-f]+)\)"
                     r" at virtual address (?P<addr>0x[0-9a-f]+|\(nil\))\. Reasons: (?P<reasons>.+?)\s*$")
anchored(RUNTIME, OFFLOAD, 'OFFLOAD ERROR: memory access fault')
HSAKMT = re.compile(r"Memory exception on virtual address (?P<addr>0x[0-9a-f]+), node id (?P<node>\d+) : (?P<why>.+?)\s*$")
anchored(RUNTIME, HSAKMT, 'Memory exception on virtual address')
HSAKMT_BUFFER = re.compile(r"(?P<none>Address does not belong to a known buffer)|GPU address (?P<base>0x[0-9a-f]+), "
                           r"node id \d+, size in byte (?P<size>0x[0-9a-f]+)")
# ROCr's handler of a KFD memory-error event (ROCm 6.x/7.x): the address the GPU still used.
continuation(RUNTIME, HSAKMT_BUFFER)
MEMORY_ERROR = re.compile(r"Memory critical error by agent node-(?P<node>\d+)(?: \(Agent handle: (?P<agent>0x[0-9a-f]+|"
                          r"\(nil\))\))? on address (?P<addr>0x[0-9a-fA-F]+|\(nil\))\.(?: Reason: (?P<reason>[^.\n]+))?")
# PyTorch's NCCL/RCCL watchdog: one rank waited for a collective that another never joined.
# The prefix is `[Rank N] ` (the timeout line itself, still in 2.6 reports), `[PG N Rank N] ` (2.3-2.4
# logPrefix) or ProcessGroupNCCL::createLogPrefix's `[PG ID N PG GUID G(desc) Rank N] ` (desc only for
# named groups); some builds print none.
anchored(RUNTIME, MEMORY_ERROR, 'Memory critical error by agent')
PG_PREFIX = (r"\[(?:PG ID (?P<pg>\d+) PG GUID (?P<guid>[^\s()\]]+)(?:\((?P<desc>[^)\]]*)\))? |"
             r"PG (?P<pg_old>\d+) (?:\((?P<desc_old>[^)\]]*)\) )?)?"      # 2.4's `[PG 0 (default_pg) Rank 12]`
             r"Rank (?P<rank>\d+)\] ")
COLLECTIVE_TIMEOUT = re.compile(rf"(?:{PG_PREFIX})?Watchdog caught collective operation timeout: "
                                r"Work\w*\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)"
                                r"(?:, NumelIn=(?P<numel_in>\d+), NumelOut=(?P<numel_out>\d+))?"
                                r"(?:.*?Timeout\(ms\)=(?P<timeout>\d+))?.*?ran for (?P<ms>\d+) milliseconds")
# ProcessGroupNCCL's heartbeat monitor: the watchdog thread itself made no progress for the heartbeat
# timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, 480 s by default): `{logPrefix()}ProcessGroupNCCL's watchdog got
# stuck for N seconds without making progress in monitoring enqueued collectives.` (ProcessGroupNCCL.cpp's
# HeartbeatMonitor; the prefix may be printed twice, `[PG 0 Rank 25] [PG 0 Rank 25] `)
WATCHDOG_STUCK = re.compile(rf"(?:{PG_PREFIX})*(?P<cls>ProcessGroup\w*)'s watchdog got stuck for (?P<s>\d+) seconds")
anchored(RUNTIME, WATCHDOG_STUCK, "'s watchdog got stuck for ")
# The watchdog thread rethrows the GPU error its work hit: the error text follows the prefix.
WATCHDOG_EXCEPTION = re.compile(rf"(?:{PG_PREFIX})?Process group watchdog thread terminated with exception: "
                                r"(?P<text>(?:(?P<api>CUDA|HIP) error: )?[^\n]*[^\s])")
# ProcessGroupNCCL's watchdog after an error or timeout: the work it stopped at and how far each side got
anchored(RUNTIME, WATCHDOG_EXCEPTION, 'Process group watchdog thread terminated with exception: ')
# in each version's words: 2.3 `Timeout at NCCL work: N, last enqueued NCCL work: E, last completed NCCL work:
# C.`, 2.4-2.6 `Exception (either an error or timeout) detected by watchdog at work: N, last enqueued NCCL work: E,
# ...`, 2.7+ ` failure detected by watchdog at work sequence id: N PG status: last enqueued work: E, last
# completed work: C` (its prefix and text with two spaces between)
WORK_HEADS = ("Exception (either an error or timeout) detected by watchdog at work: ", "Timeout at NCCL work: ",
              "failure detected by watchdog at work sequence id: ")
WATCHDOG_WORK = re.compile(rf"(?:{PG_PREFIX})? ?(?:" + "|".join(map(re.escape, WORK_HEADS)) + r")"
                           r"(?P<work>\d+)(?:, | PG status: )last enqueued (?:NCCL )?work: (?P<enq>-?\d+), "
                           r"last completed (?:NCCL )?work: (?P<done>-?\d+)")
# Every rank's heartbeat monitor after a collective timeout (ProcessGroupNCCL.cpp
# getNCCLWatchdogTimeoutErrorMsg, 2.4+): `{logPrefix}Received a dump signal due to a collective timeout from
# {this local rank | rank N} and we will try our best to dump the debug info. Last enqueued NCCL work: E, last
# completed NCCL work: C.`: whose watchdog timed out, and how far this rank's group got.
DUMP_SIGNAL = re.compile(rf"(?:{PG_PREFIX})?Received a dump signal due to a collective timeout from\s+"
                         r"(?P<whom>this local rank|rank (?P<from>\d+))"
                         r"(?:.*?Last enqueued (?:NCCL )?work: (?P<enq>-?\d+), "
                         r"last completed (?:NCCL )?work: (?P<done>-?\d+))?")
anchored(RUNTIME, DUMP_SIGNAL, "Received a dump signal due to a collective timeout")
# Device-side asserts. CUDA's `__assertfail` (closed source; the shape every PyTorch index assert
# prints): `file:line: function: block: [x,y,z], thread: [x,y,z] Assertion `expr` failed.`;
# HIP's hip_assert.h:49 (clr f9f995c): "%s:%u: %s: Device-side assertion `%s' failed.\n".
# The function may hold ": " (templates, `operator()`), so it ends where the fixed text starts;
# Windows builds print no function (`C:\\...\\IndexKernel.cu:91: block: [26,0,0], ...`).
anchored(RUNTIME, WATCHDOG_WORK, *WORK_HEADS)
ASSERT_FILE = r"(?P<file>(?:[A-Za-z]:)?[^\s:]+):(?P<line>\d+): "
CUDA_ASSERT_HEAD = (ASSERT_FILE + r"(?:(?P<func>[^\n]+?): )?block: \[(?P<block>\d+,\d+,\d+)\], "
                    r"thread: \[(?P<thread>\d+,\d+,\d+)\] Assertion `")
HIP_ASSERT_HEAD = ASSERT_FILE + r"(?P<func>[^\n]+?): Device-side assertion `"
CUDA_ASSERT = re.compile(CUDA_ASSERT_HEAD + r"(?P<expr>[^\n]*)` failed\.")
anchored(RUNTIME, CUDA_ASSERT, '] Assertion `')
HIP_ASSERT = re.compile(HIP_ASSERT_HEAD + r"(?P<expr>[^\n]*)' failed\.")
# the same lines cut after the assertion's start (a paste's last line, a log's size limit)
anchored(RUNTIME, HIP_ASSERT, ': Device-side assertion `')
CUDA_ASSERT_CUT = re.compile(CUDA_ASSERT_HEAD + r"(?P<expr>[^\n`]*)$")
anchored(RUNTIME, CUDA_ASSERT_CUT, '] Assertion `')
HIP_ASSERT_CUT = re.compile(HIP_ASSERT_HEAD + r"(?P<expr>[^\n']*)$")
# rocm-debug-agent
anchored(RUNTIME, HIP_ASSERT_CUT, ': Device-side assertion `')
anchored(RUNTIME, COLLECTIVE_TIMEOUT, 'Watchdog caught collective operation timeout')
WAVE = re.compile(
    r"wave_(?P<wave>\d+): pc=(?P<pc>0x[0-9a-f]+)(?: \(kernel_code_entry=(?:(?P<kce>0x[0-9a-f]+) <(?P<sym>.*?)>"
    r"|not available)(?:, kernargs=(?P<kargs>0x[0-9a-f]+))?\))? \((?:stopped, reason: (?P<reasons>[A-Z0-9_|]+)"
    r"|(?P<running>running))\)")
anchored(RUNTIME, WAVE, 'wave_')
DISASM_START = re.compile(r"Disassembly for function (?P<sym>.+?):\s*$")
anchored(RUNTIME, DISASM_START, 'Disassembly for function ', after=400)
CODE_OBJECT = re.compile(r"^\s*code object: (?P<uri>\S+)")
continuation(RUNTIME, CODE_OBJECT)
LOADED_AT = re.compile(r"^\s*loaded at: \[(?P<lo>0x[0-9a-f]+)-(?P<hi>0x[0-9a-f]+)\]")
continuation(RUNTIME, LOADED_AT)
DISASM_INSN = re.compile(r"^\s*(?:(?P<mark>=>)\s*)?(?P<addr>0x[0-9a-f]+) <\+(?P<off>\d+)>:\s*(?P<insn>.*)$")
continuation(RUNTIME, DISASM_INSN)
SOURCE_LINE = re.compile(r"^(?P<line>\d+)\s{2,}(?P<text>.*)$")
continuation(RUNTIME, SOURCE_LINE)
AGENT_QUEUE_ERROR = re.compile(r"^Queue error \((?P<status>HSA_(?:EXT_)?STATUS_[A-Z_]+): ?(?P<desc>.*)\)\s*$")
anchored(RUNTIME, AGENT_QUEUE_ERROR, 'Queue error (')
SYSTEM_EVENT = re.compile(r"System event \((?P<event>HSA_AMD_GPU_\w+): (?P<reasons>.*)\)")
anchored(RUNTIME, SYSTEM_EVENT, 'System event (')
FAULTING_PAGE = re.compile(r"Faulting page: (?P<addr>0x[0-9a-f]+)")
anchored(RUNTIME, FAULTING_PAGE, 'Faulting page: ')
V1_HEADER = re.compile(r"\[rocr debug agent\]:")
anchored(RUNTIME, V1_HEADER, '[rocr debug agent]:', after=64)
V1_FAULT = re.compile(r"Memory access fault at GPU Node: (?P<node>\d+)")
anchored(RUNTIME, V1_FAULT, 'Memory access fault at GPU Node: ')
V1_ADDRESS = re.compile(r"^Address: 0x(?P<addr>[0-9A-Fa-f]+)xxx \((?P<reasons>[^)]*)\)")
continuation(RUNTIME, V1_ADDRESS)
V1_WAVES = re.compile(r"(?<!\d)(?P<n>\d+) wavefront\(s\) found in @PC: 0x(?P<pc>[0-9A-Fa-f]+)")
anchored(RUNTIME, V1_WAVES, 'wavefront(s) found in @PC')
V1_EXEC = re.compile(r"^\s*EXEC: 0x(?P<exec>[0-9A-Fa-f]+)")
# ROCclr dispatch information
continuation(RUNTIME, V1_EXEC)
SHADER_NAME = re.compile(r"ShaderName : (?P<kernel>\S+)")
anchored(RUNTIME, SHADER_NAME, 'ShaderName : ')
AQL_PACKET = re.compile(
    r"HWq=(?P<hwq>0x[0-9a-f]+),.*?Dispatch Header = ?0x[0-9a-f]+ .*?grid=\[(?P<grid>[\d, ]+)\], "
    r"workgroup=\[(?P<wg>[\d, ]+)\].*?kernel_obj=(?P<kobj>0x[0-9a-f]+)(?:.*?correlation_id=(?P<corr>\d+))?")
anchored(RUNTIME, AQL_PACKET, 'Dispatch Header')
KERNEL_NAME = re.compile(r"^\s*Kernel Name: (?P<kernel>\S.*?)\s*$")
# MIOPEN_ENABLE_LOGGING=1 with MIOPEN_LOG_LEVEL>=5: one line per kernel MIOpen runs
anchored(RUNTIME, KERNEL_NAME, 'Kernel Name: ')
MIOPEN_RUN = re.compile(r"MIOpen\(\w+\): Info2 \[run\] kernel_name = (?P<kernel>[^,\s]+)")
anchored(RUNTIME, MIOPEN_RUN, '[run] kernel_name = ')
VGPU = re.compile(r"VGPU=(?P<vgpu>0x[0-9a-f]+) SWq=(?P<swq>0x[0-9a-f]+), HWq=(?P<hwq>0x[0-9a-f]+), id=(?P<id>\d+)")
# the other outcomes of ROCclr's per-queue analysis at an abort (no kernel packet shown)
anchored(RUNTIME, VGPU, 'VGPU=')
QUEUE_STATE = re.compile(
    r"VGPU\((?P<vgpu>0x[0-9a-f]+)\) Queue\((?P<queue>0x[0-9a-f]+)\)(?:(?P<idle> is idle)|"
    r" rptr=(?P<rptr>\d+), wptr=(?P<wptr>\d+)\.(?P<barrier> A barrier packet in the queue!)|"
    r"\.(?P<nokernel> Couldn't find kernel)|\.(?P<nopacket> Couldn't find the hang AQL packet!))")
anchored(RUNTIME, QUEUE_STATE, 'VGPU(')
HANG_FIELD = {
    "grid": re.compile(r"grid=\[(?P<grid>[\d, ]+)\], workgroup=\[(?P<wg>[\d, ]+)\]"),
    "kobj": re.compile(r"kernel_obj=(?P<kobj>0x[0-9a-f]+)"),
    "corr": re.compile(r"correlation_id=(?P<corr>\d+)"),
    "ptr": re.compile(r"rptr=(?P<rptr>\d+), wptr=(?P<wptr>\d+)"),
}
# also tried with nothing open: the tail of a block whose head was cut off
for _field, _anchor in (("grid", "grid=["), ("kobj", "kernel_obj="), ("corr", "correlation_id="), ("ptr", "rptr=")):
    anchored(RUNTIME, HANG_FIELD[_field], _anchor)
# core dumps (reference/gpu_coredumps.md §1.6 for ROCr, §4 for the CUDA driver's progress lines) and aborts
ROCR_CORE_LINES = [    # (event, failed, regex); the first that matches wins
    ("truncated", False, re.compile(r"Core limit file reached\. GPU core dump created: (?P<file>\S+)|"
                                    r"Core file size limit reached, truncating at segment \d+")),
    ("created", False, re.compile(r"GPU core dump created: (?P<file>\S+)|File (?P<file2>gpucore\.\S+) created")),
    ("writing", False, re.compile(r"Generating GPU core dump to: (?P<file>\S+)")),
    ("writing", False, re.compile(r"Generating GPU core dump via pipe handler")),
    ("created", False, re.compile(r"GPU core dump sent to pipe handler")),     # the pipe's "created"
    ("skipped-pc-sampling", True, re.compile(r"GPU core dump skipped because PC Sampling active")),
    ("directory-unwritable", True, re.compile(r"GPU coredump: Directory (?P<file>.+?) not writable or does not exist")),
    ("file-exists", True, re.compile(r"Failed to create GPU coredump: File exists")),
    ("pipe-handler-missing", True, re.compile(r"GPU coredump: (?:execvp failed: .*|Pipe handler '.*?' not found or not "
                                              r"executable\.?|System pipe patterns not supported in containers\.?)")),
    ("handler-error", True, re.compile(r"GPU coredump: handler exited with error(?: \(status: -?\d+\))?")),
    ("fallback-file", False, re.compile(r"Falling back to file-based dump.*|GPU coredump: kernel core_pattern is a pipe "
                                        r"handler; falling back to local file.*")),
    ("debugger-conflict", True, re.compile(r"Failed to enable debug interface, debugger might be already attached\.?")),
    ("failed", True, re.compile(r"Failed to create GPU coredump: .*|GPU core ?dump failed|Failed to fetch queues "
                                r"snapshot\.|Failed to collect queue info, aborting core dump|Failed to write (?:ELF "
                                r"header|segment data).*|"
                                # amd_core_dump.cpp (rocm-systems 1b1610f) :145, :131, :185, :411 ("white" sic)
                                r"Failed to fetch (?:agents snapshot|driver ABI version)\.|Failed to build the "
                                r"NT_AMDGPU_CORE_STATE note\.|Failed to white core dump.*")),
]
# ROCr's and the CUDA driver's dump lines are tried only on a line holding one of these words
CORE_WORDS = ("coredump", "core dump", "debug interface", "gpucore", "file-based dump", "snapshot.", "ABI version",
              "CORE_STATE")
words(RUNTIME, *CORE_WORDS)
words(RUNTIME, "core file", ignore_case=True)
continuation(RUNTIME, *(rx for _, _, rx in ROCR_CORE_LINES))
CUDA_PROGRESS = re.compile(r"coredump: (?P<msg>.*)$")
anchored(RUNTIME, CUDA_PROGRESS, 'coredump: ')
CUDA_DUMP_START = "coredump: Starting GPU coredump generation"     # the CUDA driver's first and last lines
CUDA_DUMP_END = "coredump: All done"
CUDA_EXCEPTION = re.compile(r"Detected an exception of type (?P<exc>\w+)(?: \((?P<code>\d+)\))?")
anchored(RUNTIME, CUDA_EXCEPTION, 'Detected an exception of type ')
CUDA_FIELD = re.compile(r"^\s*- (?P<key>Device|SM|Warp|PC)[: ]\s*(?P<value>.+?)\s*$")
CUDA_FRAME = re.compile(r"^\s*#(?P<n>\d+)\s+(?P<pc>0x[0-9a-f]+)\s+(?P<fn>\S.*?)\s*$")
CUDA_WRITING = re.compile(r"Writing ELF file to (?P<file>\S+)")
continuation(RUNTIME, CUDA_FIELD)
continuation(RUNTIME, CUDA_FRAME)
anchored(RUNTIME, CUDA_WRITING, 'Writing ELF file to ')
# bash pads the job status to a column: `line 14:  5901 Aborted                    (core dumped) cmd`
ABORT = re.compile(r"(Aborted\s+\(core dumped\)|^Aborted$|\bAborted\s+\"|Fatal Python error: (?P<fatal>\w+)|"
                   r"\*\*\* SIGABRT received|Signal: Aborted \(6\)|exitcodes? \[?(?P<codes>[-\d, ]+)\]?|"
                   r"failed \(exitcode: (?P<exitcode>-?\d+)\))")
# PyTorch / HIP / CUDA
# Every unbounded run starts where a run of its characters starts (lookbehind): a 100 KB line of
# word characters costs one attempt, not one per position.
anchored(RUNTIME, ABORT, 'Aborted', 'Fatal Python error: ', 'SIGABRT received', 'exitcode')
TORCH_ERROR = re.compile(r"(?:(?<![\w.])(?P<exc>[\w.]+(?:Error|Exception)): )?(?P<api>HIP|CUDA) error: "
                         r"(?P<text>[^\n]*[^\s])")
# ggml's error record (ggml/src/ggml-cuda/ggml-cuda.cu ggml_cuda_error; the CANN, SYCL and MUSA backends
# print the same): `{CUDA|ROCm|MUSA} error: MSG`, `  current device: D, in function F at FILE:LINE`,
# `  STMT` (the checked call; some forks print its name alone), and GGML_ABORT's `FILE:LINE: CUDA error`
# before or after them. ggml's assert: GGML_ABORT("GGML_ASSERT(%s) failed") through ggml_abort's
# `FILE:LINE: ` prefix; before mid-2024, `GGML_ASSERT: FILE:LINE: EXPR`.
GGML_SITE = re.compile(r"^\s*current device: (?P<dev>-?\d+), in function (?P<func>\S+) "
                       r"at (?P<file>.+?):(?P<line>\d+)\s*$")
GGML_CALL = re.compile(r"^\s*(?P<call>[A-Za-z_][\w:]*(?:\s?\(.*\))?)\s*$")
continuation(RUNTIME, GGML_CALL)        # read only on the line after a GGML_SITE line
GGML_ASSERT = re.compile(r"(?P<file>(?:[A-Za-z]:)?[^\s:]+):(?P<line>\d+): (?P<what>GGML_ASSERT\((?P<expr>.*)\) failed)"
                         r"|GGML_ASSERT: (?P<old_file>(?:[A-Za-z]:)?[^\s:]+):(?P<old_line>\d+): (?P<old_expr>.*\S)")
anchored(RUNTIME, GGML_SITE, "current device: ")
anchored(RUNTIME, GGML_ASSERT, ") failed", "GGML_ASSERT: ")


# Triton's launchers (triton/backends/nvidia/driver.c gpuAssert: "Triton Error [CUDA]: %s" with
# cuGetErrorString's text; the AMD backend's "%s Code: %d, Messsage: %s" after "Triton Error [HIP]: ",
# spelled "Message" in later releases)
TRITON_ERROR = re.compile(r"(?:(?<![\w.])(?P<exc>[\w.]+(?:Error|Exception)): )?Triton Error \[(?P<api>CUDA|HIP)\]:\s+"
                          r"(?:Code: (?P<code>\d+), Mess+age: )?(?P<text>[^\n]*[^\s])")
# NVIDIA Warp's check_cuda_result (warp/native/warp.cu): "Warp CUDA error %u: %s (%s:%d)", newer
# "Warp CUDA error %u: %s (in function %s, %s:%d)"; the place is Warp's own host call, not a kernel
anchored(RUNTIME, TRITON_ERROR, 'Triton Error [')
WARP_CUDA_ERROR = re.compile(r"Warp CUDA error (?P<code>\d+): (?P<text>[^()\n]+?) \((?:in function (?P<func>[^,]+), )?"
                             r"(?P<where>[^()\s]+:\d+)\)")
anchored(RUNTIME, WARP_CUDA_ERROR, 'Warp CUDA error ')
anchored(RUNTIME, TORCH_ERROR, 'HIP error: ', 'CUDA error: ')
ERROR_ENUM = re.compile(r"Search for `(?P<enum>(?:hip|cuda)Error\w+)'")
anchored(RUNTIME, ERROR_ENUM, 'Search for `')
C10_ERROR = re.compile(r"what\(\):\s+(?P<text>.+)$")
anchored(RUNTIME, C10_ERROR, 'what():')
# Python tracebacks and faulthandler dumps
TRACEBACK_START = re.compile(r"Traceback \(most recent call last\):")
anchored(RUNTIME, TRACEBACK_START, 'Traceback (most recent call last):', after=64)
PY_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
anchored(RUNTIME, PY_FRAME, 'File "')
FAULTHANDLER_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>.+?)\s*$')
anchored(RUNTIME, FAULTHANDLER_FRAME, 'File "')
EXCEPTION_LINE = re.compile(r"^(?P<exc>[A-Za-z_][\w.]*)(?::|$)")
continuation(RUNTIME, EXCEPTION_LINE)
PROCESS_HEADER = re.compile(r"^Process (?P<name>[\w-]+):\s*$")
# kernel attribution hints from libraries
anchored(RUNTIME, PROCESS_HEADER, 'Process ')
HINTS = [
    ("miopen-prepare", re.compile(r"Preparing kernel: (?P<k>\S+)")),
    ("aiter-load", re.compile(r"\[aiter\] LoadKernel: (?P<k>\S+)")),
    ("offload-kernel", re.compile(r"Kernel 'omp target in (?P<k>[^']+)'")),
    ("triton-jit", re.compile(r"Triton kernel JIT compilation during inference: (?P<k>\S+)")),
]
for _kind, _rx in HINTS:
    # (the words without the space before the name: a wrap may have cut there)
    anchored(RUNTIME, _rx, _rx.pattern.split("(?P<k>")[0].replace("\\[", "[").replace("\\]", "]").rstrip())
def _head_ends(rx: re.Pattern, line: str) -> bool:
    """The line ends with a hint's fixed words, its name cut off onto the next line."""
    head = rx.pattern.split("(?P<k>")[0].replace("\\[", "[").replace("\\]", "]").rstrip()
    return line.rstrip().endswith(head)


NEARBY_MAP_ROW = re.compile(r"^(?P<base>0x[0-9a-f]+), (?P<size>0x[0-9a-f]+), (?P<kind>System|VRAM|Scratch|LDS|Non-HSA)\s*$")
# Foreign prefixes: log collectors' timestamps, worker tags, ctest indices, markdown quotes.
# One separator after the stamp (a space, or ComfyUI's " - "), so the line's own indentation stays:
# a traceback's "  File ..." lines are told apart by it.
anchored(RUNTIME, NEARBY_MAP_ROW, ', System', ', VRAM', ', Scratch', ', LDS', ', Non-HSA')
ISO_PREFIX = re.compile(r"^(?P<iso>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)(?: - | )")
# `[2024-01-30 16:04:38.855]`, and SGLang's `[2026-11-20 10:17:42 TP1]` / `[... DP0 TP3 EP3]`
continuation(RUNTIME, ISO_PREFIX)
BRACKET_TS_PREFIX = re.compile(r"^\[(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?)"
                               r"(?: (?P<rank>(?:[A-Z]{2}\d+ ?)+))?\]\s*")
# `(Worker_TP3 pid=891)`, Ray's `(RayWorkerWrapper pid=13270, ip=10.0.4.17)`; nested tags (vLLM's engine
# core around a Ray worker) are peeled one by one, the innermost naming the process.
continuation(RUNTIME, BRACKET_TS_PREFIX)
WORKER_TAG = re.compile(r"^\((?P<tag>[^()]*?pid=(?P<pid>\d+)(?:,\s*ip=[\w.:]+)?)\)\s*:?\s*")
continuation(RUNTIME, WORKER_TAG)
# torchrun's per-line prefix (torch.distributed.elastic, `--tee`/`--log-line-prefix-template` default):
# `[rank3]:` (2.2+), `[default3]:` (the role's local rank, before)
RANK_TAG = re.compile(r"^\[(?P<tag>(?:rank|default)\d{1,5})\]:\s?")
continuation(RUNTIME, RANK_TAG)
CTEST_TAG = re.compile(r"^(?P<tag>\d{1,4}): (?=\S)")
# vLLM's logger (vllm/logger.py `_FORMAT`: "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s",
# datefmt "%m-%d %H:%M:%S"; 2024 builds without the `[`), repeated before every line of a multi-line
# message by its NewLineFormatter: a traceback's lines each carry it, their indentation after it.
VLLM_PREFIX = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? "
                         r"\[?[\w.-]+:\d+\] ")
continuation(RUNTIME, VLLM_PREFIX)
continuation(RUNTIME, CTEST_TAG)
QUOTE = re.compile(r"^(?:>\s?)+")
continuation(RUNTIME, QUOTE)


def _split_prefix(text: str) -> tuple[str, str | None, int | None, Stamp | None]:
    """Remove collector prefixes; return (rest, process tag, pid, stamp)."""
    tag = pid = stamp = None
    rest = QUOTE.sub("", text)
    for _ in range(3):
        m = ISO_PREFIX.match(rest) or BRACKET_TS_PREFIX.match(rest)
        if m:
            if m.groupdict().get("rank"):
                tag = m.group("rank").strip()
            stamp = Stamp(raw=m.group("iso"), clock="wall", wall=m.group("iso").replace(" ", "T"))
            rest = rest[m.end():]
            continue
        m = WORKER_TAG.match(rest)
        if m:
            tag, pid = m.group("tag"), int(m.group("pid"))
            rest = rest[m.end():]
            continue
        m = RANK_TAG.match(rest)
        if m:
            tag = f"{tag}, {m.group('tag')}" if tag else m.group("tag")      # the worker's process, and its rank
            rest = rest[m.end():]
            continue
        m = VLLM_PREFIX.match(rest)
        if m:
            stamp = stamp or Stamp(raw=f"{m.group('md')} {m.group('hms')}", clock="wall",
                                   wall=f"{m.group('md')}T{m.group('hms')}", wall_note="vLLM log stamp without a year")
            rest = rest[m.end():]
            continue
        m = CTEST_TAG.match(rest)
        if m and not rest.startswith(m.group("tag") + ": 0x"):
            tag = tag or f"ctest {m.group('tag')}"
            rest = rest[m.end():]
            continue
        break
    return rest, tag, pid, stamp


def _addr(text: str | None) -> int | None:
    if text is None:
        return None
    if text == "(nil)":
        return 0
    try:
        return int(text, 16)
    except ValueError:
        return None


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


class _State:
    """Multi-line state of one parse: traceback, debug-agent block, hang-analysis block."""

    def __init__(self, name: str):
        self.name = name
        self.out = RuntimeLog()
        self.tb: dict | None = None          # open traceback
        self.faulthandler: dict | None = None
        self.disasm: dict | None = None      # open "Disassembly for function" block
        self.disasm_blocks: list[tuple[int, dict]] = []  # (index in waves when closed, block)
        self.hang: Dispatch | None = None    # open ROCclr hang-analysis block
        self.pending_kernel_name: tuple[Origin, str] | None = None
        self.v1: WaveDump | None = None
        self.v1_fault: RuntimeFault | None = None
        self.last_process_header: str | None = None
        self.cuda_exc: dict = {}             # per process: the CUDA driver's open exception report

    def origin(self, line: Line) -> Origin:
        return Origin(self.name, line.no)


def parse_runtime_log(data: bytes | str, name: str = "<runtime log>") -> RuntimeLog:
    """Parse a server/application log. Never raises on bad input; problems are recorded."""
    if isinstance(data, bytes):
        text, problems = decode(data, name)
    else:
        text, problems = data, []
    st = _State(name)
    st.out.problems.extend(problems)
    lines = _Window(LineSource(text))
    i = 0
    while i < len(lines):
        lines.at = i
        line = lines[i]
        if line.cut:
            st.out.problems.append(cut_problem(name, line))
        if not line.boundary and _quiet(st) and not MAY_MATTER.search(line.text):
            # Nothing open and nothing here: pass over every line up to the next that may matter.
            lines.skip_after(i)
            i += 1
            continue
        try:
            consumed = _parse_line(st, lines, i)
        except Exception as exc:  # a parser bug must not cost the rest of the log
            st.out.problems.append(Problem(name, f"internal parser error on this line ({exc!r}); line skipped",
                                           line.no, internal=True))
            consumed = 1
        i += max(consumed, 1)
    _close_all(st)
    _attach_disassembly(st)
    return st.out


class _Window:
    """The lines as a list the matchers index (`lines[i + k]`, `len(lines)`), holding only a few
    around the current one: matchers look at most LOOKAHEAD lines ahead. Indexes count the lines
    read, not the file's lines (Line.no is the file's line number): passed-over lines get none."""
    LOOKAHEAD = 8

    def __init__(self, src: LineSource):
        self.src, self.buf, self.ends, self.idxs, self.first, self.done, self.at = src, [], [], [], 0, False, 0

    def _fill(self, upto: int) -> None:
        while not self.done and self.first + len(self.buf) <= upto:
            line = self.src.next()
            if line is None:
                self.done = True
            else:
                self.buf.append(line)
                self.ends.append(self.src.end)
                self.idxs.append(self.src.idx)
        drop = self.at - 2 - self.first
        if drop > 64:
            del self.buf[:drop], self.ends[:drop], self.idxs[:drop]
            self.first += drop

    def skip_after(self, i: int) -> None:
        """Forget what was read after line i and go on from the next line that may matter."""
        k = i - self.first
        del self.buf[k + 1:], self.ends[k + 1:], self.idxs[k + 1:]
        # Passing over stops at a line that may matter or an elision (MAY_MATTER holds their
        # words); an over-long line passed over is not read at all, so it is not reported.
        self.src.skip_to(self.ends[k], self.idxs[k], MAY_MATTER)
        self.done = False

    def __getitem__(self, j: int) -> Line:
        self._fill(j)
        if j < self.first or j >= self.first + len(self.buf):
            raise IndexError(j)
        return self.buf[j - self.first]

    def __len__(self) -> int:
        self._fill(self.at + self.LOOKAHEAD)
        return self.first + len(self.buf)


_SQUASHED_REASONS = {r.replace(" ", "").lower(): r for r in VM_FAULT_REASONS}


def _broken_reason(after: str) -> str | None:
    """A reason a title or a wrapped paste broke with stray spaces (`supervisor p rivilege`)."""
    m = re.match(r"\s*Reason:\s*([^.]{1,80})", after)
    return _SQUASHED_REASONS.get(m.group(1).replace(" ", "").lower()) if m else None


def _close_all(st: _State) -> None:
    _close_traceback(st, None)
    _close_faulthandler(st)
    _close_disasm(st)
    if st.hang is not None:
        st.out.dispatches.append(st.hang)
        st.hang = None
    if st.v1 is not None:
        st.out.waves.append(st.v1)
        st.v1 = None


# A line with none of the anchors declared above, while no multi-line record is open, is passed
# over without running the ~40 patterns (most lines of a server log); the same anchors pick the
# lines of a big file that are read at all (ingest.prefilter). Excerpt marks close open records.
words(RUNTIME, "---", "[...]", "[\u2026]", "snip", "truncated", "cut]", "cut>", ignore_case=True)
MAY_MATTER = may_matter(RUNTIME)


def _quiet(st: _State) -> bool:
    return (st.tb is None and st.faulthandler is None and st.disasm is None and st.hang is None and st.v1 is None
            and st.pending_kernel_name is None and not st.cuda_exc)


def _parse_line(st: _State, lines: list[Line], i: int) -> int:
    line = lines[i]
    if line.boundary:
        _close_all(st)
        return 1
    rest, tag, pid, stamp = _split_prefix(line.text)
    org = st.origin(line)

    if st.tb is not None and _continue_traceback(st, rest, org):
        return 1
    if st.faulthandler is not None and _continue_faulthandler(st, rest):
        return 1
    if st.disasm is not None and _continue_disasm(st, rest):
        return 1
    if st.hang is not None and _continue_hang(st, rest):
        return 1

    consumed = 1
    faults_before = len(st.out.faults)
    m = VM_FAULT.search(rest)
    if m:
        reason = m.group("reason") or _broken_reason(rest[m.end():])
        st.out.faults.append(RuntimeFault(
            kind="vm-fault", origin=org, text=m.group(0), node=int(m.group("node")),
            agent_handle=m.group("agent"), address=_addr(m.group("addr")),
            imprecise=bool(m.group("imprecise")), reason=reason,
            pid=pid, process_tag=tag, stamp=stamp))
        if reason is None:
            st.out.problems.append(Problem(st.name, "fault line cut before its Reason", line.no))
    else:
        m = VM_FAULT_HEAD.search(rest)
        if m and VM_FAULT_CUT_TAIL.fullmatch(rest[m.end():]):
            st.out.faults.append(RuntimeFault(kind="vm-fault", origin=org, text=rest[m.start():].rstrip(),
                                              node=int(m.group("node")), pid=pid, process_tag=tag, stamp=stamp))
            st.out.problems.append(Problem(st.name, "fault line cut before its address: the GPU node is known, "
                                                    "the address and reason are not", line.no))
    m = HW_EXCEPTION.search(rest)
    if m:
        st.out.faults.append(RuntimeFault(
            kind="hw-exception", origin=org, text=m.group(0), node=int(m.group("node")),
            agent_handle=m.group("agent"), reason=m.group("cause"), pid=pid, process_tag=tag, stamp=stamp))
    consumed = max(consumed, _match_callback(st, lines, i, rest, org, tag, pid, stamp))
    consumed = max(consumed, _match_memory_fault_error(st, lines, i, rest, org, tag, pid, stamp))
    m = QUEUE_INACTIVATED.search(rest)
    if m:
        status = None
        if i + 1 < len(lines):
            s = FALLBACK_STATUS.search(lines[i + 1].text)
            status = s.group(1) if s else None
        st.out.faults.append(RuntimeFault(kind="queue-error", origin=org, text=m.group(0), queue=m.group("queue"),
                                          status=status, code=HSA_STATUS_BY_NAME.get(status or ""),
                                          pid=pid, process_tag=tag, stamp=stamp))
    else:
        m = QUEUE_ERROR.search(rest)
        if m and not rest.lstrip().startswith("Queue error ("):
            status = m.group("status")
            st.out.faults.append(RuntimeFault(kind="queue-error", origin=org, text=m.group(0), status=status,
                                              code=HSA_STATUS_BY_NAME.get(status), pid=pid, process_tag=tag,
                                              stamp=stamp))
    m = OFFLOAD.search(rest)
    if m:
        st.out.faults.append(RuntimeFault(kind="offload-fault", origin=org, text=m.group(0), node=int(m.group("dev")),
                                          agent_handle=m.group("agent"), address=_addr(m.group("addr")),
                                          reason=m.group("reasons"), pid=pid, process_tag=tag, stamp=stamp))
    m = HSAKMT.search(rest)
    if m:
        # libhsakmt's own analysis of the fault (HSAKMT_DEBUG_LEVEL >= 3); the next line says
        # whether the address lies in a buffer it knows: outside every buffer is an out-of-bounds access.
        buf = HSAKMT_BUFFER.search(lines[i + 1].text) if i + 1 < len(lines) and not lines[i + 1].boundary else None
        where = None
        if buf:
            where = ("in no known buffer" if buf.group("none") else
                     f"in the buffer at {buf.group('base')} of {int(buf.group('size'), 16)} bytes")
        st.out.faults.append(RuntimeFault(kind="hsakmt-fault", origin=org, text=m.group(0), node=int(m.group("node")),
                                          address=_addr(m.group("addr")), reason=m.group("why"), buffer=where,
                                          pid=pid, process_tag=tag, stamp=stamp))
    m = COLLECTIVE_TIMEOUT.search(rest)
    if m:
        st.out.faults.append(RuntimeFault(kind="collective-timeout", origin=org, text=m.group(0),
                                          reason=f"{m.group('op')} #{m.group('seq')} waited {exact_seconds(int(m.group('ms')))}",
                                          pid=pid, process_tag=_rank_tag(m) or tag, stamp=stamp,
                                          collective=_collective(m)))
    m = WATCHDOG_STUCK.search(rest)
    if m:
        stuck = {"stuck_s": int(m.group("s")), "rank": int(m.group("rank")) if m.group("rank") else None,
                 "process_group": pg_name(m), "monitor": m.group("cls")}
        st.out.faults.append(RuntimeFault(kind="watchdog-stuck", origin=org, text=m.group(0),
                                          reason=f"{m.group('cls')}'s watchdog made no progress for {m.group('s')} s",
                                          pid=pid, process_tag=_rank_tag(m) or tag, stamp=stamp,
                                          collective={k: v for k, v in stuck.items() if v is not None}))
    m = MEMORY_ERROR.search(rest)
    if m:
        st.out.faults.append(RuntimeFault(kind="memory-error", origin=org, text=m.group(0), node=int(m.group("node")),
                                          agent_handle=m.group("agent"), address=_addr(m.group("addr")),
                                          reason=m.group("reason"), pid=pid, process_tag=tag, stamp=stamp))

    if len(st.out.faults) == faults_before:
        # What users quote: a status line with no callback prefix around it.
        m = BARE_STATUS.search(rest)
        if m and not rest.lstrip().startswith("Queue error ("):
            status, code = m.group("status"), m.group("code") or m.group("code2")
            st.out.faults.append(RuntimeFault(kind="queue-error", origin=org, text=m.group(0).strip(), status=status,
                                              code=int(code, 16) if code else HSA_STATUS_BY_NAME.get(status),
                                              pid=pid, process_tag=tag, stamp=stamp))
    _match_debug_agent(st, rest, org, pid, tag)
    _match_dispatch_info(st, rest, org, line)
    if not _match_device_assert(st, rest, org, pid, tag):
        # (a line that is a runtime fault already, `hipErrorX ... HSA_STATUS_...`, is that one event)
        seen = len(st.out.host_errors)
        _match_host_errors(st, rest, org, tag, general=len(st.out.faults) == faults_before)
        for err in st.out.host_errors[seen:]:
            err.pid, err.process_tag = pid, tag      # the launcher's worker tag or rank on the line
    _match_ggml(st, rest, org, tag, lines, i)
    _match_tracebacks(st, rest, org, tag)
    _match_core_dump(st, rest, org, pid, tag)
    _match_notes(st, rest, org, tag)
    for kind, rx in HINTS:
        h = rx.search(rest)
        if h is None and i + 1 < len(lines) and not lines[i + 1].boundary and _head_ends(rx, rest):
            h = rx.search(rest.rstrip() + " " + lines[i + 1].text.strip())   # a wrap put the name on the next line
        if h:
            st.out.hints.append(Hint(org, kind, h.group("k")))
    return consumed


def _match_callback(st, lines, i, rest, org, tag, pid, stamp) -> int:
    pre = ROCCLR_PREFIX.search(rest)
    m = CALLBACK.search(rest)
    consumed = 1
    if not m and CALLBACK_START.search(rest) and not FALLBACK_CODE.search(rest):
        # Reporter-wrapped line: join the next few lines and try again.
        joined = rest
        for k in range(1, 4):
            if i + k >= len(lines) or lines[i + k].boundary:
                break
            if CALLBACK_START.search(lines[i + k].text):
                break      # the next record's own line: this one's rest is not there (nor further)
            joined += " " + lines[i + k].text.strip()
            m = CALLBACK.search(joined)
            if m:
                consumed = k + 1
                break
    # The ROCclr prefix's pid and microsecond stamp belong to the record, whole or cut.
    p = (pre.group("pid_a") or pre.group("pid_b")) if pre else None
    pid = int(p) if p else pid
    if pre and pre.group("us"):
        stamp = Stamp(raw=pre.group("us") + " us", clock="rocclr-us", seconds=int(pre.group("us")) / 1e6)
    if m:
        code = int(m.group("code") or m.group("code_old"), 16)
        status = m.group("status")
        if status in (None, "(null)"):
            status = None
        st.out.faults.append(RuntimeFault(
            kind="queue-callback", origin=org, text=m.group(0).strip(), code=code, status=status,
            queue=m.group("queue"), gpu_index=int(m.group("gpu")) if m.group("gpu") else None,
            kernel=(m.group("kernel") or None), host=m.group("host"), pid=pid, process_tag=tag, stamp=stamp,
            rocclr_line=int(pre.group("line")) if pre else None))
        return consumed
    if CALLBACK_START.search(rest) or "aborting with" in rest:
        s = FALLBACK_STATUS.search(rest)
        code = FALLBACK_CODE.search(rest)
        if s is None and i + 1 < len(lines) and not lines[i + 1].boundary:
            # a wrap put the status on the next line (`aborting with error :` / `HSA_STATUS_...: ...`)
            nxt = lines[i + 1].text
            s2 = FALLBACK_STATUS.match(nxt.lstrip())
            if s2 is not None:
                s, code, consumed = s2, code or FALLBACK_CODE.search(nxt), 2
        st.out.faults.append(RuntimeFault(
            kind="queue-callback", origin=org, text=rest.strip(), status=s.group(1) if s else None,
            code=int(code.group(1), 16) if code else (HSA_STATUS_BY_NAME.get(s.group(1)) if s else None),
            pid=pid, process_tag=tag, stamp=stamp, rocclr_line=int(pre.group("line")) if pre else None))
        st.out.problems.append(Problem(st.name, "queue-callback line is cut or mangled; status/code recovered "
                                                "by the fallback pattern where present", org.line))
    return consumed


def _match_memory_fault_error(st, lines, i, rest, org, tag, pid, stamp) -> int:
    if "Memory Fault Error [" not in rest:
        return 1
    joined, consumed = rest, 1
    m = MEMORY_FAULT_ERROR.search(joined)
    k = 1
    while not m and k <= 4 and i + k < len(lines) and not lines[i + k].boundary:
        joined += " " + _split_prefix(lines[i + k].text)[0].strip()
        consumed = k + 1
        m = MEMORY_FAULT_ERROR.search(joined)
        k += 1
    if not m:
        st.out.problems.append(Problem(st.name, "'Memory Fault Error [' without its closing bracket (cut line)",
                                       org.line))
        return 1
    kernel = re.sub(r"\s+", " ", m.group("kernel")).strip()
    if kernel in ("<not identified>", ""):
        kernel = None
    st.out.faults.append(RuntimeFault(
        kind="memory-fault-error", origin=org, text=re.sub(r"\s+", " ", m.group(0)),
        gpu_index=int(m.group("gpu")), address=_addr(m.group("addr")), kernel=kernel, host=m.group("host"),
        pid=pid, process_tag=tag, stamp=stamp))
    return consumed


# ---------------- rocm-debug-agent ----------------

def _match_debug_agent(st: _State, rest: str, org: Origin, pid, tag) -> None:
    m = WAVE.search(rest)
    if m:
        reasons = m.group("reasons").split("|") if m.group("reasons") else []
        gen = "v2-kernargs" if m.group("kargs") else ("v2-kernel-entry" if "kernel_code_entry" in rest else "v2")
        st.out.waves.append(WaveDump(
            origin=org, generation=gen, wave=int(m.group("wave")), pc=int(m.group("pc"), 16),
            kernel=m.group("sym"), kernel_code_entry=_addr(m.group("kce")), kernargs=_addr(m.group("kargs")),
            reasons=reasons, running=bool(m.group("running")), pid=pid, process_tag=tag))
        return
    m = DISASM_START.search(rest)
    if m:
        _close_disasm(st)
        st.disasm = {"kernel": m.group("sym"), "origin": org, "lines": [], "source": [], "uri": None,
                     "loaded": None, "marked": None}
        return
    m = AGENT_QUEUE_ERROR.search(rest)
    if m:
        st.out.faults.append(RuntimeFault(kind="queue-error", origin=org, text=m.group(0).strip(),
                                          status=m.group("status"), code=HSA_STATUS_BY_NAME.get(m.group("status")),
                                          pid=pid, process_tag=tag))
        return
    m = SYSTEM_EVENT.search(rest)
    if m:
        st.out.faults.append(RuntimeFault(kind="system-event", origin=org, text=m.group(0),
                                          status=m.group("event"), reason=m.group("reasons"), pid=pid,
                                          process_tag=tag))
        return
    m = FAULTING_PAGE.search(rest)
    if m:
        for f in reversed(st.out.faults):
            if f.kind == "system-event" and f.address is None:
                f.address = int(m.group("addr"), 16)
                break
        else:
            st.out.faults.append(RuntimeFault(kind="system-event", origin=org, text=m.group(0),
                                              address=int(m.group("addr"), 16)))
        return
    # v1 agent (ROCm 1.9-3.x)
    if V1_HEADER.search(rest):
        if st.v1 is not None:
            st.out.waves.append(st.v1)
        st.v1 = WaveDump(origin=org, generation="v1")
        return
    m = V1_FAULT.search(rest)
    if m:
        st.v1_fault = RuntimeFault(kind="debug-agent-fault", origin=org, text=m.group(0),
                                   node=int(m.group("node")), pid=pid, process_tag=tag)
        st.out.faults.append(st.v1_fault)
        return
    m = V1_ADDRESS.match(rest)
    if m and st.v1_fault is not None:
        # v1 prints the page number with the last three hex digits as "xxx".
        st.v1_fault.address = int(m.group("addr"), 16) << 12
        st.v1_fault.reason = m.group("reasons").rstrip(";")
        return
    m = V1_WAVES.search(rest)
    if m:
        if st.v1 is None:
            st.v1 = WaveDump(origin=org, generation="v1")
        st.v1.pc = int(m.group("pc"), 16)
        st.v1.waves_at_pc = int(m.group("n"))
        st.v1.reasons = ["MEMORY_VIOLATION"] if st.v1_fault else []
        return
    m = V1_EXEC.match(rest)
    if m and st.v1 is not None:
        st.v1.exec_mask = m.group("exec")


def _continue_disasm(st: _State, rest: str) -> bool:
    d = st.disasm
    if rest.strip() == "End of disassembly.":
        _close_disasm(st)
        return True
    m = CODE_OBJECT.match(rest)
    if m:
        d["uri"] = m.group("uri")
        return True
    m = LOADED_AT.match(rest)
    if m:
        d["loaded"] = (int(m.group("lo"), 16), int(m.group("hi"), 16))
        return True
    m = DISASM_INSN.match(rest)
    if m:
        d["lines"].append(rest.rstrip())
        if m.group("mark"):
            d["marked"] = int(m.group("addr"), 16)
        return True
    if SOURCE_LINE.match(rest) or rest.rstrip().endswith(":") or not rest.strip():
        if rest.strip():
            d["source"].append(rest.rstrip())
            d["lines"].append(rest.rstrip())
        return True
    # Anything else ends a block that lost its terminator (curated or cut excerpts).
    _close_disasm(st)
    return False


def _close_disasm(st: _State) -> None:
    if st.disasm is not None:
        st.disasm_blocks.append((len(st.out.waves), st.disasm))
        st.disasm = None


def _attach_disassembly(st: _State) -> None:
    """A disassembly block belongs to the wave printed just before it, or (curated excerpts
    print it first) to the first wave after it."""
    waves = st.out.waves
    for index, block in st.disasm_blocks:
        target = None
        if index > 0 and not waves[index - 1].disassembly and waves[index - 1].generation != "v1":
            target = waves[index - 1]
        elif index < len(waves):
            target = waves[index]
        if target is None:
            target = WaveDump(origin=block["origin"], generation="v2")
            waves.append(target)
        target.disassembly = block["lines"]
        target.source_lines = block["source"]
        target.code_object = block["uri"]
        target.loaded_at = block["loaded"]
        target.marked_pc = block["marked"]
        if not target.kernel:
            target.kernel = block["kernel"]
    # waves of the same dump share the function when only one block was printed
    named = {w.kernel for w in waves if w.kernel and w.generation != "v1"}
    if len(named) == 1:
        only = named.pop()
        for w in waves:
            if w.generation != "v1" and not w.kernel:
                w.kernel = only


# ---------------- ROCclr dispatch information ----------------

def _match_dispatch_info(st: _State, rest: str, org: Origin, line: Line) -> None:
    pre = ROCCLR_PREFIX.search(rest)
    pid = None
    us = None
    if pre:
        p = pre.group("pid_a") or pre.group("pid_b")
        pid = int(p) if p else None
        us = int(pre.group("us")) if pre.group("us") else None
    m = SHADER_NAME.search(rest)
    if m:
        st.out.dispatches.append(Dispatch(org, "shader-name", kernel=m.group("kernel"), pid=pid, us=us))
        return
    m = AQL_PACKET.search(rest)
    if m:
        kernel = None
        # A ShaderName line of the same launch precedes the packet at AMD_LOG_LEVEL>=3.
        for d in reversed(st.out.dispatches[-3:]):
            if d.source == "shader-name" and d.pid == pid and d.hw_queue is None:
                kernel = d.kernel
                break
        st.out.dispatches.append(Dispatch(
            org, "aql-packet", kernel=kernel, hw_queue=m.group("hwq"), kernel_obj=m.group("kobj"),
            grid=_dims(m.group("grid")), workgroup=_dims(m.group("wg")),
            correlation_id=int(m.group("corr")) if m.group("corr") else None, pid=pid, us=us))
        return
    m = KERNEL_NAME.match(rest)
    if m:
        st.pending_kernel_name = (org, m.group("kernel"))
        return
    m = MIOPEN_RUN.search(rest)
    if m:
        st.out.dispatches.append(Dispatch(org, "library-log", kernel=m.group("kernel"), pid=pid, us=us,
                                          library="MIOpen"))
        return
    m = QUEUE_STATE.search(rest)
    if m:
        # ROCclr's analysis of a queue with no kernel packet to show at the abort
        state = ("idle" if m.group("idle") else "barrier" if m.group("barrier") else
                 "no-kernel" if m.group("nokernel") else "no-hang-packet")
        st.out.notes.append(Note(org, "queue-state", m.group(0), {
            "queue": m.group("queue"), "state": state, "pid": pid,
            "rptr": int(m.group("rptr")) if m.group("rptr") else None,
            "wptr": int(m.group("wptr")) if m.group("wptr") else None}))
        return
    m = VGPU.search(rest)
    if m:
        korg, kname = st.pending_kernel_name or (org, None)
        st.pending_kernel_name = None
        st.hang = Dispatch(korg, "hang-analysis", kernel=kname, hw_queue=m.group("hwq"))
        return
    if rest.startswith("\t") and any(rx.search(rest) for rx in HANG_FIELD.values()):
        # tail of a block whose head was cut off: keep what it says
        st.hang = Dispatch(org, "hang-analysis")
        _continue_hang(st, rest)


def _continue_hang(st: _State, rest: str) -> bool:
    d = st.hang
    if not (rest.startswith("\t") or rest.startswith("    ")):
        st.out.dispatches.append(d)
        st.hang = None
        return False
    m = HANG_FIELD["grid"].search(rest)
    if m:
        d.grid, d.workgroup = _dims(m.group("grid")), _dims(m.group("wg"))
    m = HANG_FIELD["kobj"].search(rest)
    if m:
        d.kernel_obj = m.group("kobj")
    m = HANG_FIELD["corr"].search(rest)
    if m:
        d.correlation_id = int(m.group("corr"))
    m = HANG_FIELD["ptr"].search(rest)
    if m:
        d.rptr, d.wptr = int(m.group("rptr")), int(m.group("wptr"))
    return True


# ---------------- host errors, tracebacks, notes ----------------

def _rank_tag(m: re.Match) -> str | None:
    """`rank N` (and the process group's name) from a watchdog line's prefix."""
    if not m.group("rank"):
        return None
    pg = m.group("pg") or m.group("pg_old")
    group = m.group("desc") or m.group("desc_old") or (f"PG {pg}" if pg else None)
    return f"rank {m.group('rank')}" + (f" ({group})" if group else "")


def _match_device_assert(st: _State, rest: str, org: Origin, pid, tag) -> bool:
    m = CUDA_ASSERT.search(rest) or HIP_ASSERT.search(rest)
    if not m:
        m = CUDA_ASSERT_CUT.search(rest.rstrip()) or HIP_ASSERT_CUT.search(rest.rstrip())
        if not m:
            return False
        st.out.problems.append(Problem(st.name, "device assert line cut before its end: the assertion is partial",
                                       org.line))
    cuda = m.re in (CUDA_ASSERT, CUDA_ASSERT_CUT)
    new = DeviceAssert(org, "CUDA" if cuda else "HIP", m.group("file").strip(), int(m.group("line")),
                       (m.group("func") or "").strip() or None, m.group("expr"),
                       _dims(m.group("block")) if cuda else None, _dims(m.group("thread")) if cuda else None,
                       pid=pid, process_tag=tag)
    for old in st.out.device_asserts[-8:]:
        # one line per failing thread: the first keeps its block and thread, the rest are counted
        if (old.runtime, old.file, old.line, old.function, old.assertion, old.pid) == \
                (new.runtime, new.file, new.line, new.function, new.assertion, new.pid):
            old.count += 1
            return True
    st.out.device_asserts.append(new)
    return True


def _add(st: _State, err: HostError, line: str) -> None:
    """A producer's error record, with the error's number from the one table where its text (read
    with the words before it on the line) states it (`CUDA error: an illegal memory access was
    encountered` is 700)."""
    hit = gpu_errors.find(err.text) or gpu_errors.find(line)
    if hit is not None and err.code is None:
        err.code = hit.code
        err.enum = err.enum or hit.name
    st.out.host_errors.append(err)


def _match_ggml(st: _State, rest: str, org: Origin, tag, lines, i: int) -> None:
    """ggml's error check: the device, the reporting function and site and the checked call join
    the error its line before stated; its assert is a report point (where the host aborted)."""
    m = GGML_SITE.match(rest)
    if m:
        err = next((e for e in reversed(st.out.host_errors[-2:]) if org.line - e.origin.line <= 2), None)
        site = f"{m.group('file')}:{m.group('line')} in {m.group('func')}"
        call = None
        if i + 1 < len(lines) and not lines[i + 1].boundary:
            c = GGML_CALL.match(_split_prefix(lines[i + 1].text)[0])
            call = c.group("call") if c else None
        if err is not None and err.reported_in is None:
            err.device, err.reported_in, err.call = int(m.group("dev")), site, call
        exc = f"{err.api} error: {err.text}" if err is not None else None
        st.out.report_points.append(ReportPoint(org, "ggml-error-check", site, exc + (f" at `{call}`" if call else "")
                                                if exc else call, tag))
        return
    m = GGML_ASSERT.search(rest)
    if m and m.group("what"):
        st.out.report_points.append(ReportPoint(org, "ggml-assert", f"{m.group('file')}:{m.group('line')}",
                                                m.group("what"), tag))
    elif m:
        st.out.report_points.append(ReportPoint(org, "ggml-assert", f"{m.group('old_file')}:{m.group('old_line')}",
                                                f"GGML_ASSERT({m.group('old_expr')}) failed", tag))


def _code_of(enum: str) -> int | None:
    hit = gpu_errors.find(enum)
    return hit.code if hit is not None else None


def _match_host_errors(st: _State, rest: str, org: Origin, tag, general: bool = True) -> None:
    m = WARP_CUDA_ERROR.search(rest)
    if m:
        _add(st, HostError(org, "CUDA", f"{m.group('text')} ({m.group('code')})",
                           exception=f"NVIDIA Warp at {m.group('where')}"), rest)
        return
    m = TRITON_ERROR.search(rest)
    if m:
        text = m.group("text") + (f" ({m.group('code')})" if m.group("code") else "")
        _add(st, HostError(org, m.group("api"), text, exception=m.group("exc") or "Triton launcher",
                           code=int(m.group("code")) if m.group("code") else None), rest)
        return
    m = WATCHDOG_EXCEPTION.search(rest)
    if m and "Watchdog caught collective operation timeout" not in m.group("text"):
        # (a rethrown timeout is the collective-timeout fault of the same line, not a GPU error)
        text = m.group("text")
        if m.group("api"):
            text = text[len(m.group("api")) + len(" error: "):]
        _add(st, HostError(org, m.group("api") or "NCCL", text, exception="watchdog thread terminated with exception"),
             rest)
        return
    m = TORCH_ERROR.search(rest)
    # (c10's `terminate called ...` / `  what():  CUDA error: ...` states the error after what())
    if m and (m.group("exc") or rest.lstrip().startswith(("HIP error", "CUDA error")) or "| " in rest
              or re.match(r"\s*what\(\):\s+(?:HIP|CUDA) error: ", rest)):
        _add(st, HostError(org, m.group("api"), m.group("text"), exception=m.group("exc")), rest)
        return
    m = ERROR_ENUM.search(rest)
    if m:
        for err in reversed(st.out.host_errors[-3:]):
            if err.enum is None:
                err.enum = m.group("enum")
                err.code = err.code if err.code is not None else _code_of(m.group("enum"))
                break
        return
    # any other producer's CUDA/HIP error (flashinfer, XLA, NCCL, TensorRT, a program's own print):
    # the runtime's words, enum name or numbered error word anywhere in the line (ingest/gpu_errors)
    # (compute-sanitizer's `Program hit cudaErrorX` is its own reader's API error record)
    hit = gpu_errors.find(rest) if general and not rest.lstrip().startswith(SANITIZER_HEAD) else None
    if hit is not None and (hit.error is None or not hit.error.device) and gpu_errors.WARNING.match(rest):
        hit = None     # a host call's failure a tool only warns of (cuda-gdb's `Returning 201 ... from cuCtxGetDevice`)
    if hit is not None:
        text = hit.text + (f" ({hit.code})" if hit.code is not None else "")
        st.out.host_errors.append(HostError(org, hit.api, text, enum=hit.name, code=hit.code))
        return
    m = C10_ERROR.search(rest)
    if m and "c10" not in rest:
        st.out.notes.append(Note(org, "c10-error", m.group("text")))


def _match_tracebacks(st: _State, rest: str, org: Origin, tag) -> None:
    m = PROCESS_HEADER.match(rest)
    if m:
        st.last_process_header = m.group("name")
        return
    if TRACEBACK_START.search(rest):
        _close_traceback(st, None)
        st.tb = {"origin": org, "frames": [], "tag": tag or st.last_process_header}
        st.last_process_header = None
        return
    m = re.search(r"Fatal Python error: (?P<what>\w+)", rest)
    if m:
        st.faulthandler = {"origin": org, "what": m.group("what"), "frame": None, "tag": tag}


def _continue_traceback(st: _State, rest: str, org: Origin) -> bool:
    tb = st.tb
    m = PY_FRAME.match(rest)
    if m:
        tb["frames"].append(f'{m.group("file")}:{m.group("line")} in {m.group("func")}')
        return True
    if rest.startswith((" ", "\t")) or not rest.strip():
        return bool(rest.strip()) or not tb["frames"]
    if rest.startswith(("During handling", "The above exception")):
        return True
    _close_traceback(st, rest.strip())
    return False


def _close_traceback(st: _State, exception_line: str | None) -> None:
    tb = st.tb
    if tb is None:
        return
    st.tb = None
    if not tb["frames"]:
        return
    exc = None
    if exception_line and EXCEPTION_LINE.match(exception_line):
        exc = exception_line
    st.out.report_points.append(ReportPoint(tb["origin"], "python-traceback", _report_frame(tb["frames"]),
                                            exception=exc, process_tag=tb["tag"]))


LIBRARY_PATH = re.compile(r"site-packages|dist-packages|/lib/python3\.\d+/")
continuation(RUNTIME, LIBRARY_PATH)


def _report_frame(frames: list[str]) -> str:
    """The innermost frame of the user's own code: the call that noticed the error. Library frames
    below it (torch.cuda.synchronize) add nothing a user can act on."""
    for frame in reversed(frames):
        if not LIBRARY_PATH.search(frame):
            return frame
    return frames[-1]


def _continue_faulthandler(st: _State, rest: str) -> bool:
    fh = st.faulthandler
    m = FAULTHANDLER_FRAME.match(rest)
    if m:
        if fh["frame"] is None or (fh.get("current") and not fh.get("taken")):
            fh["taken"] = fh.get("current", False)
            fh["frame"] = f'{m.group("file")}:{m.group("line")} in {m.group("func")}'
        return True
    if rest.startswith("Current thread"):
        # the thread that called abort(): its frames are the report point, not another thread's
        fh["frame"] = None
        fh["current"] = True
        return True
    if rest.strip() == "" or rest.startswith(("Thread 0x", "Extension modules", "  <no Python")):
        return True
    _close_faulthandler(st)
    return False


def _close_faulthandler(st: _State) -> None:
    # Closed by the first line that is not part of the dump, an excerpt mark or the end of the
    # file: the process died printing it, so it is often the log's last lines.
    fh = st.faulthandler
    if fh is None:
        return
    frame = fh["frame"] or "(no Python frame printed)"
    st.out.report_points.append(ReportPoint(fh["origin"], "fatal-python-error", frame,
                                            exception=f"Fatal Python error: {fh['what']}", process_tag=fh["tag"]))
    st.faulthandler = None


def _match_core_dump(st: _State, rest: str, org: Origin, pid: int | None, tag: str | None) -> None:
    """The runtimes' lines about GPU core dumps: each a note (`gpu-core-dump`, with the event and
    whether it failed); the CUDA driver's exception report also a DriverException."""
    if any(w in rest for w in CORE_WORDS) or "core file" in rest.lower():
        m = CUDA_PROGRESS.search(rest)
        if m and "GPU coredump:" not in rest:
            _cuda_progress(st, m.group("msg"), org, pid, tag)
            return
        for event, failed, rx in ROCR_CORE_LINES:
            m = rx.search(rest)
            if m:
                file = next((v for k, v in m.groupdict().items() if k.startswith("file") and v), None)
                st.out.notes.append(Note(org, "gpu-core-dump", m.group(0).strip(),
                                         {"event": event, "file": file, "failed": failed, "runtime": "rocm"}))
                return
        if CUDA_DUMP_START.split(": ", 1)[1] in rest:
            st.out.notes.append(Note(org, "gpu-core-dump", rest.strip(), {"event": "started", "file": None,
                                                                           "failed": False, "runtime": "cuda"}))


def _cuda_progress(st: _State, msg: str, org: Origin, pid: int | None, tag: str | None) -> None:
    key = tag or pid
    open_exc = st.cuda_exc.get(key)
    m = CUDA_EXCEPTION.search(msg)
    if m:
        exc = DriverException(org, m.group("exc"), int(m.group("code")) if m.group("code") else None,
                              pid=pid, process_tag=tag)
        st.cuda_exc[key] = exc
        st.out.driver_exceptions.append(exc)
        return
    f = CUDA_FIELD.match(msg)
    if f and open_exc is not None:
        value = f.group("value")
        if f.group("key") == "PC":
            open_exc.pc = _addr(value.split()[0])
        elif f.group("key") == "Warp" and not value[:1].isdigit():
            open_exc.warp_exited = "exited" in value
        else:
            try:
                setattr(open_exc, f.group("key").lower(), int(value.split()[0]))
            except ValueError:
                pass
        return
    f = CUDA_FRAME.match(msg)
    if f and open_exc is not None and int(f.group("n")) == len(open_exc.frames):
        open_exc.frames.append(f.group("fn"))
        if open_exc.kernel is None:
            open_exc.kernel = f.group("fn")
        return
    m = CUDA_WRITING.search(msg)
    if m:
        st.out.notes.append(Note(org, "gpu-core-dump", msg.strip(), {"event": "writing", "file": m.group("file"),
                                                                      "failed": False, "runtime": "cuda"}))
    elif msg.startswith("All done"):
        st.cuda_exc.pop(key, None)
        st.out.notes.append(Note(org, "gpu-core-dump", msg.strip(), {"event": "done", "file": None, "failed": False,
                                                                      "runtime": "cuda"}))


def pg_name(m: re.Match) -> str | None:
    """The process group a watchdog line's prefix names: its description, else its number."""
    return m.group("desc") or m.group("desc_old") or m.group("pg") or m.group("pg_old")


def _collective(m: re.Match) -> dict:
    """The stated facts of a watchdog's timeout line (ProcessGroupNCCL's WorkNCCL(...) format)."""
    out = {"collective": m.group("op"), "seq": int(m.group("seq")), "ran_ms": int(m.group("ms")),
           "timeout_ms": int(m.group("timeout")) if m.group("timeout") else None,
           "numel_in": int(m.group("numel_in")) if m.group("numel_in") else None,
           "numel_out": int(m.group("numel_out")) if m.group("numel_out") else None,
           "rank": int(m.group("rank")) if m.group("rank") else None,
           "process_group": pg_name(m)}
    return {k: v for k, v in out.items() if v is not None}


def _match_notes(st: _State, rest: str, org: Origin, tag: str | None = None) -> None:
    m = WATCHDOG_WORK.search(rest)
    if m:
        st.out.notes.append(Note(org, "watchdog-work", m.group(0), {
            "rank": int(m.group("rank")) if m.group("rank") else None, "process_tag": _rank_tag(m) or tag,
            "process_group": pg_name(m), "work": int(m.group("work")), "last_enqueued": int(m.group("enq")),
            "last_completed": int(m.group("done"))}))
        return
    m = DUMP_SIGNAL.search(rest)
    if m:
        st.out.notes.append(Note(org, "watchdog-dump", m.group(0), {
            "rank": small_int(m.group("rank")), "process_group": pg_name(m), "from": m.group("whom"),
            "from_rank": small_int(m.group("from")), "last_enqueued": small_int(m.group("enq")),
            "last_completed": small_int(m.group("done"))}))
        return
    m = NEARBY_MAP_ROW.match(rest.strip())
    if m:
        st.out.notes.append(Note(org, "nearby-memory-map", rest.strip(),
                                 {"base": m.group("base"), "size": m.group("size"), "kind": m.group("kind")}))
        return
    m = ABORT.search(rest)
    if m and not m.group("fatal"):
        st.out.notes.append(Note(org, "abort", m.group(0).strip()))
