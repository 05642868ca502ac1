"""Kernels named away from the fault line: where a kernel was built, dispatched, launched, tuned or
disassembled, or named by a person's own words next to a fault. Each is a mention, with the basis
(how the text names it) and the producer whose format it is; analyze/mention_claims.py makes them
candidates, never more.

Every format is the producer's own (read at its source or in its real output):
- disassembled: GNU gdb's `disassemble` (gdb/cli/cli-cmds.c: `Dump of assembler code for function %s:`,
  ROCgdb and cuda-gdb print the same) and `x/i $pc` lines (`=> 0x7ffff6a01234 <kernel+52>:\tinsn`,
  the debugger grammar's DISASM); a kernel only where the instructions are GPU ISA (AMDGPU `s_`/`v_`/
  `global_` mnemonics, NVIDIA SASS), never a host function;
- dispatched: rocprofv3's kernel-trace rows (`"KERNEL_DISPATCH",...,"Kernel_Name",...`, pasted as text,
  the rocpd `Guid` first or not) and its kernel-stats rows (`"Name","Calls","TotalDurationNs",...`);
- launched: a Triton kernel's launch `kernel[grid](` as a Python traceback's code line, PyTorch profiler tables (torch/autograd/profiler_util.py `_build_table`: a row whose CPU
  columns are all zero and whose device time is not is a device event: a kernel, unless a copy or a
  memset), nsys `cuda_gpu_kern_sum` / `gpukernsum` tables (the kernel's name is the last column),
  nvprof's `GPU activities:` rows;
- built: ptxas `-v` (`ptxas info    : Compiling entry function '%s' for 'sm_%d'`; its `Function
  properties for` lines name device functions and host stubs too, so they are not read), hipcc/clang's
  `remark: Function Name: %s [-Rpass-analysis=kernel-resource-usage]` (kernels only), PTX
  `.entry NAME(`, AMDGCN `.amdhsa_kernel NAME`, LLVM IR `define amdgpu_kernel`/`ptx_kernel`, Triton IR
  `tt.func public @NAME`, Inductor's `async_compile.triton('NAME', ...)`;
- tuned: Triton's autotuner with TRITON_PRINT_AUTOTUNING (`Autotuning kernel %s with config %s`,
  `Triton autotuning for function %s finished after ...`), Inductor's max-autotune table (`AUTOTUNE
  mm(...)` then `  triton_mm_4 0.0123 ms 100.0%`);
- named in the text: a person's words next to a fault (`the faulting kernel is `X``, `kernel: void
  X<...>(...)`, a backticked kernel name on a line that says illegal address / CUDA error / memory
  access fault).
"""

from __future__ import annotations

import csv
from .. import lazy_re as re   # compiled at first use: start-up (issue #35)

from ..model import KernelMention, Origin
from .debugger import DISASM
from .prefilter import anchored, words
from .symbols import demangle
from .text import numbered_lines

READER = "kernel-mentions"       # its own reader: the prefilter keeps its lines of a big log

# the bases (judge.claims.BASES keys)
DISASSEMBLED, DISPATCHED, LAUNCHED, BUILT, TUNED, NAMED = (
    "disassembled", "dispatched", "launched", "built", "tuned", "named-in-text")


# ---- GPU instructions (a disassembly is a kernel's only when its code is GPU ISA) ----
GPU_ISA = re.compile(r"\b(?:[sv]_[a-z][a-z0-9_]*|(?:global|flat|buffer|scratch|ds)_(?:load|store|atomic|read|write)\w*)\b"
                     r"|\b(?:LDG|STG|LDS|STS|LDC|ULDC|IMAD|IADD3|ISETP|FFMA|HMMA|S2R|S2UR|SHFL|BAR|EXIT|ERRBAR|BRA|MOV|NOP)"
                     r"(?:\.[A-Z0-9_.]+)?(?:\s+(?:R\d|UR\d|RZ|P\d|PT|!?P\d|c\[|0x|`)|\s*;?\s*$)")
