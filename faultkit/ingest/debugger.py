"""Parse what rocgdb, GNU gdb, cuda-gdb and compute-sanitizer print into debugger records.

Transcripts are copy-pasted, indented, wrapped, joined and cut, and the line order after a
GPU fault differs between versions (reference/debugger_output.md §0). So stop lines are found
with `re.search`, the pieces of one stop (warning, switch line, frame, source line) are joined
to the nearest stop in either order, and table rows are recognised by their own shape even
without a header. Whether a stop is on the GPU is decided from the stopped thread's identity
(AMDGPU wave/lane systag, cuda-gdb focus), never from the signal or the thread name.
"""

from __future__ import annotations

from .. import lazy_re as re   # compiled at first use: start-up (issue #35)
from ..limits import small_int

from ..model import (AgentRow, CodeObjectRef, CudaKernelRow, DebugEvent, DebuggerLog, DebugStop, DisasmLine,
                     DispatchRow, Frame, GpuPlace, Origin, Problem, QueueRow, SanitizerFinding, SanitizerReport,
                     ThreadRow)
from .symbols import demangle
from .prefilter import DEBUGGER, anchored, continuation, words
from .text import cut_problem, decode, numbered_lines

# A transcript's tables, frames, disassembly and registers follow a prompt, a stop or a sanitizer
# line: in a big file they are read as the context after those (`after=`), never by themselves.
SANITIZER_HEAD = "========="    # compute-sanitizer's head on every line it prints
words(DEBUGGER, SANITIZER_HEAD + " ", after=64)

TID = r"\d+(?:\.\d+)?"
QNAME = r'(?: "(?P<tname>[^"\n]*)")?'
NUMQ = r"(?:\d+|\?)"

SIGNAL_STOP = re.compile(rf"Thread (?P<tid>{TID}){QNAME} received signal (?P<sig>[A-Z][A-Z0-9_]+), "
                         r"(?P<meaning>[^.\n]+)\.")
anchored(DEBUGGER, SIGNAL_STOP, ' received signal ', after=64)
PROGRAM_STOP = re.compile(r"Program received signal (?P<sig>SIG[A-Z0-9]+), (?P<meaning>[^.\n]+)\.")
anchored(DEBUGGER, PROGRAM_STOP, 'Program received signal ', after=64)
CATCH_HIT = re.compile(rf"(?:Thread (?P<tid>{TID}){QNAME} hit )?Catchpoint (?P<bp>\d+) \(signal "
                       r"(?P<sig>SIG[A-Z0-9]+)\), (?P<rest>.*)$")
anchored(DEBUGGER, CATCH_HIT, 'Catchpoint ', after=64)
BP_HIT = re.compile(rf"Thread (?P<tid>{TID}){QNAME} hit (?:Breakpoint|Temporary breakpoint) (?P<bp>\d+), "
                    r"(?:with (?:lanes \[[^\]]*\]|lane \d+), )?(?P<rest>.*)$")
anchored(DEBUGGER, BP_HIT, ' hit Breakpoint ', ' hit Temporary breakpoint ', after=64)
SWITCH_LANE = re.compile(rf"\[Switching to thread (?P<tid>{TID}), lane (?P<lane>\d+) \((?P<systag>AMDGPU Lane .*?\])\)\]")
anchored(DEBUGGER, SWITCH_LANE, '[Switching to thread ', after=32)
SWITCH_CPU = re.compile(rf"\[Switching to thread (?P<tid>{TID}) \((?P<systag>Thread 0x[0-9a-f]+ \(LWP \d+\))\)\]")
anchored(DEBUGGER, SWITCH_CPU, '[Switching to thread ', after=32)
SWITCH_GNU = re.compile(r"\[Switching to (?P<systag>Thread 0x[0-9a-f]+ \(LWP \d+\)|LWP \d+)\]")
anchored(DEBUGGER, SWITCH_GNU, '[Switching to ', after=32)
CORE_CURRENT = re.compile(rf"\[Current thread is (?P<tid>{TID})(?:, lane (?P<lane>\d+))? \((?P<systag>.*)\)\]")
anchored(DEBUGGER, CORE_CURRENT, '[Current thread is ', after=64)
CORE_REASON = re.compile(rf"Thread (?P<tid>{TID}) \((?P<systag>AMDGPU Wave .*?)\) stopped because of "
                         r"(?P<sig>SIG[A-Z0-9]+)\.")
anchored(DEBUGGER, CORE_REASON, ') stopped because of ', after=64)
ATTACH_STOP = re.compile(rf"^Thread (?P<tid>{TID}){QNAME} stopped\.$")
anchored(DEBUGGER, ATTACH_STOP, ' stopped.', after=32)
TERMINATED = re.compile(r"Program terminated with signal (?P<sig>SIG[A-Z0-9]+), (?P<meaning>[^.\n]+)\.")
anchored(DEBUGGER, TERMINATED, 'Program terminated with signal ', after=64)
WARN_PRECISE = re.compile(r"Warning: precise memory (?:violation )?signal reporting is not enabled")
anchored(DEBUGGER, WARN_PRECISE, 'Warning: precise memory ', after=32)
WARN_ALU = re.compile(r"Warning: precise ALU exception reporting is not enabled")
anchored(DEBUGGER, WARN_ALU, 'Warning: precise ALU exception', after=32)
LANE_INACTIVE = re.compile(r"warning: Current lane is inactive\.")
anchored(DEBUGGER, LANE_INACTIVE, 'warning: Current lane is inactive')
MI_STOP = re.compile(r'\*stopped,reason="(?P<reason>[^"]+)"(?P<rest>.*)$')
anchored(DEBUGGER, MI_STOP, '*stopped,reason="', after=32)

WAVE_SYSTAG = re.compile(rf"AMDGPU Wave (?P<agent>{NUMQ}):(?P<queue>{NUMQ}):(?P<dispatch>{NUMQ}):(?P<wave>\d+) "
                         rf"\((?P<wg>{NUMQ},{NUMQ},{NUMQ})\)/(?P<wig>{NUMQ})")
continuation(DEBUGGER, WAVE_SYSTAG)
LANE_SYSTAG = re.compile(rf"AMDGPU Lane\s+(?P<agent>{NUMQ}):(?P<queue>{NUMQ}):(?P<dispatch>{NUMQ}):(?P<wave>\d+)/"
                         rf"(?P<lane>\d+) \((?P<wg>{NUMQ},{NUMQ},{NUMQ})\)\[(?P<wi>{NUMQ},{NUMQ},{NUMQ})\]")
continuation(DEBUGGER, LANE_SYSTAG)

CUDA_EXC = re.compile(r"CUDA Exception: (?P<exc>[A-Za-z][A-Za-z -]+?)\s*$")
anchored(DEBUGGER, CUDA_EXC, 'CUDA Exception: ', after=64)
CUDA_EXC_PC = re.compile(r"The exception was triggered at PC (?P<pc>0x[0-9a-f]+)(?:\s+(?!\()(?P<func>.+?))?"
                         r"(?:\s+\((?P<file>[^():\s]+):(?P<line>\d+)\))?\s*$")
