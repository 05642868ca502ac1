"""One reading of a CUDA or HIP runtime/driver error, wherever in a line and whoever printed it.

Every library that checks a CUDA/HIP call prints the runtime's own words around its own: PyTorch's
`CUDA error: an illegal memory access was encountered`, flashinfer's `CUDA Error: an illegal memory
access was encountered (700) file: line N at function F`, XLA's `CUDA_ERROR_ILLEGAL_ADDRESS: an
illegal memory access was encountered` inside a glog line, NCCL's `Cuda failure 700 'an illegal memory
access was encountered'`, TensorRT's `Error Code 1: Cuda Runtime (an illegal memory access was
encountered)`, Triton's `Triton Error [CUDA]: ...`. What they share is the error itself: its enum
name (cudaErrorX, CUDA_ERROR_X, hipErrorX), its message (cudaGetErrorString's) or its number after a
CUDA/HIP error word. Each of these, found anywhere in the line, gives the error's row of the one
table (codes.GPU_ERRORS): its number, its names, whether a kernel failed on the GPU.

A message shared with other software ("invalid argument", "out of memory") counts only with a
CUDA/HIP word before it on the line; the enum names and the device-side messages count alone.
"""

from __future__ import annotations

from .. import lazy_re as re   # compiled at first use: start-up (issue #35)
from dataclasses import dataclass

from ..codes import GPU_ERROR_BY_CODE, GPU_ERROR_BY_NAME, GPU_ERRORS, LIBRARY_STATUS, GpuError
from .prefilter import RUNTIME, anchored


def _message_alternation(own: bool) -> str:
    """The table's messages, longest first (so `operation not supported on global/shared address space`
    wins over `operation not supported`), the first letter in either case (a caller's capital)."""
    # (ties by their text: a set's order changes with each process's hash seed, and the pattern's
    # text must not, or re_cache compiles it anew every run)
    msgs = sorted({e.message for e in GPU_ERRORS if e.own == own}, key=lambda m: (-len(m), m))
    return "|".join(f"[{re.escape(m[0].lower())}{re.escape(m[0].upper())}]{re.escape(m[1:])}" if m[0].isalpha()
                    else re.escape(m) for m in msgs)


# the number right after the message: flashinfer's ` (700)`, a program's `(error 700)` / `code 700`
_NUMBER_AFTER = r"(?:'?\W{0,3}\(?(?:error |code |err=)?(?P<after>\d{1,4})\b)?"
# a CUDA/HIP error word and the number it introduces: `CUDA error 700`, `Cuda failure 700 '...'`,
# `HIP error code: 719`, `CUDA runtime error 2`
_APIS, _KINDS = ("CUDA", "Cuda", "cuda", "HIP", "Hip", "hip"), ("runtime ", "driver ", "Runtime ", "Driver ")
_WORDS = ("error", "Error", "ERROR", "failure", "Failure", "FAILURE")
ERROR_WORDS = tuple(f"{api} {kind}{word}" for api in _APIS for kind in ("", *_KINDS) for word in _WORDS)
# the same 180 words as one product (the alternation of all 180 was 7 ms of this pattern's 17 ms compile,
# which every triage of a log with an error line pays)
_ERROR_WORD = (f"(?:{'|'.join(_APIS)}) (?:{'|'.join(_KINDS)})?(?:{'|'.join(_WORDS)})")
NAMES = tuple(sorted(GPU_ERROR_BY_NAME, key=len, reverse=True))
GPU_ERROR = re.compile(
    r"(?<![\w])(?P<name>" + "|".join(map(re.escape, NAMES)) + r")(?!\w)" + r"(?:\W{0,3}\(?(?P<named>\d{1,4})\)?)?"
    r"|(?P<lib>" + "|".join(map(re.escape, sorted(LIBRARY_STATUS, key=len, reverse=True))) + r")(?!\w)"
    r"|(?P<own>" + _message_alternation(True) + r")" + _NUMBER_AFTER.replace("after", "own_no") +
    r"|(?P<shared>" + _message_alternation(False) + r")(?!\w)" + _NUMBER_AFTER.replace("after", "shared_no") +
    r"|(?P<word>" + _ERROR_WORD + r")s?"
    r"(?: code| number| #)?[:= ]{1,3}(?P<num>\d{1,4})\b")
anchored(RUNTIME, GPU_ERROR, *NAMES, *LIBRARY_STATUS, *(e.message[1:] for e in GPU_ERRORS), *ERROR_WORDS)

# which runtime a message was printed by, from the words before it on its line
CUDA_WORD = re.compile(r"\b(?:CUDA|Cuda|cuda|cu[A-Z]\w*|CU[A-Z]+_|cudnn|cuDNN|CUDNN|cublas|cuBLAS|CUBLAS|NCCL|TRT|"
                       r"TensorRT|nvrtc|NVRTC)")