DUMP_HEAD = anchored(READER, re.compile(r"^Dump of assembler code for function (?P<k>.+?):\s*$"),
                     "Dump of assembler code for function", after=24)
DUMP_END = "End of assembler dump."

# ---- rocprofv3 ----
DISPATCH_ROW = anchored(READER, re.compile(r'^(?:"[^"]*",)?"?KERNEL_DISPATCH"?,'), "KERNEL_DISPATCH")
STATS_HEAD = anchored(READER, re.compile(r'^"?Name"?,"?Calls"?,"?TotalDurationNs"?'), "TotalDurationNs", after=64)
AGENT_FIELD = re.compile(r"^(?:Agent \d+|-?\d+(?:\.\d+)?)$")

# ---- profilers' tables ----
TORCH_HEAD = anchored(READER, re.compile(r"^\s*Name\s{2,}Self CPU %\s{2,}Self CPU\s{2,}.*\bSelf (?P<dev>CUDA|XPU|HIP|MPS|"
                                         r"Device|PrivateUse1)\b"), "Self CPU %", after=200)
TORCH_CPU_COLS = ("Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg")
NSYS_TITLE = anchored(READER, re.compile(r"\bcuda_gpu_kern_sum\b|\bgpukernsum\b|CUDA Kernel Statistics"),
                      "cuda_gpu_kern_sum", "gpukernsum", "CUDA Kernel Statistics", after=64)
NSYS_ROW = re.compile(r"^\s*\d+(?:\.\d+)?\s{2,}[\d,]+\s{2,}[\d,]+\s{2,}(?:[\d,.]+\s{2,}){3,5}(?P<k>\S.*?)\s*$")
# a Triton kernel's launch in a Python traceback: the code line under a `File "...", line N, in f`
# frame is `fused_moe_kernel[grid](` (JITFunction.__getitem__ binds the grid, the call launches it)
TRITON_FILE = re.compile(r'File "[^"]*[/\\]triton[/\\]')          # a frame of Triton's own package
TB_FRAME = re.compile(r'^\s*File "[^"]+", line \d+, in \S+')
TRITON_LAUNCH = anchored(READER, re.compile(r"^\s+(?P<k>[A-Za-z_]\w*)\[(?P<grid>[^\]\[]{1,120})\]\("), "](")
NVPROF_HEAD = anchored(READER, re.compile(r"^\s*GPU activities:"), "GPU activities:", after=64)
NVPROF_ROW = re.compile(r"^\s*(?:GPU activities:)?\s+\d+(?:\.\d+)?%\s+\S+\s+\d+\s+\S+\s+\S+\s+\S+\s+(?P<k>\S.*?)\s*$")
DEVICE_COPY = re.compile(r"^\[?(?:CUDA )?(?:memcpy|memset|Memcpy|Memset)|^Memcpy|^Memset|^\[memory\]", re.I)

# ---- compilers ----
BUILT_LINES: tuple[tuple[re.Pattern, str], ...] = (
    (anchored(READER, re.compile(r"ptxas info\s*: Compiling entry function '(?P<k>[^']+)' for '(?P<arch>\w+)'"),
              "Compiling entry function"), "ptxas"),
    (anchored(READER, re.compile(r"^\s*(?:\.(?:visible|weak)\s+)?\.entry\s+(?P<k>[A-Za-z_$][\w$]*)\s*\("), ".entry"), "PTX"),
    (anchored(READER, re.compile(r"^\s*\.amdhsa_kernel\s+(?P<k>\S+)"), ".amdhsa_kernel"), "AMDGPU assembler"),
    (anchored(READER, re.compile(r"\bdefine\s+(?:[\w()]+\s+)*(?:amdgpu_kernel|ptx_kernel)\s+void\s+@\"?(?P<k>[\w.$]+)"),
              "amdgpu_kernel", "ptx_kernel"), "LLVM IR"),
    (anchored(READER, re.compile(r"\btt\.func public @(?P<k>\w+)\("), "tt.func public"), "Triton"),
    # hipcc/clang `-Rpass-analysis=kernel-resource-usage`: one block per kernel (clang-19 lists no
    # device function it called, noinline or not)
    (anchored(READER, re.compile(r"remark: Function Name: (?P<k>\S+) \[-Rpass-analysis=kernel-resource-usage\]"),
              "Function Name: "), "clang kernel-resource-usage"),
    (anchored(READER, re.compile(r"async_compile\.triton\(\s*'(?P<k>\w+)'"), "async_compile.triton("), "TorchInductor"),
)