anchored(DEBUGGER, CUDA_EXC_PC, 'The exception was triggered at PC ', after=32)
CUDA_FOCUS = re.compile(r"\[(?:Switching focus to|Current focus set to) CUDA kernel (?P<kernel>\d+), grid (?P<grid>\d+), "
                        r"block \((?P<block>[\d,]+)\), thread \((?P<thread>[\d,]+)\)(?:, device (?P<dev>\d+), "
                        r"sm (?P<sm>\d+), warp (?P<warp>\d+), lane (?P<lane>\d+))?\]")
anchored(DEBUGGER, CUDA_FOCUS, 'focus to CUDA kernel ', 'focus set to CUDA kernel ', after=32)

FRAME = re.compile(r"^(?:#(?P<level>\d+)\s+)?(?:(?P<pc>0x[0-9a-f]+) in )?(?P<body>.+?)"
                   r"(?:\s+at (?P<file>\S+?):(?P<line>\d+)|\s+from (?P<obj>\S+))?\s*$")
continuation(DEBUGGER, FRAME)
PC_IN = re.compile(r"(?:#\d+\s+)?0x[0-9a-f]+ in")     # a frame cut after its PC (the function on the next line)
continuation(DEBUGGER, PC_IN)
SRCLINE = re.compile(r"^(?P<line>\d+)(?:\t| +)(?P<text>.*)$")
continuation(DEBUGGER, SRCLINE)
LAUNCH = re.compile(r"<<<\((?P<grid>[\d,]+)\),\((?P<block>[\d,]+)\)>>>")
MAX_FRAME = 4096                 # characters of a frame line read (C++ template frames run to a few thousand)
continuation(DEBUGGER, LAUNCH)

# The one grammar of a gdb-family session: its prompt and how it says a program ended, read here in
# transcripts and waited for live by capture/gdb_driver.py (tests/test_architecture.py: no copy elsewhere).
PROMPT_NAMES = ("gdb", "cuda-gdb", "rocgdb")
_NAMES = "|".join(re.escape(n) for n in PROMPT_NAMES)
PROMPT = re.compile(rf"^\((?:{_NAMES}|@value\{{GDBP\}})\)\s?")       # @value{GDBP}: gdb's own manual, pasted
# what a live debugger's output ends at (its prompt): the pattern's source, compiled by the driver
# (a byte stream, not a transcript line: no prefilter anchor)
LIVE_PROMPT = rf"\((?:{_NAMES})\) $".encode()
INFERIOR_EXIT = re.compile(r"\[Inferior (?P<inf>\d+) \(process (?P<pid>\d+)\) exited (?:normally|with code (?P<code>\d+))\]")
NOT_RUNNING = re.compile(r"The program is not being run")
anchored(DEBUGGER, NOT_RUNNING, 'The program is not being run')
anchored(DEBUGGER, PROMPT, '(gdb)', '(cuda-gdb)', '(rocgdb)', '(@value{GDBP})', after=400)
THREADS_HDR = re.compile(r"^Id\s+(?:Lanes\s+)?Target Id\s+Frame\s*$")
anchored(DEBUGGER, THREADS_HDR, 'Target Id', after=400)
LANES_HDR = re.compile(r"^Id\s+State\s+Target Id\s+Frame\s*$")
anchored(DEBUGGER, LANES_HDR, 'Target Id', after=400)
THREAD_ROW = re.compile(rf"^(?P<cur>\*\s+)?(?P<id>{TID})\s+(?:(?P<lanes>\d+/\d+)\s+)?"
                        r"(?P<systag>AMDGPU Wave \S+ \([^)]*\)/\S+|Thread 0x[0-9a-f]+ \(LWP \d+\)|LWP \d+|process \d+)"
                        r'(?: "(?P<name>[^"]*)")?\s*(?P<frame>.*)$')
anchored(DEBUGGER, THREAD_ROW, 'AMDGPU Wave ', 'Thread 0x', 'LWP ', 'process ')
LANE_ROW = re.compile(r"^(?P<cur>\*\s+)?(?P<id>\d+)\s+(?P<state>[AIUR])\s+"
                      r"(?P<systag>AMDGPU Lane \S+ \([^)]*\)\[[^\]]*\])\s+(?P<frame>.*)$")
anchored(DEBUGGER, LANE_ROW, 'AMDGPU Lane ')
AGENT_ROW = re.compile(rf"^(?P<cur>\*\s+)?(?P<id>{TID})\s+(?P<state>[AU])\s+AMDGPU Agent \(GPUID (?P<gpuid>\d+)\)\s+"
                       r"(?P<arch>\S+)\s+(?P<name>.+?)\s+(?P<cores>\d+)\s+(?P<threads>\d+)\s+"
                       r"(?P<location>(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s*$")
anchored(DEBUGGER, AGENT_ROW, 'AMDGPU Agent (GPUID ')
QUEUE_ROW = re.compile(rf"^(?P<cur>\*\s+)?(?P<id>{TID})\s+AMDGPU Queue (?P<agent>\d+):(?P<queue>\d+) \(QID (?P<qid>\d+)\)\s+"
                       r"(?P<type>HSA(?: \((?:Single|Multi|Coop)\))?|PM4|DMA|XGMI|Unknown)\s+"
                       r"(?:(?P<read>\d+)\s+(?P<write>\d+)\s+)?(?P<size>\d+)\s+(?P<addr>0x[0-9a-f]+)\s*$")
anchored(DEBUGGER, QUEUE_ROW, 'AMDGPU Queue ')
DISPATCH_ROW = re.compile(
    rf"^(?P<cur>\*\s+)?(?P<id>{TID})\s+AMDGPU Dispatch (?P<agent>\d+):(?P<queue>\d+):(?P<dispatch>\d+) \(PKID (?P<pkid>\d+)\)\s+"
    r"\[(?P<grid>[\d,]+)\]\s+\[(?P<wg>[\d,]+)\]\s+(?P<fence>(?:B|Aa|As|Ra|Rs)(?:\|(?:Aa|As|Ra|Rs))*)?\s*"
    r"(?:Shared\((?P<shared>\d+)\), Private\((?P<private>\d+)\)\s+(?P<kdesc>0x[0-9a-f]+)\s+(?P<kargs>0x[0-9a-f]+)\s+"
    r"(?:0x[0-9a-f]+|\(nil\))\s+)?(?P<kernel>\S.*?)\s*$")
anchored(DEBUGGER, DISPATCH_ROW, 'AMDGPU Dispatch ')
CUDA_KERNEL_ROW = re.compile(r"^(?P<cur>\*\s+)?(?P<kid>\d+)\s+(?:\d+|-)\s+(?P<dev>\d+)\s+(?P<grid>\d+)\s+(?P<status>[A-Z][a-z]+)\s+"
                             r"0x[0-9a-f]+\s+(?P<gdim>\([\d,]+\))\s+(?P<bdim>\([\d,]+\))\s+(?P<name>.+?)\s*$")
continuation(DEBUGGER, CUDA_KERNEL_ROW)
SHLIB_ROW = re.compile(r"^(?P<low>0x[0-9a-f]+)\s+(?P<high>0x[0-9a-f]+)\s+(?:Yes|No)(?: \(\*\))?\s+(?P<lib>\S.*?)\s*$")
continuation(DEBUGGER, SHLIB_ROW)
CODE_OBJECT_URI = re.compile(r"(?P<scheme>file|memory)://(?P<path>[^#?\s]*)(?:[#?]offset=(?P<offset>0[xX][0-9a-fA-F]+|\d+)"
                             r"&size=(?P<size>0[xX][0-9a-fA-F]+|\d+))?")