HIP_WORD = re.compile(r"\b(?:HIP|Hip|hip|ROCm|rocm|HSA|hsa|RCCL|MIOpen|miopen|rocBLAS|rocblas|hipBLAS|hipblas)")
# a line that only warns (gdb's `warning:`, glog's `W1201`, a logger's WARNING): a host call's failure
# there is a tool's notice, not the program's error (a device error is one wherever it is printed)
WARNING = re.compile(r"\s*(?:warning:|W\d{4} |WARNING\b|\[W\])", re.I)
# a CUDA/HIP error word: what a shared message must follow (`CUDA error: out of memory`, TensorRT's
# `Cuda Runtime (invalid argument)`, ggml's `ROCm error: ...`)
ERROR_CONTEXT = re.compile(r"\b(?:CUDA|Cuda|cuda|HIP|Hip|hip|ROCm)[ _]?(?:[Rr]untime |[Dd]river )?"
                           r"(?:[Ee]rror|ERROR|[Ff]ailure|FAILURE|Runtime)\b")
# a word of failure beside a host call's error name (`CUDA error: CUDA_ERROR_OUT_OF_MEMORY`, `failed with ...`)
FAILED = re.compile(r"(?i)\b(?:error|fail(?:ed|ure)?|abort(?:ed|ing)?|fatal|exception)\b")
NEAR = 80       # a shared message's CUDA/HIP word is this close before it (`CUDA error: out of memory`)


@dataclass(frozen=True)
class GpuErrorHit:
    """A CUDA/HIP error read off a line: its row of the table, and what the line printed."""
    error: GpuError | None       # None: a number after an error word that the table does not know
    code: int | None
    api: str                     # CUDA | HIP | CUDA/HIP (a message both runtimes print, no word says which)
    name: str | None             # the enum name, where the line printed one
    text: str                    # the message (printed, or the table's)
    start: int
    end: int


def _api(line: str, before: int) -> str:
    head = line[:before]
    cuda = [m.start() for m in CUDA_WORD.finditer(head)]
    hip = [m.start() for m in HIP_WORD.finditer(head)]
    if cuda and (not hip or cuda[-1] > hip[-1]):
        return "CUDA"
    if hip:
        return "HIP"
    tail = line[before:]          # (`... (cudaErrorIllegalAddress)` after the message)
    if CUDA_WORD.search(tail) and not HIP_WORD.search(tail):
        return "CUDA"
    if HIP_WORD.search(tail) and not CUDA_WORD.search(tail):
        return "HIP"
    return "CUDA/HIP"


def find(line: str) -> GpuErrorHit | None:
    """The CUDA/HIP error the line states, or None: the first enum name printed on it (it decides
    the row; a message beside it is the same error's text or a caller's own), else the first
    message or numbered error word."""
    first: GpuErrorHit | None = None
    for m in GPU_ERROR.finditer(line):
        hit = _hit(line, m)
        if hit is None:
            continue
        if m.group("name"):
            if first is not None and first.error is hit.error:
                return GpuErrorHit(hit.error, hit.code, hit.api, hit.name, first.text, first.start, hit.end)
            return hit
        if first is None:
            first = hit
    return first


def _hit(line: str, m: re.Match) -> GpuErrorHit | None:
    if m.group("name"):
        name = m.group("name")
        err = GPU_ERROR_BY_NAME[name]
        if not err.device and not FAILED.search(line[:m.start()] + " " + line[m.end():]):
            return None           # a host call's error named without a word of failure: a note's rest, not an error
        api = "HIP" if name.startswith("hip") else "CUDA"
        return GpuErrorHit(err, err.code, api, name, err.message, m.start(), m.end())
    if m.group("lib"):
        name = m.group("lib")         # a library's status: its name, no CUDA error number
        return GpuErrorHit(None, None, "HIP" if name.startswith("HIP") else "CUDA", name, name, m.start(), m.end())
    if m.group("own") or m.group("shared"):
        text = m.group("own") or m.group("shared")
        err = next(e for e in GPU_ERRORS if e.message.lower() == text.lower())
        api = _api(line, m.start())
        if m.group("shared") and not ERROR_CONTEXT.search(line, max(0, m.start() - NEAR), m.start()):
            return None           # `invalid argument` of some other program, PyTorch's allocator's `HIP out of memory`
        return GpuErrorHit(err, err.code, api, None, text, m.start(), m.end())
    code = int(m.group("num"))
    if code == 0:
        return None               # success
    err = GPU_ERROR_BY_CODE.get(code)
    api = "HIP" if m.group("word").lower().startswith("hip") else "CUDA"
    return GpuErrorHit(err, code, api, None, err.message if err else f"error {code}", m.start(), m.end())