# ---- tuners ----
TUNED_LINES: tuple[tuple[re.Pattern, str], ...] = (
    (anchored(READER, re.compile(r"Autotuning kernel (?P<k>\w+) with config"), "Autotuning kernel"), "Triton autotuner"),
    (anchored(READER, re.compile(r"Triton autotuning for function (?P<k>\w+)"), "Triton autotuning for function"),
     "Triton autotuner"),
)
AUTOTUNE_HEAD = anchored(READER, re.compile(r"^AUTOTUNE (?P<op>\w+)\("), "AUTOTUNE ", after=16)
AUTOTUNE_ROW = re.compile(r"^\s+(?P<k>triton_\w+) (?P<ms>\d+(?:\.\d+)?) ms \d+(?:\.\d+)?%")

# ---- a person's words ----
# the fault words a line must hold for a backticked name on it to be the faulting kernel's
FAULT_WORDS = re.compile(r"(?P<f>Warp Illegal Address|illegal memory access|illegal address|misaligned address|"
                         r"Memory access fault|page fault|CUDA_EXCEPTION_\d+|CUDA Exception|cudaError[A-Z]\w+|hipError[A-Z]\w+|"
                         r"CUDA error|HIP error|segfault|segmentation fault|out of bounds|crash(?:es|ed)?)", re.I)
NEAR = 2                  # lines either side of a fault word in which a backticked kernel name is read
words(READER, "illegal memory access", "illegal address", "Illegal Address", "Memory access fault", "CUDA error",
      "HIP error", "faulting kernel", "kernel:", "in kernel", "crash", "segfault", "misaligned", after=4,
      ignore_case=True)