continuation(DEBUGGER, CODE_OBJECT_URI)
DISASM = re.compile(r"^(?P<mark>\*=>|=>|\*>)?\s*(?:(?P<pc>0x[0-9a-f]+)\s*)?<(?P<sym>[^<>]*?)\+(?P<off>\d+)>:\s*(?P<rest>.*)$")
continuation(DEBUGGER, DISASM)
DISASM_ELIDED = re.compile(r"^(?P<mark>\*=>|=>|\*>)?\s*\.\.\.\+(?P<off>\d+):\s*(?P<rest>.*)$")
continuation(DEBUGGER, DISASM_ELIDED)
RAW_BYTES = re.compile(r"^(?:[0-9a-f]{2} )+\s*")
continuation(DEBUGGER, RAW_BYTES)

SAN_ACCESS = re.compile(r"^(?:Invalid|Misaligned) __(?P<space>\w+)__ (?P<rw>read|write|atomic) of size (?P<size>\d+) bytes?$")
continuation(DEBUGGER, SAN_ACCESS)
SAN_AT = re.compile(r"^at (?P<func>.+?)\+0x(?P<off>[0-9a-f]+)(?: in (?P<file>\S+):(?P<line>\d+))?$")
continuation(DEBUGGER, SAN_AT)
SAN_BY = re.compile(r"^by thread \((?P<thread>[\d,]+)\) in block \((?P<block>[\d,]+)\)$")
continuation(DEBUGGER, SAN_BY)
SAN_ADDR = re.compile(r"^(?:Access (?:to|at)|Address) (?P<addr>0x[0-9a-f]+) is (?P<why>out of bounds|misaligned)")
continuation(DEBUGGER, SAN_ADDR)
SAN_NEAR = re.compile(r"(?:^|\s)and is (?:(?P<dist>[\d,]+) bytes (?P<dir>after|before)|(?P<inside>inside)) the nearest "
                      r"allocation at (?P<base>0x[0-9a-f]+) of size (?P<asize>[\d,]+) bytes$")
# Older compute-sanitizer / cuda-memcheck: `at 0x440 in triton__0d1d2d`, `at 0x148 in /src/t.cu:10:kern(int*)`
continuation(DEBUGGER, SAN_NEAR)
SAN_AT_OLD = re.compile(r"^at 0x(?P<off>[0-9a-f]+) in (?:(?P<file>\S+?):(?P<line>\d+):)?(?P<func>\S.*?)$")
# compute-sanitizer 2026 without an offset (NVIDIA/cccl#8288): `at cp_async_bulk_cp_mask in cp_async_bulk.h:236`;
# the empty `off` group keeps the three `at` patterns' fields alike
SAN_AT_BARE = re.compile(r"^at (?!0x)(?P<func>\S.*?)(?P<off>(?!))? in (?P<file>\S+):(?P<line>\d+)$")
continuation(DEBUGGER, SAN_AT_BARE)
continuation(DEBUGGER, SAN_AT_OLD)
SAN_API = re.compile(r'^Program hit (?P<err>\w+) \(error (?P<code>\d+)\) due to "(?P<text>[^"]+)" on CUDA API call to (?P<api>\w+)\.$')
anchored(DEBUGGER, SAN_API, 'Program hit ')
SAN_FRAME = re.compile(r"^Host Frame:\s*(?P<frame>.*)$")
# The device call stack under an access (`--show-backtrace device|yes`): `Device Frame:helper(float *)+0x30 in
# oob.cu:3`, older `Device Frame:/src/oob.cu:3:helper(float*) (helper(float*) : 0x30)` (Julia's: no parameter list)
SAN_DEVICE_FRAME = re.compile(r"^Device Frame:\s*(?:(?P<func>[^/\s].*?)\+0x[0-9a-f]+(?: in \S+:\d+)?|"
                              r"(?:\S+?:\d+:)?(?P<old>[^\s(]+(?:\([^)]*\))?)(?: \(.*\))?)\s*$")
continuation(DEBUGGER, SAN_DEVICE_FRAME)
SAN_SUMMARY = re.compile(r"^ERROR SUMMARY: (?P<errors>\d+) errors?")
continuation(DEBUGGER, SAN_SUMMARY)
SAN_TARGET_ERROR = re.compile(r"^Target application returned an error")
# compute-sanitizer 2021.x (nsight-training 04_memcheck2.ipynb:93): the error text, no enum, no "due to"
continuation(DEBUGGER, SAN_TARGET_ERROR)
SAN_API_OLD = re.compile(r"^Program hit (?P<text>[^()]+?) \(error (?P<code>\d+)\) on CUDA API call to (?P<api>\w+)\.$")
continuation(DEBUGGER, SAN_API_OLD)
SAN_LEAK = re.compile(r"^Leaked (?P<size>[\d,]+) bytes at (?P<addr>0x[0-9a-f]+)")
# The other tools' report heads (and memcheck's hardware exceptions); what follows (`at`, `by
# thread`, `Address`) is read as for a memcheck report. nsight-training 2d680f7,
# cuda/2021_gtc/x-ac-04-v1/task1/task/sanitizer/: 06_initcheck.ipynb:44, 05_racecheck.ipynb:31-36.
continuation(DEBUGGER, SAN_LEAK)
SAN_INIT = re.compile(r"^Uninitialized __(?P<space>\w+)__ memory (?P<rw>read|write) of size (?P<size>\d+) bytes?$")
continuation(DEBUGGER, SAN_INIT)
SAN_RACE = re.compile(r"^(?:ERROR|Error|WARNING|Warning): Race reported between (?P<acc>\w+) access at (?P<where>.+?)"
                      r"(?: \[(?P<n>[\d,]+) hazards?\])?$")
continuation(DEBUGGER, SAN_RACE)
SAN_RACE_AND = re.compile(r"^and (?P<acc>\w+) access at (?P<where>.+?)(?: \[(?P<n>[\d,]+) hazards?\])?$")
# hazard mode: `ERROR: Potential WAW hazard ...`, cuda-memcheck's `WARN:(Warp Level Programming) Potential RAW ...`
continuation(DEBUGGER, SAN_RACE_AND)
SAN_HAZARD = re.compile(r"^(?:ERROR|Error|WARNING|Warning|WARN|INFO|Info):\s*(?:\([^)]*\)\s*)?Potential "
                        r"(?P<kind>WAW|WAR|RAW) hazard detected at "
                        r"__(?P<space>\w+)__ (?P<addr>0x[0-9a-f]+) in block \((?P<block>[\d, ]+)\)\s*:?$")
