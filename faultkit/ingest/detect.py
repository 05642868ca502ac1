"""Decide what a file is from its content, not its name."""

from __future__ import annotations

import re

from .text import ANSI

# Under re.M, `\s` after `^` would run across the newlines that follow and back off at every
# line start: quadratic on blank lines (100 KB of newlines took > 30 s). Inside a line, only
# blanks and tabs.
KERNEL_MARKERS = re.compile(
    r"^(?:\d\d:\d\d:\d\d(?:\.\d+)? |\[[ \t]*\d+\.\d+\]|\[\w{3} [\w ]+\d\d:\d\d:\d\d \d{4}\]|\[[ \t]*\+\d+[.,]\d+\]|\S+ +\d{1,2} \d\d:\d\d:\d\d \S* ?kernel:|"
    r"\d{4}-\d\d-\d\dT\S+ \S+ kernel:)?[ \t]*(?:\[[ \t]*\d+\.\d+\][ \t]*)?(?:amdgpu[ :]|NVRM: |kfd |\[drm|drmn\d|gmc_v\d+_\d+_process_interrupt|"
    r"Evicting PASID|qcm fence|\S+\[\d+\]: segfault at )", re.M)
RUNTIME_MARKERS = re.compile(
    r"Memory access fault by GPU|HW Exception by GPU|[Aa]borting with|Memory Fault Error \[|Traceback \(most recent|"
    r"(?:HIP|CUDA) error: |wave_\d+: pc=|\[rocr debug agent\]|ShaderName :|Kernel Name: |OFFLOAD ERROR|GPU core ?dump|GPU coredump|coredump: |"
    r"Queue error|Dispatch Header|Fatal Python error|inactivated due to async error|System event \(HSA_AMD|"
    # device-side asserts and the NCCL/RCCL watchdog: pasted beside dmesg, they are runtime lines too
    r"\] Assertion `|Device-side assertion `|Watchdog caught collective|detected by watchdog|Process group watchdog|"
    r"Memory critical error by agent|Memory exception on virtual address|HSA_STATUS_ERROR_|Triton Error \[|Warp CUDA error ")
DEBUGGER_MARKERS = re.compile(r"^\(c?u?d?a?-?gdb\) |received signal (?:SIG|CUDA_EXC)|\[Switching to |CUDA Exception:|"
                              r"hit Catchpoint \d+ \(signal|^GNU gdb|^Program terminated with signal|^[ \t]*========= |"
                              r"AMDGPU (?:Wave|Lane|Dispatch|Queue|Agent) |stopped because of SIG|\*stopped,reason=|"
                              r"precise memory (?:violation )?signal reporting|^[ \t]*Kernel Parent Dev Grid|^\[Inferior \d+ \(process \d+\)|"
                              r"^\[New inferior \d+|A problem internal to GDB has been detected", re.M)


def detect_kinds(text: str) -> set[str]:
    """Kinds of evidence in a text file. A file may hold several (a pasted issue with both
    the server's stderr and its dmesg); a file with none is read as a runtime log."""
    sample = text if len(text) < 4_000_000 else text[:2_000_000] + text[-2_000_000:]
    if "\x1b" in sample:
        sample = ANSI.sub("", sample)
    kinds: set[str] = set()
    if KERNEL_MARKERS.search(sample):
        kinds.add("kernel-log")
    if RUNTIME_MARKERS.search(sample) or "kernel-log" not in kinds:
        kinds.add("runtime-log")
    if DEBUGGER_MARKERS.search(sample):
        kinds.add("debugger")
    return kinds