# `kernel: void X<...>(...)`, `faulting kernel is `X``, `crash in kernel X`, `error in kernel X`
NAMED_LINES = (
    re.compile(r"\b(?:kernel|Kernel)\s*[:=]\s*`?(?P<k>(?:void\s+)?[A-Za-z_][\w:]*(?:<[^`]*?>)?\([^`)]*\))`?"),
    re.compile(r"\b(?:faulting|failing|crashing|offending|culprit|problematic|hanging|guilty)\s+kernel\s+"
               r"(?:is|was|seems to be|appears to be|:)?\s*`(?P<k>[^`]+)`"),
    re.compile(r"\b(?:faulting|failing|crashing|offending|culprit|problematic|hanging|guilty)\s+kernel\s+"
               r"(?:is|was|seems to be|appears to be|:)\s*(?P<k>[A-Za-z_][\w:]*(?:<[^\s]*?>)?)"),
    re.compile(r"\b(?:error|fault|crash(?:es|ed)?|exception|triggered|illegal address|illegal memory access)\s+"
               r"(?:in|inside|from)\s+(?:the\s+)?kernel\s+`?(?P<k>[A-Za-z_][\w:]*(?:<[^`\s]*?>)?)`?", re.I),
    # a title's `illegal memory access in fused_marlin_moe`: a snake_case or *Kernel name, never a file or a call
    re.compile(r"\b(?:illegal memory access|illegal address|memory access fault|misaligned address|crash(?:es|ed)?|"
               r"segfaults?)\s+(?:in|inside|at)\s+(?:the\s+)?`?(?P<k>[A-Za-z_]\w*(?:_[A-Za-z0-9]\w*|Kernel\w*))`?"
               r"(?![\w.(`]|::)", re.I),
)
# a launch's own syntax names an entry point: `matrixMultiply<<<dimGrid, dimBlock>>>(...)` (a program's
# `CUDA error in kernel launch: %s at kernel "#call"` macro prints the call as written)
LAUNCH_SYNTAX = re.compile(r"(?<![\w:])(?P<k>[A-Za-z_][\w:]*(?:<[^<>`]*>)?)\s*<<<")
# words after `error in kernel` that are no kernel's name
NOT_A_NAME = frozenset({"launch", "execution", "call", "code", "image", "mode", "function", "module", "the", "a", "an"})
BACKTICKED = re.compile(r"`(?P<k>[^`\s]{3,200}|void [^`]{3,300})`")
# what a backticked token must look like to be taken for a kernel (no env var, no Python call, no path)
KERNELISH = re.compile(r"(?i)kernel|^triton_|^void |^_Z\w+$|<.*>|^__omp_offloading_|^Cijk_")
NOT_KERNEL = re.compile(r"^[A-Z0-9_]+(?:=.*)?$|[/\\]|\.py\b|^torch\.|^cuda[A-Z]|^hip[A-Z]|^(?:CUDA|HIP)_|\s*=|'$|^\w+\.\w+\(")
FAULT_KIND = {"warp illegal address": "warp-illegal-address", "illegal memory access": "illegal-address",
              "illegal address": "illegal-address", "misaligned address": "misaligned-address",
              "memory access fault": "memory-access-fault", "page fault": "page-fault",
              "segfault": "segmentation-fault", "segmentation fault": "segmentation-fault",
              "out of bounds": "out-of-bounds",
              # words that say something failed, not which fault: no kind (a source file prints them too)
              "crash": None, "crashes": None, "crashed": None, "cuda error": None, "hip error": None,
              "cuda exception": None}
NAMED_HINT = re.compile(r"kernel|`|illegal|fault|crash|misaligned", re.I)     # a line _named may read


def _plain(name: str) -> str:
    name = name.strip().strip("`").strip()
    return demangle(name) or name


def _fault_on(text: str) -> re.Match | None:
    """The line's fault word that names a kind (`Warp Illegal Address` over `crash`), else its first."""
    found = list(FAULT_WORDS.finditer(text))
    return (next((m for m in found if FAULT_KIND.get(m["f"].lower())), None)      # a kind of its own
            or next((m for m in found if _fault_kind(m)), found[0] if found else None))


def _fault_kind(m: re.Match | None) -> str | None:
    """The fault a line's words name, as a kind (`crash` names none)."""
    if m is None:
        return None
    f = m["f"]
    if f.lower() in FAULT_KIND:
        return FAULT_KIND[f.lower()]
    return f if f.startswith(("cudaError", "hipError", "CUDA_EXCEPTION")) else f.lower().replace(" ", "-")