continuation(DEBUGGER, SAN_HAZARD)
SAN_HAZARD_THREAD = re.compile(r"^(?P<acc>Read|Write|Atomic) Thread \((?P<thread>[\d, ]+)\) at (?P<where>.+?)$")
continuation(DEBUGGER, SAN_HAZARD_THREAD)
SAN_BARRIER = re.compile(r"^Barrier error detected\.\s*(?P<what>.*)$")
continuation(DEBUGGER, SAN_BARRIER)
# memcheck's hardware exceptions: the GPU's own exception names (compute-sanitizer "Device Side Hardware
# Exceptions"; cuda-gdb's CUDA_EXCEPTION_* list names the same with the scope that saw it, `Warp `/`Lane `/
# `Device `), spelled in either case in reports ("Illegal instruction", "Misaligned shared or local address")
SAN_HW = re.compile(r"^(?:(?:Warp|Lane|Device|Cluster) )?(?P<what>Invalid PC|Illegal Instruction|Misaligned PC|"
                    r"(?:Hardware|User) Stack Overflow|Out-of-range (?:Shared or Local )?Address|"
                    r"Misaligned Shared or Local Address|Invalid Address Space|Illegal Address|Misaligned Address|"
                    r"Syscall Error|Hardware Exception)(?: error)?$", re.I)
continuation(DEBUGGER, SAN_HW)
# memcheck's device-side malloc/free errors (CUDA-MEMCHECK manual, "Malloc/Free Errors": `Malloc/Free error
# encountered : Double free`, `... : Invalid pointer to free`), their `at`, `by thread` and `Address` after
SAN_MALLOC = re.compile(r"^Malloc/Free [Ee]rror encountered\s*:\s*(?P<what>\S.*?)\s*$")
continuation(DEBUGGER, SAN_MALLOC)
# memcheck's report of a device-side assert (H200, 2025.3.1: `Warp assert` / `at __assertfail+0x19a0`)
SAN_ASSERT = re.compile(r"^Warp assert$")
continuation(DEBUGGER, SAN_ASSERT)
SAN_ADDR_ONLY = re.compile(r"^Address (?P<addr>0x[0-9a-f]+)$")
continuation(DEBUGGER, SAN_ADDR_ONLY)
continuation(DEBUGGER, SAN_FRAME)

PRECISE_SHOW = re.compile(r"AMDGPU precise memory access reporting is (?P<state>on|off)(?: \(currently (?P<now>enabled|disabled)\))?")
anchored(DEBUGGER, PRECISE_SHOW, 'AMDGPU precise memory access reporting is ')
PRECISE_FAIL = re.compile(r"AMDGPU precise memory access reporting could not be enabled")
anchored(DEBUGGER, PRECISE_FAIL, 'AMDGPU precise memory access reporting could not be enabled')
EVENTS = [
    ("inferior-exit", INFERIOR_EXIT),
    ("terminated", TERMINATED),
    ("fork", re.compile(r"\[(?:Detaching|Attaching) after (?:\S+ )?v?fork (?:from|to) child process (?P<pid>\d+)\]")),
    ("new-inferior", re.compile(r"\[New inferior (?P<inf>\d+) \(process (?P<pid>\d+)\)\]")),
    ("exec", re.compile(r"process (?P<pid>\d+) is executing new program: (?P<program>\S+)")),
    ("debugger-internal-error", re.compile(r"internal-error: .*|A problem internal to GDB has been detected")),
    ("unavailable", re.compile(r'Undefined (?:info )?command: "(?P<command>[^"]+)"')),
    ("unsupported-agent", re.compile(r"architecture (?P<arch>gfx\w+) not supported|firmware version \d+ not supported")),
    ("agent-busy", re.compile(r"At least one agent is busy")),
    ("attach-failed", re.compile(r"Could not attach to process|ptrace: Operation not permitted")),
    ("killed-by-detach", re.compile(r"The program being debugged exited while in a function called from GDB")),
    ("device-waits", re.compile(r"CUDA_DEVICE_WAITS_ON_EXCEPTION is set.*\(PID (?P<pid>\d+)\)")),
    ("no-line-info", re.compile(r"No line number information available for address (?P<pc>0x[0-9a-f]+)(?: <(?P<where>[^>]+)>)?")),
    ("no-active", re.compile(r"No (?P<what>agents|queues|dispatches) are currently active|No active (?P<what2>\w+) match")),
]
_EVENT_ANCHORS = {
    "inferior-exit": ("[Inferior ",), "terminated": ("Program terminated with signal ",), "fork": ("fork ",),
    "new-inferior": ("[New inferior ",), "exec": (" is executing new program: ",),
    "debugger-internal-error": ("internal-error: ", "A problem internal to GDB has been detected"),
    "unavailable": ("Undefined ",), "unsupported-agent": (" not supported",), "agent-busy": ("At least one agent is busy",),
    "attach-failed": ("Could not attach to process", "ptrace: Operation not permitted"),
    "killed-by-detach": ("The program being debugged exited while",), "device-waits": ("CUDA_DEVICE_WAITS_ON_EXCEPTION",),
    "no-line-info": ("No line number information available",), "no-active": (" are currently active", "No active "),
}
for _event, _rx in EVENTS:
    anchored(DEBUGGER, _rx, *_EVENT_ANCHORS[_event])
IMPLIED_WAVE = "AMDGPU wave (implied by rocgdb's imprecise-memory warning; no switch line in the input)"
REGISTER = re.compile(r"^(?P<name>U?R\d+|P\d+|UP\d+)\s+(?P<value>0x[0-9a-f]+)\b", re.M)
continuation(DEBUGGER, REGISTER)
_STOP_WORDS = ("received signal", "hit Catchpoint", "CUDA Exception", "stopped because of")
MI_LANE = re.compile(r'id="(?P<id>\d+)",state="(?P<state>[AIUR])",target-id="(?P<systag>AMDGPU Lane [^"]+)"')
anchored(DEBUGGER, MI_LANE, 'target-id="AMDGPU Lane ')
FRAME_URI = re.compile(r" from ((?:memory|file)://\S+)")
continuation(DEBUGGER, FRAME_URI)


def _slug(what: str) -> str:
    """A report head's name as a kind: `Misaligned Shared or Local Address` -> misaligned-shared-or-local-address."""
    return re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def _coords(text: str) -> tuple[int | None, ...]:
    return tuple(None if x == "?" else int(x) for x in text.split(","))


def _num(text: str | None) -> int | None:
    return None if text in (None, "?") else small_int(text)      # 5,000 digits: no number, not a ValueError


def gpu_place(systag: str) -> GpuPlace | None:
    """The GPU identity in a wave or lane systag, or None for a host thread."""
    m = LANE_SYSTAG.search(systag)
    if m:
        return GpuPlace(m.group(0), _num(m["agent"]), _num(m["queue"]), _num(m["dispatch"]), int(m["wave"]),
                        _coords(m["wg"]), None, int(m["lane"]), _coords(m["wi"]))
    m = WAVE_SYSTAG.search(systag)
    if m:
        return GpuPlace(m.group(0), _num(m["agent"]), _num(m["queue"]), _num(m["dispatch"]), int(m["wave"]),
                        _coords(m["wg"]), _num(m["wig"]))
    return None


