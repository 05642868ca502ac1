"""The target's own output (server stdout/stderr): HSA statuses, ROCr's and the CUDA driver's fault
lines, ROCclr's queue callbacks, HIP/CUDA/PyTorch error text, Python tracebacks, the debug agent's
wave dumps, GPU core-dump lines."""

from __future__ import annotations

import re

from ..analyze.log_claims import driver_claims, log_claims
from ..analyze.record_faults import assert_claims, assert_faults
from ..analyze.watchdog_claims import watchdog_claims
from ..ingest.prefilter import RUNTIME
from ..ingest.normalize import for_runtime
from ..ingest.runtime_log import parse_runtime_log
from .source import Source, anchors, parser_anchors

MARKERS = re.compile(
    r"Memory access fault by GPU|HW Exception by GPU|[Aa]borting with|Memory Fault Error \[|Traceback \(most recent|"
    r"(?:HIP|CUDA) error: |wave_\d+: pc=|\[rocr debug agent\]|ShaderName :|Kernel Name: |OFFLOAD ERROR|GPU core ?dump|GPU coredump|coredump: |"
    r"Queue error|Dispatch Header|Fatal Python error|inactivated due to async error|System event \(HSA_AMD|"
    # device-side asserts and the NCCL/RCCL watchdog: pasted beside dmesg, they are runtime lines too
    r"\] Assertion `|Device-side assertion `|Watchdog caught collective|detected by watchdog|Process group watchdog|"
    r"Memory critical error by agent|Memory exception on virtual address|HSA_STATUS_ERROR_|Triton Error \[|Warp CUDA error ")

# Lines that say the host process died (CPython, a shell): a stack pasted under one without its thread
# header is a crash's, not a hang's (sources/stacks.py).
PROCESS_DEATHS = anchors("Segmentation fault", "Fatal Python error", stop=True)
# Lines that mean the GPU or the process died (ROCr, ROCclr, HIP, the CUDA driver, CPython, a shell).
STOPS = PROCESS_DEATHS + anchors("Memory access fault by GPU", "HW Exception by GPU", "aborting with error",
                "aborting with status", "Memory Fault Error [", "HIP error: ", "CUDA error: ",
                "OFFLOAD ERROR", "illegal memory access", "coredump: Detected an exception", "Generating GPU core dump",
                "GPU core dump created",
                # ROCr's memory error (hsa_amd_memory_error) and NVIDIA Warp's check_cuda_result: faults to the
                # parser, and so the end of a capture
                "Memory critical error by agent", "Warp CUDA error ", stop=True)


def _claims(inc, setting):
    return driver_claims(inc.runtime) + log_claims(inc.runtime, setting.rocm_version) + assert_claims(inc.runtime) \
        + watchdog_claims(inc.runtime)


def _gather(inc, log, text):
    inc.runtime.extend(log)


SOURCE = Source(
    "runtime-log", "the target's output: runtime and framework fault lines, tracebacks, wave dumps",
    kind=RUNTIME, markers=MARKERS, anchors=STOPS + parser_anchors(RUNTIME, STOPS),
    reads=frozenset({RUNTIME, "debugger"}),      # a debugger's transcript holds the target's output too
    parse=lambda t: parse_runtime_log(for_runtime(t.text), t.name), gather=_gather, claims=_claims,
    faults=lambda inc: assert_faults(inc.runtime),
    json_keys=("report_points", "wave_dumps", "core_dump_lines"),
    sections=("Decoded", "Wave dumps", "Queue analysis", "Where it was reported", "Codes"))