def find_mentions(text: str, name: str) -> list[KernelMention]:
    """Every kernel the text names in one of the formats above, in the order of its lines."""
    out: list[KernelMention] = []
    lines = list(numbered_lines(text))
    i, n = 0, len(lines)
    nsys_at = -10**9          # the line of the last cuda_gpu_kern_sum title
    faults_at: dict[int, re.Match | None] = {}

    def fault_on(k: int) -> re.Match | None:
        """A line's fault word, found once: each line is asked by its NEAR neighbours on either side
        (a kernel trace names `kernel` on every line: 16k lines were 100k scans, 24 s)."""
        if k not in faults_at:
            faults_at[k] = _fault_on(lines[k].text)
        return faults_at[k]

    while i < n:
        ln = lines[i]
        s, o = ln.text, Origin(name, ln.no)
        i += 1
        if not s.strip():
            continue
        if (m := DUMP_HEAD.match(s.strip())):
            body = []
            while i < n and lines[i].text.strip() != DUMP_END and len(body) < 4000:
                body.append(lines[i].text)
                i += 1
            if any(GPU_ISA.search(b) for b in body[:64]):
                k = _plain(m["k"])
                out.append(KernelMention(o, k, DISASSEMBLED, "gdb", f"the debugger disassembled it (GPU code): {s.strip()}"))
            continue
        if (m := DISASM.match(s.strip())) and "=>" in (m["mark"] or "") and m["sym"] and GPU_ISA.search(m["rest"]):
            out.append(KernelMention(o, _plain(m["sym"]), DISASSEMBLED, "gdb",
                                     f"the debugger's current instruction is in it (+{m['off']}): {s.strip()}"))
            continue
        if "KERNEL_DISPATCH" in s and (m := DISPATCH_ROW.match(s.strip())):
            k = _dispatch_kernel(s.strip())
            if k:
                out.append(KernelMention(o, _plain(k), DISPATCHED, "rocprofv3", "a kernel-trace row dispatches it"))
            continue
        if (m := STATS_HEAD.match(s.strip())):
            while i < n and lines[i].text.strip().startswith('"'):
                row = next(csv.reader([lines[i].text.strip()]), [])
                if row and row[0]:
                    out.append(KernelMention(Origin(name, lines[i].no), _plain(row[0]), DISPATCHED, "rocprofv3",
                                             f"rocprofv3's kernel statistics list it dispatched ({row[1] if len(row) > 1 else '?'} calls)"))
                i += 1
            continue
        if (m := TORCH_HEAD.match(s)):
            i = _torch_table(lines, i, s, name, out)
            continue
        if NSYS_TITLE.search(s):
            nsys_at = ln.no
            continue
        if ln.no - nsys_at < 400 and (m := NSYS_ROW.match(s)):
            k = m["k"]
            if not DEVICE_COPY.search(k):
                out.append(KernelMention(o, _plain(k), LAUNCHED, "nsys", "nsys's GPU kernel summary (cuda_gpu_kern_sum) lists it"))
            continue
        if NVPROF_HEAD.match(s):
            j = i - 1
            while j < n and (j == i - 1 or not lines[j].text.lstrip().startswith("API calls:")):
                r = NVPROF_ROW.match(lines[j].text)
                if r and not DEVICE_COPY.search(r["k"]):
                    out.append(KernelMention(Origin(name, lines[j].no), _plain(r["k"]), LAUNCHED, "nvprof",
                                             "nvprof's GPU activities list it"))
                elif j > i - 1 and not r:
                    break
                j += 1
            i = j
            continue
        if (m := TRITON_LAUNCH.match(s)) and i >= 2 and TB_FRAME.match(lines[i - 2].text) and (
                "grid" in m["grid"] or "kernel" in m["k"].lower()
                or any(TRITON_FILE.search(ln2.text) for ln2 in lines[i:i + 4] if TB_FRAME.match(ln2.text))):
            # (a module list's `layers[i](x)` is no launch: the grid, the name or Triton's own frame below says)
            out.append(KernelMention(o, m["k"], LAUNCHED, "Triton (traceback)",
                                     f"the traceback shows its launch {m['k']}[{m['grid']}](...) "
                                     f"(at {lines[i - 2].text.strip()})"))
            continue
        if (m := AUTOTUNE_HEAD.match(s)):
            while i < n and (r := AUTOTUNE_ROW.match(lines[i].text)):
                out.append(KernelMention(Origin(name, lines[i].no), r["k"], TUNED, "TorchInductor",
                                         f"Inductor's max-autotune benchmarked it for {m['op']} ({r['ms']} ms)"))
                i += 1
            continue
        hit = False
        for rx, producer in BUILT_LINES:
            if (m := rx.search(s)):
                out.append(KernelMention(o, _plain(m["k"]), BUILT, producer, f"{producer} built it: {s.strip()[:160]}"))
                hit = True
                break
        for rx, producer in TUNED_LINES if not hit else ():
            if (m := rx.search(s)):
                out.append(KernelMention(o, m["k"], TUNED, producer, f"{producer} tuned it: {s.strip()[:160]}"))
                hit = True
                break
        if not hit and NAMED_HINT.search(s):
            near = fault_on(i - 1) or next((f for k in range(max(i - 1 - NEAR, 0), min(i + NEAR, n))
                                             if (f := fault_on(k))), None)
            out.extend(_named(s, o, near))
    return out