def parse_frame(text: str) -> Frame | None:
    """One frame line (a stop's location or a `#N` backtrace line), or None if it is not one."""
    text = text.strip()
    if text.startswith("... "):
        text = text[4:]
    if len(text) > MAX_FRAME:
        # FRAME's lazy body tries its `at FILE:LINE` tail at every character: a 4 MB run of tabs
        # took hours (quadratic). A frame is its head and its tail, whitespace runs one space.
        text = " ".join(text.split())
        if len(text) > MAX_FRAME:
            text = text[: MAX_FRAME // 2] + " ... " + text[-MAX_FRAME // 2:]
    m = FRAME.match(text)
    if not m:
        return None
    body = m["body"].strip()
    has_where = bool(m["pc"] or m["level"] or m["file"] or m["obj"])
    launch = LAUNCH.search(body)
    if launch:
        function, args = body[:launch.start()], body[launch.end():].strip()
    else:
        if not has_where:
            return None
        cut = body.find(" (") if " (" in body else body.find("(")
        function, args = (body[:cut], body[cut:].strip()) if cut > 0 else (body, "")
    if args.startswith("(") and args.endswith(")"):
        args = args[1:-1]
    return Frame(text=text, level=_num(m["level"]), pc=int(m["pc"], 16) if m["pc"] else None,
                 function=function.strip() or None, args=args or None, file=m["file"],
                 line=small_int(m["line"]) if m["line"] else None, objfile=m["obj"],
                 launch=(launch["grid"], launch["block"]) if launch else None)


def _code_object(uri: str, origin: Origin, low: int | None = None, high: int | None = None) -> CodeObjectRef | None:
    m = CODE_OBJECT_URI.search(uri)
    if not m:
        return None
    conv = (lambda v: int(v, 0) if v else None)
    return CodeObjectRef(origin, m.group(0), m["scheme"], m["path"], conv(m["offset"]), conv(m["size"]), low, high)


def _device_frame(body: str, r) -> bool:
    """A `Device Frame:` line of a sanitizer report (memcheck's or another tool's), or the host
    backtrace that ends them. A frame line no pattern reads (cut by a terminal) is kept as an unread
    frame (""): the outermost frame is then unknown, never the one below it."""
    if body.startswith("Device Frame:"):
        m = SAN_DEVICE_FRAME.match(body)
        r.device_frames.append((m["func"] or m["old"]).strip() if m else "")
        return True
    if body.startswith(("Saved host backtrace", "Host Frame:")):
        r.device_frames_end = True
        return True
    return False


def _disasm(m: re.Match, origin: Origin, text: str) -> DisasmLine:
    rest = re.sub(r"\s+<--.*$", "", m["rest"]).strip()
    rest = RAW_BYTES.sub("", rest)
    groups = m.groupdict()
    return DisasmLine(origin, text, int(groups["pc"], 16) if groups.get("pc") else None, groups.get("sym") or None,
                      int(m["off"]), rest, m["mark"] or "")


class _Parser:
    def __init__(self, name: str):
        self.name = name
        self.log = DebuggerLog()
        self.stop: DebugStop | None = None       # the stop its following lines belong to
        self.stop_age = 0                        # lines since that stop
        self.focus_moved = False                 # a command after the stop moved the focus to another thread
        self.pending_switch: tuple[str, str | None, GpuPlace | None] | None = None
        self.pending_age = 0
        self.pending_warning = False
        self.table: str | None = None
        self.row: ThreadRow | None = None
        self.disasm: list[DisasmLine] | None = None
        self.sanitizer: SanitizerReport | None = None
        self.finding: SanitizerFinding | None = None   # an open non-memcheck-access sanitizer report
        self.want_frame = False
        self.frame_buf: list[str] = []
        self.want_source = False

    def origin(self, no: int) -> Origin:
        return Origin(self.name, no)

    # ---- stops ----
    def new_stop(self, stop: DebugStop) -> None:
        self.log.stops.append(stop)
        self.stop, self.stop_age = stop, 0
        self.focus_moved = False
        if self.pending_warning:
            stop.imprecise_warning, self.pending_warning = True, False
        if self.pending_switch and self.pending_age <= 3:
            self.apply_switch(stop, *self.pending_switch)
        self.pending_switch = None

    def apply_switch(self, stop: DebugStop, tid: str, systag: str | None, place: GpuPlace | None) -> None:
        stop.thread = stop.thread or tid or None
        if place:
            stop.gpu = place
        elif systag:
            stop.host_systag = systag

    def switch(self, tid: str, systag: str | None, place: GpuPlace | None) -> None:
        st = self.stop
        implied = st is not None and st.gpu is not None and st.gpu.implied
        if st and self.stop_age <= 4 and (st.thread in (None, tid) or st.kind in ("cuda-exception", "core")) \
                and (st.gpu is None or implied) and st.host_systag is None and not self.focus_moved:
            self.apply_switch(st, tid, systag, place)
            self.want_frame = st.frame is None
        else:
            self.pending_switch, self.pending_age = (tid, systag, place), 0

    def take_frame(self, raw: str) -> bool:
        """Collect the stop's frame line, joining wrapped continuation lines."""
        self.frame_buf.append(raw.strip())
        joined = " ".join(self.frame_buf)
        if joined.count("(") > joined.count(")") and len(self.frame_buf) < 8:
            return True
        self.want_frame = False
        frame = parse_frame(joined)
        if frame is None and len(self.frame_buf) < 8 and (joined.endswith(")") or PC_IN.fullmatch(joined)):
            # 'func (args)' (its args wrapped or not) whose ' at file:line' is on the next line; a
            # '0x... in' whose function a wrap put there
            return True
        self.frame_buf = []
        if frame and self.stop is not None:
            self.stop.frame = frame
            self.want_source = True
            self.add_frame_code_object(frame, self.stop.origin)
            return True
        return False

    def add_frame_code_object(self, frame: Frame, origin: Origin) -> None:
        if frame.objfile and "://" in frame.objfile:
            ref = _code_object(frame.objfile, origin)
            if ref and all(c.uri != ref.uri for c in self.log.code_objects):
                self.log.code_objects.append(ref)

    def stop_lines(self, s: str, no: int) -> bool:
        o = self.origin(no)
        m = CUDA_EXC.search(s)
        if m:
            self.new_stop(DebugStop(o, "cuda-exception", s, exception=m["exc"].strip()))
            return True
        m = CUDA_EXC_PC.search(s)
        if m and self.stop and self.stop.kind == "cuda-exception":
            st = self.stop
            st.error_pc = int(m["pc"], 16)
            st.error_function = m["func"].strip() if m["func"] else None
            st.error_file, st.error_line = m["file"], int(m["line"]) if m["line"] else None
            self.stop_age = 0
            return True
        m = SIGNAL_STOP.search(s)
        if m:
            st = self.stop
            if st and st.kind == "signal" and st.signal is None and self.stop_age <= 4:
                st.text, st.signal, st.meaning, st.thread, st.thread_name = (s.strip(), m["sig"], m["meaning"],
                                                                             m["tid"], m["tname"])
                st.origin, self.stop_age = o, 0
                self.want_frame = st.frame is None
                self.rest_of_line(s[m.end():], no)
                return True
            if (m["sig"].startswith("CUDA_EXCEPTION") and st and st.kind == "cuda-exception" and st.signal is None
                    and self.stop_age <= 6):
                st.signal, st.meaning, st.thread, st.thread_name = m["sig"], m["meaning"], m["tid"], m["tname"]
                self.stop_age = 0
            else:
                kind = "cuda-exception" if m["sig"].startswith("CUDA_EXCEPTION") else "signal"
                self.new_stop(DebugStop(o, kind, s.strip(), m["sig"], m["meaning"], m["tid"], m["tname"]))
                if kind == "cuda-exception":
                    self.stop.exception = m["meaning"]
            self.want_frame = True
            self.rest_of_line(s[m.end():], no)
            return True
        m = PROGRAM_STOP.search(s)
        if m:
            self.new_stop(DebugStop(o, "signal", s.strip(), m["sig"], m["meaning"]))
            self.want_frame = True
            return True
        m = CATCH_HIT.search(s)
        if m:
            self.new_stop(DebugStop(o, "catchpoint", s.strip(), m["sig"], None, m["tid"], m["tname"]))
            self.frame_on_line(m["rest"])
            return True
        m = BP_HIT.search(s)
        if m:
            self.new_stop(DebugStop(o, "breakpoint", s.strip(), None, None, m["tid"], m["tname"]))
            self.frame_on_line(m["rest"])
            return True
        m = CORE_REASON.search(s)
        if m:
            self.new_stop(DebugStop(o, "core", s.strip(), m["sig"], None, m["tid"], gpu=gpu_place(m["systag"])))
            self.want_frame = True
            return True
        m = ATTACH_STOP.search(s.strip())
        if m:
            self.new_stop(DebugStop(o, "attach", s.strip(), None, None, m["tid"], m["tname"]))
            self.want_frame = True
            return True
        m = MI_STOP.search(s)
        if m:
            self.mi_stop(m, o, s)
            return True
        return False

    def rest_of_line(self, rest: str, no: int) -> None:
        """A joined copy-paste: the switch line glued after the stop line."""
        for pat in (SWITCH_LANE, SWITCH_CPU, SWITCH_GNU):
            m = pat.search(rest)
            if m:
                self.switch_line(m, no)
                return

    def frame_on_line(self, rest: str) -> None:
        frame = parse_frame(rest) or (parse_frame("0x0 in " + rest) if rest.strip() else None)
        if frame and self.stop:
            if frame.pc == 0 and not rest.startswith("0x"):
                frame.pc, frame.text = None, rest.strip()
            self.stop.frame = frame
            self.want_source = True

    def mi_stop(self, m: re.Match, o: Origin, s: str) -> None:
        rest = m["rest"]

        def field_(name: str) -> str | None:
            f = re.search(rf'\b{name}="([^"]*)"', rest)
            return f.group(1) if f else None
        if m["reason"] in ("exited-signalled", "exited", "exited-normally"):
            self.log.events.append(DebugEvent(o, "inferior-exit", s.strip(), {"reason": m["reason"]}))
            return
        st = DebugStop(o, "mi", s.strip(), field_("signal-name"), field_("signal-meaning"), field_("thread-id"))
        addr, line = field_("addr"), field_("line")
        st.frame = Frame(text=s.strip(), pc=int(addr, 16) if addr else None, function=field_("func"),
                         file=field_("file"), line=int(line) if line else None)
        self.new_stop(st)

    def switch_line(self, m: re.Match, no: int) -> None:
        if m.re == SWITCH_LANE:      # ==: a match holds the compiled pattern (lazy_re)
            self.switch(m["tid"], None, gpu_place(m["systag"]))
        elif m.re == SWITCH_CPU:
            self.switch(m["tid"], m["systag"], None)
        else:
            self.switch("", m["systag"], None)

    # ---- tables ----
    def table_line(self, s: str, raw: str, no: int) -> bool:
        o = self.origin(no)
        if THREADS_HDR.match(s):
            self.table = "threads"
            return True
        if LANES_HDR.match(s):
            self.table = "lanes"
            return True
        m = LANE_ROW.match(s)
        if m:
            self.row = ThreadRow(o, m["id"], m["systag"], m["frame"].strip(), state=m["state"],
                                 gpu=gpu_place(m["systag"]), current=bool(m["cur"]))
            self.log.lanes.append(self.row)
            return True
        m = THREAD_ROW.match(s)
        if m and (self.table == "threads" or m["systag"].startswith(("AMDGPU", "Thread 0x"))):
            self.table = "threads"
            self.row = ThreadRow(o, m["id"], m["systag"], m["frame"].strip(), m["name"], gpu_place(m["systag"]),
                                 m["lanes"], current=bool(m["cur"]))
            self.log.threads.append(self.row)
            return True
        if self.row is not None and self.table in ("threads", "lanes") and raw[:1].isspace() and s:
            self.row.frame = f"{self.row.frame} {s}".strip()
            return True
        m = AGENT_ROW.match(s)
        if m:
            self.log.agents.append(AgentRow(o, m["id"], m["state"], int(m["gpuid"]), m["arch"], m["name"],
                                            m["location"], bool(m["cur"])))
            return True
        m = QUEUE_ROW.match(s)
        if m:
            self.log.queues.append(QueueRow(o, m["id"], int(m["agent"]), int(m["queue"]), int(m["qid"]), m["type"],
                                            int(m["size"]), int(m["addr"], 16), _num(m["read"]), _num(m["write"]),
                                            bool(m["cur"])))
            return True
        m = DISPATCH_ROW.match(s)
        if m:
            self.log.dispatches.append(DispatchRow(
                o, m["id"], int(m["agent"]), int(m["queue"]), int(m["dispatch"]), int(m["pkid"]), _ints(m["grid"]),
                _ints(m["wg"]), m["kernel"], m["fence"], _num(m["shared"]), _num(m["private"]),
                int(m["kdesc"], 16) if m["kdesc"] else None, int(m["kargs"], 16) if m["kargs"] else None,
                bool(m["cur"])))
            return True
        m = CUDA_KERNEL_ROW.match(s)
        if m:
            self.log.cuda_kernels.append(CudaKernelRow(o, int(m["kid"]), int(m["dev"]), int(m["grid"]), m["status"],
                                                       m["gdim"], m["bdim"], m["name"], bool(m["cur"])))
            return True
        m = SHLIB_ROW.match(s)
        if m:
            ref = _code_object(m["lib"], o, int(m["low"], 16), int(m["high"], 16))
            if ref:
                self.log.code_objects.append(ref)
            return True
        return False

    def disasm_line(self, s: str, no: int) -> bool:
        m = DISASM.match(s) or DISASM_ELIDED.match(s)
        if not m:
            if self.disasm is not None and (s in ("...",) or s.startswith("Dump of assembler code")):
                return True
            self.disasm = None
            if s.startswith("Dump of assembler code"):
                self.disasm = []
                self.log.disassembly.append(self.disasm)
                return True
            return False
        if self.disasm is None:
            self.disasm = []
            self.log.disassembly.append(self.disasm)
        self.disasm.append(_disasm(m, self.origin(no), s))
        return True

    def sanitizer_line(self, s: str, no: int) -> bool:
        s = s.lstrip()                  # CI logs indent the tool's output
        if not s.startswith(SANITIZER_HEAD):
            return False
        self.log.debugger = self.log.debugger or "compute-sanitizer"
        body = s.lstrip("=").strip()
        o = self.origin(no)
        if not body:
            # the bare `=========` line compute-sanitizer prints after every record: the record ended
            self.close_reports()
            return True
        m = SAN_ACCESS.match(body)
        if m:
            for open_report in (self.sanitizer, self.finding):
                if open_report is not None:
                    open_report.device_frames_end = True     # the next report: the last one's frames ended
            self.sanitizer = SanitizerReport(o, m["space"], m["rw"], int(m["size"]))
            self.finding = None
            self.log.sanitizer.append(self.sanitizer)
            return True
        m = SAN_API.match(body) or SAN_API_OLD.match(body)
        if m:
            self.close_reports()
            fields = {"code": int(m["code"]), "api": m["api"], "text": m["text"]}
            if "err" in m.re.groupindex:
                fields["error"] = m["err"]
            self.log.events.append(DebugEvent(o, "sanitizer-api-error", body, fields))
            return True
        m = SAN_LEAK.match(body)
        if m:
            self.close_reports()
            self.log.events.append(DebugEvent(o, "sanitizer-leak", body, {"size": int(m["size"].replace(",", "")),
                                                                          "address": int(m["addr"], 16)}))
            return True
        for kind, pat in (("sanitizer-summary", SAN_SUMMARY), ("sanitizer-target-error", SAN_TARGET_ERROR)):
            if (m := pat.match(body)):
                self.close_reports()
                self.log.events.append(DebugEvent(o, kind, body, m.groupdict()))
                return True
        if self.finding_head(body, o):
            return True
        if self.finding is not None:
            self.finding_line(body)
            return True
        r = self.sanitizer
        if r is None:
            return True
        if _device_frame(body, r):
            pass
        elif (m := SAN_AT.match(body) or SAN_AT_OLD.match(body) or SAN_AT_BARE.match(body)):
            r.kernel, r.offset = m["func"], int(m["off"], 16) if m["off"] else None
            r.file, r.line = m["file"], int(m["line"]) if m["line"] else None
        elif (m := SAN_BY.match(body)):
            r.thread, r.block = _ints(m["thread"]), _ints(m["block"])
        elif (m := SAN_ADDR.match(body)):
            r.address, r.misaligned = int(m["addr"], 16), m["why"] == "misaligned"
        if (m := SAN_NEAR.search(body)):
            r.distance = int(m["dist"].replace(",", "")) if m["dist"] else 0
            r.direction = m["dir"] or "inside"
            r.allocation, r.allocation_size = int(m["base"], 16), int(m["asize"].replace(",", ""))
        elif (m := SAN_FRAME.match(body)):
            r.host_frames.append(m["frame"].strip())
        return True

    def close_reports(self) -> None:
        """A line that is no part of the open report (an API error, a leak, the summary): its device
        frames, if any, ended before it."""
        for open_report in (self.sanitizer, self.finding):
            if open_report is not None:
                open_report.device_frames_end = True
        self.sanitizer = self.finding = None

    def finding_head(self, body: str, o: Origin) -> bool:
        """The first line of an initcheck, racecheck or synccheck report, a memcheck hardware exception or a
        device-side malloc/free error."""
        f = None
        if (m := SAN_INIT.match(body)):
            f = SanitizerFinding(o, "initcheck", f"uninitialized-{m['rw']}", body, size=int(m["size"]), space=m["space"])
        elif (m := SAN_RACE.match(body)):
            f = SanitizerFinding(o, "racecheck", "race", body)
            self.finding = f
            self.race_access(m)
        elif (m := SAN_HAZARD.match(body)):
            f = SanitizerFinding(o, "racecheck", f"{m['kind']}-hazard", body, space=m["space"],
                                 address=int(m["addr"], 16), block=_ints(m["block"].replace(" ", "")))
        elif (m := SAN_BARRIER.match(body)):
            f = SanitizerFinding(o, "synccheck", "barrier-error", body)
        elif (m := SAN_HW.match(body)) or (m := SAN_MALLOC.match(body)):
            # (a fault of its kind: `illegal-instruction`, `misaligned-address`, `double-free`, ...)
            f = SanitizerFinding(o, "memcheck", _slug(m["what"]), body)
        elif SAN_ASSERT.match(body):
            f = SanitizerFinding(o, "memcheck", "device-assert", body)
        if f is None:
            return False
        for open_report in (self.sanitizer, self.finding):
            if open_report is not None:
                open_report.device_frames_end = True     # the next report: the last one's frames ended
        self.sanitizer = None
        self.finding = f
        self.log.sanitizer_findings.append(f)
        return True

    def race_access(self, m: re.Match) -> None:
        """One access of a racecheck report: `Write access at <where>` [N hazards]."""
        f = self.finding
        f.accesses.append(m["acc"])
        if m["n"]:
            f.hazards = (f.hazards or 0) + int(m["n"].replace(",", ""))
        self.finding_at("at " + m["where"])

    def finding_at(self, text: str) -> bool:
        f = self.finding
        m = SAN_AT.match(text) or SAN_AT_OLD.match(text) or SAN_AT_BARE.match(text)
        if not m:
            return False
        func = demangle(m["func"]) or m["func"]
        if func not in f.sites:       # a race's accesses may be in different functions of one kernel
            f.sites.append(func)
        if f.kernel is None:          # the first access names the report's place
            f.kernel, f.offset = m["func"], int(m["off"], 16) if m["off"] else None
            if (plain := demangle(f.kernel)):
                f.mangled, f.kernel = f.kernel, plain
            f.file, f.line = m["file"], int(m["line"]) if m["line"] else None
        return True

    def finding_line(self, body: str) -> None:
        f = self.finding
        if _device_frame(body, f):
            pass
        elif (m := SAN_RACE_AND.match(body)) and f.kind == "race":
            self.race_access(m)
        elif (m := SAN_HAZARD_THREAD.match(body)):
            f.accesses.append(m["acc"])
            if f.thread is None:
                f.thread = _ints(m["thread"].replace(" ", ""))
            self.finding_at("at " + m["where"])
        elif self.finding_at(body):
            pass
        elif (m := SAN_BY.match(body)):
            f.thread, f.block = _ints(m["thread"]), _ints(m["block"])
        elif (m := SAN_ADDR_ONLY.match(body) or SAN_ADDR.match(body)):
            f.address = int(m["addr"], 16)

    # ---- everything else ----
    def misc_line(self, s: str, no: int) -> None:
        o = self.origin(no)
        m = FRAME_URI.search(s)
        if m:
            ref = _code_object(m.group(1), o)
            if ref and all(c.uri != ref.uri for c in self.log.code_objects):
                self.log.code_objects.append(ref)
        m = MI_LANE.search(s)
        if m:
            self.log.lanes.append(ThreadRow(o, m["id"], m["systag"], "", state=m["state"], gpu=gpu_place(m["systag"])))
            return
        m = PRECISE_SHOW.search(s)
        if m:
            state = "off" if m["state"] == "off" else ("enabled" if m["now"] == "enabled" else "requested")
            if not (state == "requested" and self.log.precise_memory == "could-not-enable"):
                self.log.precise_memory, self.log.precise_origin = state, o
            return
        if PRECISE_FAIL.search(s):
            self.log.precise_memory, self.log.precise_origin = "could-not-enable", o
            self.log.events.append(DebugEvent(o, "precise-memory-unavailable", s.strip()))
            return
        for kind, pat in EVENTS:
            m = pat.search(s)
            if m:
                fields = {k: v for k, v in m.groupdict().items() if v is not None}
                self.log.events.append(DebugEvent(o, kind, s.strip(), fields))
                return

    def command(self, cmd: str, no: int) -> None:
        self.table = None
        self.row = None
        if re.match(r"set amdgpu precise-memory on\b", cmd) and self.log.precise_memory in (None, "off"):
            self.log.precise_memory, self.log.precise_origin = "requested", self.origin(no)
        elif re.match(r"set amdgpu precise-memory off\b", cmd):
            self.log.precise_memory, self.log.precise_origin = "off", self.origin(no)

    def feed(self, raw: str, no: int) -> None:
        s = raw.strip()
        if s.startswith("// "):
            s = s[3:].strip()
        elif s.startswith("# ") and not s.startswith("#0"):
            s = s[2:].strip()
        self.stop_age += 1
        self.pending_age += 1
        m = PROMPT.match(s)
        if m:
            cmd = s[m.end():].strip()
            # After a stop, `thread N` / `cuda thread ...` move the focus: a switch line they print is
            # not the stop's thread (a host SIGSEGV followed by `thread 5` is still a host stop).
            if self.stop is not None and re.match(r"(?:thread|cuda|lane|t)\b", cmd):
                self.focus_moved = True
            self.command(cmd, no)
            self.want_frame = self.want_source = False
            self.disasm = None
            return
        if not s:
            self.table = self.row = None
            if self.frame_buf:
                self.take_frame("")
            return
        if self.sanitizer_line(s, no):
            return
        if WARN_PRECISE.search(s) or WARN_ALU.search(s):
            if self.stop and self.stop_age <= 2 and self.stop.kind == "signal":
                self.stop.imprecise_warning = True
                self.stop.gpu = self.stop.gpu or GpuPlace(IMPLIED_WAVE, implied=True)
            else:
                # rocgdb prints this only on the signal-received path, so it stands for a stop
                # even where an excerpt dropped the stop line; a stop line that follows fills it.
                self.new_stop(DebugStop(self.origin(no), "signal", s, imprecise_warning=True,
                                        gpu=GpuPlace(IMPLIED_WAVE, implied=True)))
                self.want_frame = True
            return
        if LANE_INACTIVE.search(s):
            if self.stop:
                self.stop.lane_inactive = True
            return
        for pat in (SWITCH_LANE, SWITCH_CPU, SWITCH_GNU):
            m = pat.search(s)
            if m:
                self.switch_line(m, no)
                if SIGNAL_STOP.search(s) is None:
                    return
        m = CUDA_FOCUS.search(s)
        if m:
            place = GpuPlace(m.group(0), device=_num(m["dev"]), sm=_num(m["sm"]), warp=_num(m["warp"]),
                             lane=_num(m["lane"]), grid=int(m["grid"]), kernel_id=int(m["kernel"]),
                             block=_ints(m["block"]), thread=_ints(m["thread"]))
            if self.stop and self.stop.kind == "cuda-exception" and self.stop.gpu is None:
                self.stop.gpu = place
                self.stop_age = 0
                self.want_frame = self.stop.frame is None
            elif "Current focus" in s:
                self.pending_switch, self.pending_age = ("", None, place), 0
            return
        m = CORE_CURRENT.search(s)
        if m:
            place = gpu_place(m["systag"])
            if self.stop and self.stop.thread == m["tid"] and place:
                self.stop.gpu = place
            return
        if self.stop_lines(s, no):
            return
        if s.startswith("Kernel: ") and "<<<" in s:
            s = s[len("Kernel: "):]     # cuda-gdb's core summary names the kernel as a launch
        if self.frame_buf or (self.want_frame and self.stop and self.stop_age <= 6 and
                              (s.startswith(("0x", "#", "... ")) or " at " in s or " from " in s or "<<<" in s)):
            if self.take_frame(s):
                return
        if self.want_source and (m := SRCLINE.match(s)) and self.stop:
            self.stop.source_line = s
            self.want_source = False
            return
        self.want_source = False
        if s.startswith("#") and (frame := parse_frame(s)):
            self.log.backtrace.append(frame)
            self.add_frame_code_object(frame, self.origin(no))
            if self.stop and self.stop.frame is None and self.stop_age <= 6:
                self.stop.frame = frame
            return
        if self.disasm_line(s, no):
            return
        if self.table_line(s, raw, no):
            return
        self.misc_line(s, no)

    def finish(self) -> DebuggerLog:
        if self.frame_buf:
            joined = " ".join(self.frame_buf)
            frame = parse_frame(joined)
            if frame and self.stop:
                self.stop.frame = frame
        log = self.log
        # A stop with no switch line happens when the thread was already current: the
        # thread table (if any) still tells whether that thread is a wave.
        by_id = {t.id: t for t in log.threads}
        for st in log.stops:
            if st.gpu is None and st.thread in by_id and by_id[st.thread].gpu:
                st.gpu = by_id[st.thread].gpu
        if log.debugger is None:
            log.debugger = guess_debugger(log)
        return log


def guess_debugger(log: DebuggerLog) -> str | None:
    if any(s.kind == "cuda-exception" for s in log.stops) or log.cuda_kernels:
        return "cuda-gdb"
    if log.agents or log.queues or log.dispatches or log.precise_memory or any(s.gpu for s in log.stops) \
            or any(t.gpu for t in log.threads) or log.code_objects:
        return "rocgdb"
    if log.stops or log.threads or log.backtrace or log.events:
        return "gdb"
    return None


def parse_debugger(data: bytes | str, name: str = "<debugger>") -> DebuggerLog:
    if isinstance(data, bytes):
        text, problems = decode(data, name)
    else:
        text, problems = data, []
    p = _Parser(name)
    p.log.problems.extend(problems)
    if re.search(r"^\(cuda-gdb\)|NVIDIA \(R\) CUDA Debugger", text, re.M):
        p.log.debugger = "cuda-gdb"
    elif re.search(r"cuda-gdb/\d+/gdb/", text):
        p.log.debugger = "cuda-gdb"
    elif re.search(r"^ROCgdb |GNU gdb \((?:rocm|ROCm)", text, re.M):
        p.log.debugger = "rocgdb"
    for line in numbered_lines(text):
        if line.cut:
            p.log.problems.append(cut_problem(name, line))
        if line.boundary:
            p.stop = None
            p.table = p.row = p.disasm = p.sanitizer = p.finding = None
            p.frame_buf = []
            continue
        try:
            p.feed(line.text, line.no)
        except (ValueError, IndexError) as exc:   # one odd line never costs the rest of the transcript
            p.log.problems.append(Problem(name, f"line not understood ({exc})", line.no))
    log = p.finish()
    # Scalar registers of `info registers` (cuda-gdb: R0..R255, UR*, P*): they give the faulting
    # address from the faulting instruction's operands.
    log.registers = {m["name"]: int(m["value"], 16) for m in REGISTER.finditer(text)}
    if not (log.stops or log.sanitizer or log.sanitizer_findings) and any(k in text for k in _STOP_WORDS):
        log.problems.append(Problem(name, "debugger output found but no stop or sanitizer report in it"))
    return log