def _dispatch_kernel(row: str) -> str | None:
    """The kernel of a kernel-trace row: the first field after the kind that is neither a number nor
    an agent (`Agent 4` in rocpd's CSV); the header may be cut or absent in a paste."""
    fields = next(csv.reader([row]), [])
    try:
        k = fields.index("KERNEL_DISPATCH")
    except ValueError:
        return None
    return next((f for f in fields[k + 1:] if f and not AGENT_FIELD.match(f.strip())), None)


def _torch_table(lines, i: int, head: str, name: str, out: list[KernelMention]) -> int:
    """The rows of a PyTorch profiler table after its header; returns the index after the table."""
    cols = re.split(r"\s{2,}", head.strip())
    dev = next((c for c in cols if c.startswith("Self ") and c not in ("Self CPU", "Self CPU %") and not c.endswith("%")),
               None)
    cpu = [cols.index(c) for c in TORCH_CPU_COLS if c in cols]
    if dev is None:
        return i
    d = cols.index(dev)
    n = len(lines)
    seen_rule = 0
    while i < n:
        s = lines[i].text
        i += 1
        if re.match(r"^\s*-{5,}", s):
            seen_rule += 1
            if seen_rule >= 2:
                return i
            continue
        cells = re.split(r"\s{2,}", s.strip())
        if len(cells) != len(cols):
            if not s.strip() or s.lstrip().startswith(("Self CPU time total", "Self CUDA time total")):
                return i
            continue
        if all(_zero(cells[c]) for c in cpu) and not _zero(cells[d]) and not DEVICE_COPY.search(cells[0]):
            k = cells[0].strip()
            cut = k.endswith("...")
            out.append(KernelMention(Origin(name, lines[i - 1].no), k[:-3].strip() if cut else _plain(k), LAUNCHED,
                                     "PyTorch profiler", f"the PyTorch profiler's table lists it on the device "
                                     f"({dev} {cells[d]})" + ("; its name is cut by the table" if cut else ""), cut=cut))
    return i


def _zero(cell: str) -> bool:
    digits = re.sub(r"[^\d]", "", cell)
    return bool(digits) and set(digits) == {"0"}


def _named(s: str, o: Origin, fault: re.Match | None) -> list[KernelMention]:
    """A person's words naming the faulting kernel, or a backticked kernel name beside a fault word
    (`fault`: on this line or within NEAR lines of it)."""
    for rx in NAMED_LINES:
        if (m := rx.search(s)):
            k = _plain(m["k"]).rstrip(":")
            if NOT_KERNEL.search(k) or len(k) < 3 or k.lower() in NOT_A_NAME:
                continue
            return [KernelMention(o, k, NAMED, "the text", f"the text names it: {s.strip()[:200]}", _fault_kind(fault))]
    if fault is None:
        return []
    launched = [m["k"] for m in LAUNCH_SYNTAX.finditer(s) if m["k"].lower() not in NOT_A_NAME]
    if launched:
        return [KernelMention(o, k, NAMED, "the text", f"the text launches it (<<<...>>>) beside a fault "
                              f"({fault['f']}): {s.strip()[:200]}", _fault_kind(fault)) for k in dict.fromkeys(launched)]
    out = []
    for m in BACKTICKED.finditer(s):
        k = m["k"].strip()
        if KERNELISH.search(k) and not NOT_KERNEL.search(k) and not FAULT_WORDS.fullmatch(k):
            out.append(KernelMention(o, _plain(k), NAMED, "the text",
                                     f"the text names it beside a fault ({fault['f']}): {s.strip()[:200]}",
                                     _fault_kind(fault)))
    return out
