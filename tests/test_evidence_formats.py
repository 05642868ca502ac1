"""Lines built from the producers' own format strings (docs/evidence-coverage.md names each one's
file:line), filled with varied values, parsed, and the values checked against what was filled in.
A format no sample showed is tested here all the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from faultkit.ingest.debugger import parse_debugger
from faultkit.ingest.kernel_log import parse_kernel_log
from faultkit.ingest.runtime_log import parse_runtime_log

# Kernel names as compilers spell them: long templates, lambdas, anonymous namespaces, hashes.
KERNELS = [
    "vector_add",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "(anonymous namespace)::read_unmapped(int const*, int*)",
    "void k<[lambda(int) (instance 1)]>(int*)",
    "Cijk_Ailk_Bjlk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x128x16_MI16x16x1_SN_1LDSB0_ISA1201_WS32_WG64_2_1",
    "triton_poi_fused_add_0",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
]
ADDRESSES = [0, 0x1000, 0x7f7d37c00000, 0xffffffffffff0000]


def _c(fmt: str, *args) -> str:
    """printf for the sources' format strings: length modifiers (ll, l, z) dropped, %p as 0x%x, %u as %d."""
    py = re.sub(r"%(0?\d*)(?:ll|l|z|h)?([duxXsp])",
                lambda m: "%" + m[1] + {"u": "d", "p": "x"}.get(m[2], m[2]) if m[2] != "p" else "0x%x", fmt)
    return py % args


# ---------------- ROCr ----------------

# runtime.cpp:1917-1922, :1815, :407-409 and queue.cpp:56 (rocm-systems 1b1610f)
VM_FAULT = "Memory access fault by GPU node-%u (Agent handle: %p) on address %p%s. Reason: %s.\n"
HW_EXCEPTION = "HW Exception by GPU node-%u (Agent handle: %p) reason :%s\n"
MEMORY_CRITICAL = ("Memory critical error by agent node-%u (Agent handle: %p) on address %p. Reason: "
                   "Memory in use. \n")
QUEUE_INACTIVATED = "Queue at %p inactivated due to async error:\n\t%s\n"
APERTURE = ("HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest "
            "legal address.")          # hsa.cpp:2746


@pytest.mark.parametrize("addr", ADDRESSES)
def test_rocr_fault_lines_from_the_format_strings(addr):
    text = (_c(VM_FAULT, 2, 0x55bc2dc19da0, addr, "(may not be exact address)", "Write access to a read-only page")
            + _c(HW_EXCEPTION, 3, 0x55bc2dc19da0, "GPU Hang")
            + _c(MEMORY_CRITICAL, 1, 0x55bc2dc19da0, addr)
            + _c(QUEUE_INACTIVATED, 0x7f2fb6e00000, APERTURE))
    log = parse_runtime_log(text)
    vm, hw, mem, q = log.faults
    assert (vm.kind, vm.node, vm.agent_handle, vm.address, vm.imprecise, vm.reason) == (
        "vm-fault", 2, "0x55bc2dc19da0", addr, True, "Write access to a read-only page")
    assert (hw.kind, hw.node, hw.reason) == ("hw-exception", 3, "GPU Hang")
    assert (mem.kind, mem.node, mem.address, mem.reason) == ("memory-error", 1, addr, "Memory in use")
    assert (q.kind, q.queue, q.status, q.code) == ("queue-error", "0x7f2fb6e00000",
                                                  "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION", 0x29)


# amd_core_dump.cpp :145, :131, :185 (fprintf) and :411 (perror, "white" as the source spells it)
@pytest.mark.parametrize("line", ["Failed to fetch agents snapshot.", "Failed to fetch driver ABI version.",
                                  "Failed to build the NT_AMDGPU_CORE_STATE note.",
                                  "Failed to white core dump: No space left on device"])
def test_rocr_core_dump_failures_from_the_source(line):
    notes = [n for n in parse_runtime_log(line + "\n").notes if n.kind == "gpu-core-dump"]
    assert [(n.text, n.fields["event"], n.fields["failed"]) for n in notes] == [(line, "failed", True)]


# ---------------- ROCclr / HIP ----------------

# rocvirtual.cpp:2889-2893 (clr f9f995c); prefix ":%d:%-25s:%-4d: %010lld us: [pid:%-5d tid:0x%s] "
CALLBACK = "Callback: Queue %p aborting with error : %s code: 0x%x"
CALLBACK_OOM = "Callback: Queue %p Aborting with error : %s Code: 0x%x Available Free mem : %zu MB"


def test_rocclr_callback_formats_from_the_source():
    prefix = ":0:rocvirtual.cpp          :2893: 0053892590555 us: [pid:4711  tid:0x7f1e2b7fe640] "
    text = (prefix + _c(CALLBACK, 0x7f2fb6e00000, APERTURE, 0x29) + "\n"
            + prefix + _c(CALLBACK_OOM, 0x7f2fb6e00000, "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to "
                          "allocate the necessary resources.", 0x1008, 512) + "\n")
    a, b = parse_runtime_log(text).faults
    assert (a.kind, a.queue, a.status, a.code, a.pid, a.rocclr_line) == (
        "queue-callback", "0x7f2fb6e00000", "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION", 0x29, 4711, 2893)
    assert (b.status, b.code) == ("HSA_STATUS_ERROR_OUT_OF_RESOURCES", 0x1008)


# rocdevice.cpp (rocm-systems d78123a, the line ROCclr's prefix prints): the 2026 kernel identity
MEMORY_FAULT_ERROR = "Memory Fault Error [host: %s, GPU index: %d, faulting addr: %p, kernel: %s]"
CALLBACK_2026 = "Callback: Queue %p aborting with error : %s code: 0x%x [host: %s, GPU index: %d, kernel: %s]"


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("addr", ADDRESSES[1:])
def test_rocclr_kernel_identity_lines_keep_every_kernel_spelling(kernel, addr):
    text = (":0:rocdevice.cpp            :3905: 53892590555 us:  " + _c(MEMORY_FAULT_ERROR, "node7", 1, addr, kernel)
            + "\n" + _c(CALLBACK_2026, 0x7f2fb6e00000, APERTURE, 0x29, "node7", 1, kernel) + "\n")
    mfe, cb = parse_runtime_log(text).faults
    assert (mfe.kind, mfe.host, mfe.gpu_index, mfe.address, mfe.kernel) == ("memory-fault-error", "node7", 1, addr,
                                                                            kernel)
    assert (cb.kind, cb.gpu_index, cb.kernel, cb.code) == ("queue-callback", 1, kernel, 0x29)


# hipamd/include/hip/amd_detail/hip_assert.h:49 (clr f9f995c)
HIP_ASSERT = "%s:%u: %s: Device-side assertion `%s' failed.\n"


@pytest.mark.parametrize("func", KERNELS[:4])
def test_hip_device_assert_from_the_format_string(func):
    text = _c(HIP_ASSERT, "/src/app/kernels.hip", 42, func, "idx < n && \"out of range\"")
    (a,) = parse_runtime_log(text).device_asserts
    assert (a.runtime, a.file, a.line, a.function, a.assertion, a.block, a.count) == (
        "HIP", "/src/app/kernels.hip", 42, func, 'idx < n && "out of range"', None, 1)


# ---------------- PyTorch / CUDA runtime ----------------

# CUDA's __assertfail (closed source): the shape PyTorch's index kernels print, one line per thread
CUDA_ASSERT = "%s:%d: %s: block: [%d,%d,%d], thread: [%d,%d,%d] Assertion `%s` failed.\n"


def test_cuda_device_assert_line():
    expr = '-sizes[i] <= index && index < sizes[i] && "index out of bounds"'
    text = "".join(_c(CUDA_ASSERT, "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu", 93, "operator()", 7, 0, 0,
                      t, 0, 0, expr) for t in (32, 33, 34))
    text += _c(CUDA_ASSERT, "/src/k.cu", 12, KERNELS[1], 0, 0, 0, 0, 0, 0, "x != 0")
    a, b = parse_runtime_log(text).device_asserts
    assert (a.runtime, a.file, a.line, a.function, a.assertion, a.block, a.thread, a.count) == (
        "CUDA", "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu", 93, "operator()", expr, (7, 0, 0), (32, 0, 0), 3)
    assert (b.function, b.line, b.assertion) == (KERNELS[1], 12, "x != 0")


# ProcessGroupNCCL.cpp (pytorch cf1380d): createLogPrefix + WorkNCCL::checkTimeout + operator<<(WorkNCCL)
PG_PREFIX_NAMED = "[PG ID %d PG GUID %s(%s) Rank %d] "
PG_PREFIX = "[PG ID %d PG GUID %s Rank %d] "
TIMEOUT = ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, "
           "Timeout(ms)=%d) ran for %d milliseconds before timing out.")


@pytest.mark.parametrize("prefix, tag", [
    (_c(PG_PREFIX_NAMED, 0, "0", "default_pg", 3), "rank 3 (default_pg)"),
    (_c(PG_PREFIX, 2, "5", 11), "rank 11 (PG 2)"),
    ("[Rank 1] ", "rank 1"),
    ("", "rank3")])         # (no prefix of its own: torchrun's `[rank3]:` on the line names the rank)
def test_watchdog_timeout_with_the_process_group_prefix(prefix, tag):
    line = "[rank3]:[E1105 12:00:00.123456789 ProcessGroupNCCL.cpp:632] " + prefix + _c(
        TIMEOUT, 20, "ALLGATHER", 10, 20, 600000, 600013)
    (f,) = parse_runtime_log(line + "\n").faults
    assert (f.kind, f.reason, f.process_tag) == ("collective-timeout", "ALLGATHER #20 waited 600.013 s", tag)


def test_watchdog_thread_terminated_with_a_cuda_error():
    text = ("terminate called after throwing an instance of 'c10::DistBackendError'\n  what():  "
            + _c(PG_PREFIX_NAMED, 0, "0", "default_pg", 0)
            + "Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was "
              "encountered\n")
    (e,) = parse_runtime_log(text).host_errors
    assert (e.api, e.text, e.exception) == ("CUDA", "an illegal memory access was encountered",
                                            "watchdog thread terminated with exception")


# ggml/src/ggml-cuda/ggml-cuda.cu ggml_cuda_error: the function named is a host function
def test_ggml_cuda_error_block():
    text = ("CUDA error: an illegal memory access was encountered\n"
            "  current device: 0, in function ggml_backend_cuda_synchronize at ggml/src/ggml-cuda/ggml-cuda.cu:2468\n"
            "  cudaStreamSynchronize(cuda_ctx->stream())\n")
    (e,) = parse_runtime_log(text).host_errors
    assert (e.api, e.text) == ("CUDA", "an illegal memory access was encountered")


# ---------------- NVIDIA kernel driver ----------------

# kernel_rc.c:385-410 (open-gpu-kernel-modules 595.45.04)
XID_PROC = "NVRM: Xid (%s): %d, pid=%s, name=%s, %s%s"
XID_BARE = "NVRM: Xid (%s): %d, %s%s"


@pytest.mark.parametrize("attr, gi, ci", [("PCI:0000:3b:00 GPU-I:05 GPU-CI:01", 5, 1),
                                          ("PCI:0000:3b:00 GPU-I:07", 7, None), ("PCI:0000:3b:00", None, None)])
def test_xid_with_mig_attribution_from_the_format_string(attr, gi, ci):
    line = "[ 4242.000001] " + _c(XID_PROC, attr, 43, "8812", "python3", "channel 0x00000012", "")
    (x,) = parse_kernel_log(line + "\n").xids
    assert (x.xid, x.pci, x.gpu_instance, x.compute_instance, x.pid, x.process, x.channel) == (
        43, "PCI:0000:3b:00", gi, ci, 8812, "python3", "00000012")


# kern_gpu_error_cont_ga100.c:334-340, the function's own examples
@pytest.mark.parametrize("line, pid, what, reset", [
    ("NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No",
     7194, "Contained: CE User Channel (0x9)", False),
    ("NVRM: Xid (PCI:0000:01:00): 95, pid=7062, Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No",
     7062, "Uncontained: LTC TAG (0x2, 0x1)", True)])
def test_xid_94_95_containment_from_the_source_comment(line, pid, what, reset):
    (x,) = parse_kernel_log(line + "\n").xids
    assert (x.pid, x.process, x.containment, x.reset_required) == (pid, None, what, reset)


# kernel_gsp.c:2385-2386
GSP_TIMEOUT = ("Timeout after %llus of waiting for RPC response from GPU%d GSP! Expected function %d (%s) "
               "sequence %u (0x%llx 0x%llx).")


def test_xid_119_gsp_timeout_from_the_format_string():
    line = _c(XID_BARE, "PCI:0000:3b:00", 119, _c(GSP_TIMEOUT, 6, 0, 76, "GSP_RM_CONTROL", 1234, 0x20800a4c, 4), "")
    (x,) = parse_kernel_log(line + "\n").xids
    assert (x.xid, x.pid, x.exception) == (119, None, "GSP did not answer RPC 76 (GSP_RM_CONTROL) of GPU0 for 6 s")


# osinit.c:367-368: Xid 79 through nvErrorLog_va
def test_xid_79_fallen_off_the_bus():
    (x,) = parse_kernel_log(_c(XID_BARE, "PCI:0000:3b:00", 79, "GPU has fallen off the bus.", "") + "\n").xids
    assert (x.xid, x.pci, x.pid, x.caused_by) == (79, "PCI:0000:3b:00", None, None)


# kern_gmmu_gv100.c:559-560 (NV_PRINTF, a line of its own) and kern_gmmu_ga100.c:387-389 (an Xid)
RM_MMU = ("MMU Fault: ENGINE 0x%x (%s %s) faulted @ 0x%x_%08x. Fault is of type 0x%x (%s). Access type is 0x%x (%s)")
FLA = "NVLink remote translation error: faulted @ 0x%x_%08x. Fault is of type %s %s"


def test_rm_mmu_fault_from_the_format_string():
    text = ("NVRM: kgmmuPrintFaultInfo_GV100: " + _c(RM_MMU, 0x40, "GRAPHICS", "GPCCLIENT_T1_0", 0x7f8e, 0x2aa00000, 2,
                                                    "FAULT_PDE", 0, "VIRT_READ") + "\n"
            + _c(XID_BARE, "PCI:0000:3b:00", 144, _c(FLA, 0x1234, 0x5000, "FAULT_PTE", "ACCESS_TYPE_VIRT_WRITE"), "")
            + "\n")
    log = parse_kernel_log(text)
    (ev,) = [e for e in log.events if e.kind == "nvidia-mmu-fault"]
    assert ev.fields == {"engine": "GRAPHICS", "client": "GPCCLIENT_T1_0", "address": 0x7f8e2aa00000,
                         "fault_type": "FAULT_PDE", "access": "VIRT_READ"}
    (x,) = log.xids
    assert (x.address, x.fault_type, x.access) == (0x123400005000, "FAULT_PTE", "ACCESS_TYPE_VIRT_WRITE")


# ---------------- compute-sanitizer ----------------

def _san(*lines: str) -> str:
    return "".join(f"========= {line}\n" for line in ("COMPUTE-SANITIZER",) + lines)


# nsight-training 2d680f7, cuda/2021_gtc/x-ac-04-v1/task1/task/sanitizer/04_memcheck2.ipynb:93
def test_sanitizer_2021_api_error_line():
    log = parse_debugger(_san("Program hit unspecified launch failure (error 719) on CUDA API call to "
                              "cudaDeviceSynchronize."))
    (ev,) = log.events
    assert (ev.kind, ev.fields) == ("sanitizer-api-error", {"code": 719, "api": "cudaDeviceSynchronize",
                                                            "text": "unspecified launch failure"})


# 06_initcheck.ipynb:44-47 (2021 `at 0x.. in file:line:func`) and the current `at func+0x.. in file:line`
@pytest.mark.parametrize("kernel", KERNELS[:4])
@pytest.mark.parametrize("old", [True, False])
def test_initcheck_report_from_its_lines(kernel, old):
    at = f"at 0xc40 in /src/conv.cu:48:{kernel}" if old else f"at {kernel}+0xc40 in /src/conv.cu:48"
    log = parse_debugger(_san("Uninitialized __global__ memory read of size 4 bytes", "    " + at,
                              "    by thread (3,3,0) in block (0,1,0)", "    Address 0x7fa8e5002048",
                              "    Saved host backtrace up to driver entry point at kernel launch time"))
    (f,) = log.sanitizer_findings
    assert (f.tool, f.kind, f.size, f.space, f.kernel, f.offset, f.file, f.line, f.thread, f.block, f.address) == (
        "initcheck", "uninitialized-read", 4, "global", kernel, 0xc40, "/src/conv.cu", 48, (3, 3, 0), (0, 1, 0),
        0x7fa8e5002048)
    assert not log.sanitizer         # not a memcheck access error


# 05_racecheck.ipynb:31-36 (2021) and the current spelling of the same `at` field
@pytest.mark.parametrize("kernel", KERNELS[:4])
@pytest.mark.parametrize("old", [True, False])
def test_racecheck_report_both_spellings(kernel, old):
    def at(off, line):
        return f"0x{off:x} in /src/conv.cu:{line}:{kernel}" if old else f"{kernel}+0x{off:x} in /src/conv.cu:{line}"
    log = parse_debugger(_san(f"{'ERROR' if old else 'Error'}: Race reported between Read access at {at(0x6360, 123)}",
                              f"    and Write access at {at(0x1fe0, 63)} [1,088 hazards]",
                              f"    and Write access at {at(0x26d0, 68)} [64 hazards]"))
    (f,) = log.sanitizer_findings
    assert (f.tool, f.kind, f.kernel, f.offset, f.file, f.line, f.accesses, f.hazards) == (
        "racecheck", "race", kernel, 0x6360, "/src/conv.cu", 123, ["Read", "Write", "Write"], 1152)


# racecheck --racecheck-report hazard (compute-sanitizer documentation, racecheck hazard mode)
def test_racecheck_hazard_mode():
    log = parse_debugger(_san("ERROR: Potential WAW hazard detected at __shared__ 0x0 in block (1,0,0) :",
                              "    Write Thread (31,0,0) at 0x00000150 in raceWAW.cu:18:sumKernel(int*, int*)",
                              "    Write Thread (0,0,0) at 0x00000150 in raceWAW.cu:18:sumKernel(int*, int*)",
                              "    Current Value : 0, Incoming Value : 1"))
    (f,) = log.sanitizer_findings
    assert (f.kind, f.space, f.address, f.block, f.thread, f.kernel, f.offset, f.line, f.accesses) == (
        "WAW-hazard", "shared", 0, (1, 0, 0), (31, 0, 0), "sumKernel(int*, int*)", 0x150, 18, ["Write", "Write"])


# synccheck (compute-sanitizer documentation, synccheck)
def test_synccheck_report():
    log = parse_debugger(_san("Barrier error detected. Divergent thread(s) in warp",
                              "    at myKernel(int *)+0x70 in divergentThreads.cu:4",
                              "    by thread (37,0,0) in block (0,0,0)"))
    (f,) = log.sanitizer_findings
    assert (f.tool, f.kind, f.text, f.kernel, f.offset, f.line, f.thread) == (
        "synccheck", "barrier-error", "Barrier error detected. Divergent thread(s) in warp", "myKernel(int *)", 0x70,
        4, (37, 0, 0))


# memcheck's hardware exceptions (compute-sanitizer documentation, memcheck error types), each a finding of
# its kind; the spellings of public reports: `Illegal instruction` (NVIDIA/cutlass#2728's sanitizer output),
# `Misaligned shared or local address` (a flashinfer debug report's test), cuda-gdb's scoped `Lane User Stack
# Overflow`; and the CUDA-MEMCHECK manual's device-side `Malloc/Free error encountered : Double free`
@pytest.mark.parametrize("head, kind", [
    ("Invalid PC", "invalid-pc"), ("Illegal Instruction", "illegal-instruction"),
    ("Illegal instruction", "illegal-instruction"), ("Misaligned PC", "misaligned-pc"),
    ("Hardware Stack Overflow", "hardware-stack-overflow"), ("Device Hardware Stack Overflow", "hardware-stack-overflow"),
    ("Lane User Stack Overflow", "user-stack-overflow"),
    ("Out-of-range Shared or Local Address", "out-of-range-shared-or-local-address"),
    ("Misaligned shared or local address", "misaligned-shared-or-local-address"),
    ("Warp Illegal Address", "illegal-address"), ("Misaligned address", "misaligned-address"),
    ("Invalid Address Space", "invalid-address-space"),
    ("Malloc/Free error encountered : Double free", "double-free"),
    ("Malloc/Free error encountered : Invalid pointer to free", "invalid-pointer-to-free")])
def test_memcheck_hardware_exception(head, kind):
    log = parse_debugger(_san(head, f"    at {KERNELS[2]}+0x1f0 in k.cu:9", "    by thread (0,0,0) in block (5,0,0)"))
    (f,) = log.sanitizer_findings
    assert (f.tool, f.kind, f.text, f.kernel, f.offset, f.block) == (
        "memcheck", kind, head, KERNELS[2], 0x1f0, (5, 0, 0))


# 07_memory_leaks.ipynb:36
def test_sanitizer_leak_line():
    (ev,) = parse_debugger(_san("Leaked 13877248 bytes at 0x7efd74000000")).events
    assert (ev.kind, ev.fields) == ("sanitizer-leak", {"size": 13877248, "address": 0x7efd74000000})


# ---------------- shapes of public reports (tests/data/source_shapes/SOURCES.md) ----------------

SOURCE_SHAPES = Path(__file__).parent / "data" / "source_shapes"
DECODE = ("tbl::io::detail::delta_decoder::decode_block(unsigned int, const cooperative_groups::__v1::thread_block_tile"
          "<(unsigned int)32, cooperative_groups::__v1::thread_block> &)")
REDUCE = ("Par::Impl::Reduce<Par::Impl::Combined<main::[lambda(int, float &) (instance 1)], Par::Range<Par::Gpu> >, "
          "Par::Gpu>::operator ()() const")
INDEX_EXPR = '-sizes[i] <= index && index < sizes[i] && "index out of bounds"'


def _findings(text):
    return [(f.tool, f.kind, f.kernel, f.offset, f.file, f.line, f.hazards) for f in parse_debugger(text).sanitizer_findings]


def _asserts(text):
    return [(a.runtime, a.file, a.line, a.function, a.block, a.thread, a.count)
            for a in parse_runtime_log(text).device_asserts]


def _xids(text):
    return [(x.xid, x.pid, x.process, x.channel, x.location, x.exception, x.containment, x.reset_required)
            for x in parse_kernel_log(text).xids]


def _watchdog(text):
    log = parse_runtime_log(text)
    return ([(f.kind, f.reason, f.process_tag) for f in log.faults],
            [(n.fields["process_tag"], n.fields["work"], n.fields["last_enqueued"], n.fields["last_completed"])
             for n in log.notes if n.kind == "watchdog-work"],
            [(e.api, e.text) for e in log.host_errors])


def _memcheck(text):
    return [(r.space, r.access, r.size, r.kernel, r.offset, r.file, r.line, r.thread, r.block, r.address)
            for r in parse_debugger(text).sanitizer]


def _report_points(text):
    log = parse_runtime_log(text)
    return ([(r.kind, r.frame, r.exception, r.process_tag) for r in log.report_points],
            [(e.api, e.text, e.exception, e.enum) for e in log.host_errors])


def _vm_faults(text):
    return [(f.address, f.pid, f.process, f.client_name, f.generation, f.status) for f in parse_kernel_log(text).faults]


def _runtime(text):
    log = parse_runtime_log(text)
    return ([(f.kind, f.node, f.address, f.reason, f.status, f.code, f.pid) for f in log.faults],
            [(e.api, e.text, e.exception, e.enum) for e in log.host_errors],
            [(a.function, a.line, a.assertion) for a in log.device_asserts],
            [n.text for n in log.notes if n.kind == "abort"])


def _xid_chain(text):
    return [(x.xid, x.pid, x.process, x.channel, x.caused_by) for x in parse_kernel_log(text).xids]


def _host_errors(text):
    return [(e.api, e.text, e.exception) for e in parse_runtime_log(text).host_errors]


def _cuda_stops(text):
    return [(s.kind, s.exception, s.frame.function if s.frame else None, s.error_pc, s.error_file, s.error_line,
             (s.gpu.kernel_id, s.gpu.block, s.gpu.thread, s.gpu.sm) if s.gpu else None)
            for s in parse_debugger(text).stops]


def _host_core(text):
    log = parse_debugger(text)
    return ([s.gpu for s in log.stops], [(e.kind, e.fields) for e in log.events],
            [f.objfile for f in log.backtrace])


def _host_segfault(text):
    return [(e.kind, e.fields) for e in parse_kernel_log(text).events if e.kind == "host-segfault"]


def _dispatches(text):
    log = parse_runtime_log(text)
    return [(d.source, d.kernel, d.pid, d.us) for d in log.dispatches], [(f.kind, f.address) for f in log.faults]


SOURCE_SHAPE_VALUES = {   # file -> (reader, the values the file shows)
    "hip_log_level3_shadername_tid_space.txt": (_dispatches, (
        [("shader-name", "Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB1_GRVW8_WG32_8_1", 88120, 41250080995)],
        [("vm-fault", 0x7f9bfc063000)])),
    "sanitizer_2021_misaligned_shared_julia.txt": (lambda text: [
        (r.space, r.access, r.size, r.kernel, r.offset, r.thread, r.address, r.misaligned)
        for r in parse_debugger(text).sanitizer], [
        ("shared", "write", 16, "julia_stencil_kernel__6011(CuDeviceArray<Float32,int=3,int=1>,CuDeviceArray<Float32,"
         "int=3,int=1>,Float32,Int64)", 0xb0, (3, 1, 1), 0x2a4, True)]),
    "gdb_host_core_in_comgr.txt": (_host_core, (
        [], [("terminated", {"sig": "SIGSEGV", "meaning": "Segmentation fault"})],
        ["/opt/rocm-4.2.0/lib/libamd_comgr.so.2"] * 3)),
    "dmesg_user_segfault_in_libhsa.txt": (_host_segfault, [
        ("host-segfault", {"process": "rocminfo", "pid": 6120, "address": 0x1000, "ip": "00007f2c5836b192", "error": 6,
                           "library": "libhsa-runtime64.so.1.1.9"})]),
    "cudagdb_out_of_range_launch_frame.txt": (_cuda_stops, [
        ("cuda-exception", "Warp Out-of-range Address", "void stereo_init_cu<float>(SceneState&)", None, None, None,
         (4, (0, 0, 0), (0, 3, 0), 0))]),
    "cudagdb_core_invalid_address_space.txt": (_cuda_stops, [
        ("cuda-exception", "Warp Invalid Address Space", "julia_grad_kernel__5120", 0x6a01cc8, "grad.jl", 21,
         (0, (1, 0, 0), (64, 0, 0), 2))]),
    "xid_13_journal_printk_illegal_encoding.txt": (_xids, [
        (13, None, None, None, None, None, None, None),
        (13, None, None, None, "GPC 2, TPC 1, SM 0", "Illegal Instruction Encoding", None, None),
        (13, None, None, None, "GPC 2, TPC 1, SM 0", "Multiple Warp Errors (SM global)", None, None)]),
    "nvidia_warp_cuda_error_700.txt": (_host_errors, [
        ("CUDA", "an illegal memory access was encountered (700)", "NVIDIA Warp at /builds/agent/0f1e2d/warp/native/warp.cu:223")] * 2),
    "vllm_2024_logger_triton_error_watchdog.txt": (_host_errors, [
        ("CUDA", "an illegal memory access was encountered", "RuntimeError"),
        ("CUDA", "an illegal memory access was encountered", "watchdog thread terminated with exception")]),
    "watchdog_exception_c10_log_prefix.txt": (_host_errors, [
        ("CUDA", "an illegal memory access was encountered", "watchdog thread terminated with exception")]),
    "gmc_v11_two_blocks_process_line.txt": (_vm_faults, [
        (0x7e41bc3a0000, 7712, "python3", "TCP", "gfx11", 0x00801031),
        (0x7e41bc3a9000, 7712, "python3", "TCP", "gfx11", 0x00801031)]),
    "vllm_enginecore_fault_then_gpu_hang.txt": (_runtime, (
        [("vm-fault", 1, 0x7f21b9e05000, "Page not present or supervisor privilege", None, None, None),
         ("hw-exception", 1, None, "GPU Hang", None, None, None)], [], [], ["Aborted                    (core dumped)"])),
    "xid_45_chained_journal.txt": (_xid_chain, [
        (45, 402117, "python3", "00000001", 149), (45, 402119, "python3", "0000000c", 145),
        (45, 402117, "python3", "00000002", 149)]),
    "accelerator_error_terminate_hip_enum.txt": (_runtime, (
        [], [("CUDA", "an illegal memory access was encountered", None, "hipErrorIllegalAddress")], [], [])),
    "hip_assert_old_callbackqueue_nil_fault.txt": (_runtime, (
        [("vm-fault", 2, 0, "Page not present or supervisor privilege", None, None, None),
         ("queue-callback", None, None, None, "HSA_STATUS_ERROR_EXCEPTION", 0x1016, 4410)], [],
        [("void check_kernel()", 9, "false")], ["Aborted (core dumped)", "Aborted (core dumped)"])),
    "vllm_logger_prefixed_traceback.txt": (_report_points, (
        [("python-traceback", "/opt/venv/lib/python3.12/site-packages/torch/cuda/__init__.py:1083 in synchronize",
          "torch.AcceleratorError: HIP error: an illegal memory access was encountered", "EngineCore_DP0 pid=41807")],
        [("HIP", "an illegal memory access was encountered", "torch.AcceleratorError", "hipErrorIllegalAddress")])),
    "synccheck_2019_device_frame.txt": (_findings, [
        ("synccheck", "barrier-error", "ptxcall_reduceKernel_7", 0x3a10,
         "/home/u/.julia/packages/GPUKern/Qx3r1/src/device/intrinsics/synchronization.jl", 12, None)]),
    "memcheck_2026_at_without_offset.txt": (_memcheck, [
        ("shared", "read", 16, "tma_bulk_load_tile", None, "tma_bulk.h", 188, (96, 0, 0), (2, 0, 0), 0x600)]),
    "racecheck_current_template_kernel.txt": (_findings, [
        ("racecheck", "race", DECODE, 0xa3f0, "delta_decode.cuh", 288, 32),
        ("racecheck", "race", "tbl::io::detail::delta_decoder::next_block(bool)", 0xb4d0, "delta_decode.cuh", 190, 4)]),
    "racecheck_no_lineinfo_warning.txt": (_findings, [
        ("racecheck", "race", "pack_tiles(const unsigned int *, const unsigned int *, uint4 *, int)", 0x3a0, None, None,
         240325)]),
    "racecheck_2021_lambda_functor.txt": (_findings, [
        ("racecheck", "race", REDUCE, 0x2a40, "/opt/lib/include/Par/Par_Reduce.hpp", 311, 2)]),
    "racecheck_hazard_warn_cuda_memcheck.txt": (_findings, [
        ("racecheck", "RAW-hazard", "graph::scan::WarpPrefix<32>::inclusive(int*)", 0x2c40,
         "/home/dev/graph/util/warp_prefix.cuh", 88, None)]),
    "initcheck_2021_file_line_func.txt": (_findings, [
        ("initcheck", "uninitialized-read", "blur(float const*, int, int, float*)", 0x5d0, "/work/demo/blur.cu", 37,
         None)]),
    "cuda_assert_index_kernel_many_threads.txt": (_asserts, [
        ("CUDA", "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu", 94, "operator()", (3, 0, 0), (64, 0, 0), 4)]),
    "cuda_assert_windows_no_function.txt": (_asserts, [
        ("CUDA", r"C:\ci\_work\pytorch\pytorch\builder\windows\pytorch\aten\src\ATen\native\cuda\IndexKernel.cu", 91,
         None, (12, 0, 0), (40, 0, 0), 2)]),
    "hip_assert_then_rocclr_callback.txt": (_asserts, [
        ("HIP", "saxpy_hip.cpp", 31, "void saxpy(float, const float *__restrict, float *__restrict, int)", None, None,
         2)]),
    "watchdog_pg_prefix_detected_at_work.txt": (_watchdog, (
        [("collective-timeout", "ALLREDUCE #4410 waited 600.044 s", "rank 1"),
         ("collective-timeout", "ALLREDUCE #4410 waited 600.081 s", "rank 0")],
        [("rank 1 (default_pg)", 4410, 4412, 4409), ("rank 0 (default_pg)", 4410, 4412, 4409)], [])),
    "watchdog_rethrown_timeout_what.txt": (_watchdog, (
        [("collective-timeout", "_ALLGATHER_BASE #7021 waited 600.012 s", "rank 6")], [], [])),
    "xid_dmesg_T_43_31_94_unknown_pid.txt": (_xids, [
        (43, 552310, "pt_main_thread", "00000009", None, None, None, None),
        (31, 561874, "python3.11", "00000009", None, None, None, None),
        (94, None, None, None, None, None, "Contained: SM (0x1)", False)]),
    "xid_13_global_and_109_ctx_switch.txt": (_xids, [
        (13, None, None, None, "GPC 3, TPC 1, SM 1", "Illegal Instruction Parameter", None, None),
        (13, None, None, None, "GPC 3, TPC 1, SM 1", "Multiple Warp Errors (SM global)", None, None),
        (13, None, None, None, None, None, None, None),
        (109, 902211, "pt_main_thread", "00000007", None, "CTX SWITCH TIMEOUT", None, None)]),
}


def test_every_source_shape_has_expected_values():
    assert {p.name for p in SOURCE_SHAPES.glob("*.txt")} == set(SOURCE_SHAPE_VALUES)


@pytest.mark.parametrize("name", sorted(SOURCE_SHAPE_VALUES))
def test_source_shapes(name):
    reader, expected = SOURCE_SHAPE_VALUES[name]
    assert reader((SOURCE_SHAPES / name).read_text()) == expected


# ---------------- Linux amdgpu (freebsd/drm-kmod 129bf0f, DRM of Linux 6.11) ----------------

DEV = "[ 4242.123456] amdgpu 0000:c1:00.0: amdgpu: "
GMC9_HEAD = "[%s] %s page fault (src_id:%u ring:%u vmid:%u pasid:%u)"              # gmc_v9_0.c:629-630
GMC9_TASK = " for process %s pid %d thread %s pid %d)"                              # gmc_v9_0.c:637
GMC9_ADDR = "  in page starting at address 0x%016llx from IH client 0x%x (%s)"      # gmc_v9_0.c:643
GMC9_COOKIE = "  cookie node_id %d fault from die %s%d%s"                          # gmc_v9_0.c:649
GMC9_STATUS = "VM_L2_PROTECTION_FAULT_STATUS:0x%08X"                               # gmc_v9_0.c (after :690)
GMC11_HEAD = "[%s] page fault (src_id:%u ring:%u vmid:%u pasid:%u)"                # gmc_v11_0.c:132
GMC11_TASK = " in process %s pid %d thread %s pid %d)"                              # gmc_v11_0.c:138
GMC11_ADDR = "  in page starting at address 0x%016llx from client %d"               # gmc_v11_0.c:144
GC_STATUS = "GCVM_L2_PROTECTION_FAULT_STATUS:0x%08X"                                # gfxhub_v2_0.c:84-86
CID = "\t Faulty UTCL2 client ID: %s (0x%x)"                                         # gfxhub_v2_0.c:87
FIELDS = ["\t MORE_FAULTS: 0x%lx", "\t WALKER_ERROR: 0x%lx", "\t PERMISSION_FAULTS: 0x%lx", "\t MAPPING_ERROR: 0x%lx",
          "\t RW: 0x%lx"]                                                             # gfxhub_v2_0.c:90-104
RING_TIMEOUT = "ring %s timeout, signaled seq=%u, emitted seq=%u"                   # amdgpu_job.c:61
PROC_INFO = "Process information: process %s pid %d thread %s pid %d"               # amdgpu_job.c:68
RAS_COUNT = "%lld new uncorrectable hardware errors detected in %s block"           # amdgpu_ras.c:1074


def _printk(*lines: str) -> str:
    return "".join(DEV + line + "\n" for line in lines)


@pytest.mark.parametrize("addr", [0x1000, 0x7f7d37c00000, 0xfffff0000000])
def test_gmc_v9_block_from_the_format_strings(addr):
    text = _printk(_c(GMC9_HEAD, "mmhub0", "no-retry", 0, 0, 8, 32770), _c(GMC9_TASK, "python3", 9101, "pt_main", 9144),
                   _c(GMC9_ADDR, addr, 0x12, "VMC"), _c(GMC9_COOKIE, 5, "AID", 1, ".XCD0"),
                   _c(GMC9_STATUS, 0x00800932))
    (f,) = parse_kernel_log(text).faults
    assert (f.hub, f.retry, f.vmid, f.pasid, f.process, f.pid, f.thread, f.tid, f.address, f.ih_client, f.die,
            f.status) == ("mmhub0", False, 8, 32770, "python3", 9101, "pt_main", 9144, addr, 0x12, "AID1.XCD0",
                          0x00800932)


def test_gmc_v11_block_from_the_format_strings():
    text = _printk(_c(GMC11_HEAD, "gfxhub", 0, 24, 9, 32772), _c(GMC11_TASK, "llama-server", 5150, "llama-server", 5162),
                   _c(GMC11_ADDR, 0x7ea6f9a00000, 10), _c(GC_STATUS, 0x00841051), _c(CID, "TCP", 0x8),
                   *(_c(fmt, v) for fmt, v in zip(FIELDS, (1, 0, 5, 0, 1))))
    (f,) = parse_kernel_log(text).faults
    assert (f.hub, f.vmid, f.pasid, f.process, f.pid, f.address, f.ih_client, f.generation, f.client_name, f.client_id,
            f.permission_faults, f.rw, f.more_faults) == (
        "gfxhub", 9, 32772, "llama-server", 5150, 0x7ea6f9a00000, 10, "gfx11", "TCP", 0x8, 5, 1, 1)


def test_ring_timeout_and_ras_count_from_the_format_strings():
    log = parse_kernel_log(_printk(_c(RING_TIMEOUT, "comp_1.2.0", 1180, 1183),
                                   _c(PROC_INFO, "python3", 7001, "python3", 7013),
                                   _c(RAS_COUNT, 12, "umc")))
    timeout, ras = log.events
    assert (timeout.kind, timeout.fields["ring"], timeout.fields["in_flight"], timeout.fields["pid"]) == (
        "ring-timeout", "comp_1.2.0", 3, 7001)
    assert (ras.kind, ras.text) == ("ras", "12 new uncorrectable hardware errors detected in umc block")


# SGLang's logging prefix (`[%Y-%m-%d %H:%M:%S TPn]`, with DP/EP ranks in data/expert-parallel runs)
def test_sglang_rank_prefix_names_the_process():
    line = "[2026-11-20 10:17:42 DP0 TP3 EP3] " + _c(VM_FAULT, 4, 0x13e852f0, 0x7f0000001000, "", "Unknown")
    (f,) = parse_runtime_log(line).faults
    assert (f.process_tag, f.stamp.wall, f.node, f.address) == ("DP0 TP3 EP3", "2026-11-20T10:17:42", 4, 0x7f0000001000)


# cudaGetErrorString(cudaErrorLaunchTimeout = 702), as a program prints it with the number
def test_launch_timeout_text_is_a_gpu_error():
    (e,) = parse_runtime_log("step 12\nkernel sync: the launch timed out and was terminated (702)\n").host_errors
    assert (e.api, e.text) == ("CUDA/HIP", "the launch timed out and was terminated (702)")


# A mangled kernel is demangled by the C++ runtime's demangler; what is not a mangled name stays as it is
@pytest.mark.parametrize("name, plain", [
    ("_Z10vector_addPfS_S_i", "vector_add(float*, float*, float*, int)"),
    ("_ZN5graph4scan10WarpPrefixILi32EE9inclusiveEPi", "graph::scan::WarpPrefix<32>::inclusive(int*)"),
    ("_Znot_a_valid_name", None), ("vector_add(float*)", None), ("triton_poi_fused_add_0", None), (None, None)])
def test_demangle(name, plain):
    from faultkit.ingest.symbols import demangle
    assert demangle(name) == plain


def test_a_finding_keeps_the_mangled_name_beside_the_demangled_one():
    log = parse_debugger(_san("Uninitialized __global__ memory read of size 4 bytes",
                              "    at 0x70 in /src/v.cu:3:_Z10vector_addPfS_S_i", "    by thread (0,0,0) in block (0,0,0)"))
    (f,) = log.sanitizer_findings
    assert (f.kernel, f.mangled) == ("vector_add(float*, float*, float*, int)", "_Z10vector_addPfS_S_i")


# A paste of the kernel log with a device assert or a watchdog line is read as both kinds
@pytest.mark.parametrize("runtime_line", [
    "/p/IndexKernel.cu:94: operator(): block: [3,0,0], thread: [64,0,0] Assertion `x` failed.",
    "k.hip:12: void k(int*): Device-side assertion `x < 4' failed.",
    "[rank0]:[E1105 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
    _c(MEMORY_CRITICAL, 1, 0x55bc2dc19da0, 0x7f0000001000).strip(), APERTURE + " code: 0x29"])
def test_runtime_lines_beside_a_kernel_log_are_read(runtime_line):
    from faultkit.sources import detect_kinds
    text = "[ 12.000001] NVRM: Xid (PCI:0000:3b:00): 43, pid=1, name=x, channel 0x0000000a\n" + runtime_line + "\n"
    assert detect_kinds(text) == {"kernel-log", "runtime-log"}


# The new runtime formats wherever they are pasted: indented, quoted, behind collectors' prefixes
PASTE_PREFIXES = ["", "    ", "> ", "(Worker_TP1 pid=77) ", "2026-11-20T10:17:42.123Z ", "[2026-11-20 10:17:42 TP1] ",
                  "(EngineCore_DP0 pid=77) ERROR 11-20 10:17:42 [core.py:1100] ", "12: "]
NEW_RUNTIME_LINES = {
    "cuda-assert": (_c(CUDA_ASSERT, "/src/k.cu", 12, KERNELS[1], 1, 0, 0, 5, 0, 0, "i < n").strip(),
                    lambda log: [(a.runtime, a.function, a.line) for a in log.device_asserts],
                    [("CUDA", KERNELS[1], 12)]),
    "hip-assert": (_c(HIP_ASSERT, "k.hip", 7, KERNELS[2], "i < n").strip(),
                   lambda log: [(a.runtime, a.function, a.line) for a in log.device_asserts], [("HIP", KERNELS[2], 7)]),
    "watchdog-timeout": (_c(PG_PREFIX_NAMED, 0, "0", "default_pg", 2) + _c(TIMEOUT, 9, "ALLREDUCE", 1, 1, 600000, 600500),
                         lambda log: [(f.kind, f.reason) for f in log.faults],
                         [("collective-timeout", "ALLREDUCE #9 waited 600.5 s")]),
}


@pytest.mark.parametrize("prefix", PASTE_PREFIXES)
@pytest.mark.parametrize("name", sorted(NEW_RUNTIME_LINES))
def test_new_runtime_lines_in_every_pasted_shape(name, prefix):
    line, read, expected = NEW_RUNTIME_LINES[name]
    assert read(parse_runtime_log(prefix + line + "\n")) == expected


def test_a_device_assert_cut_at_the_end_of_a_paste_is_kept_and_said():
    line = _c(CUDA_ASSERT, "/src/k.cu", 12, "operator()", 3, 0, 0, 64, 0, 0, "-sizes[i] <= index && index < sizes[i]")
    log = parse_runtime_log(line[:line.index("&&")].rstrip())
    (a,) = log.device_asserts
    assert (a.function, a.line, a.block, a.assertion) == ("operator()", 12, (3, 0, 0), "-sizes[i] <= index")
    assert [p.message for p in log.problems] == ["device assert line cut before its end: the assertion is partial"]


# Triton's launcher errors: nvidia/driver.c gpuAssert ("Triton Error [CUDA]: %s") and the AMD backend's
# prefix + "%s Code: %d, Messsage: %s" (the typo is the source's; later releases spell it "Message")
@pytest.mark.parametrize("line, api, text", [
    ("RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered", "CUDA",
     "an illegal memory access was encountered"),
    ("RuntimeError: " + "%s Code: %d, Messsage: %s" % ("Triton Error [HIP]: ", 1, "invalid argument"), "HIP",
     "invalid argument (1)"),
    ("RuntimeError: Triton Error [HIP]: Code: 700, Message: an illegal memory access was encountered", "HIP",
     "an illegal memory access was encountered (700)")])
def test_triton_launcher_errors(line, api, text):
    (e,) = parse_runtime_log("ERROR 04-15 00:31:11 worker_base.py:574] " + line + "\n").host_errors
    assert (e.api, e.text, e.exception) == (api, text, "RuntimeError")


# NVIDIA Warp, warp/native/warp.cu check_cuda_result: both spellings of its format string
@pytest.mark.parametrize("fmt, args", [("Warp CUDA error %u: %s (%s:%d)", (700, "an illegal memory access was encountered",
                                                                         "warp.cu", 223)),
                                       ("Warp CUDA error %u: %s (in function %s, %s:%d)",
                                        (700, "an illegal memory access was encountered", "wp_launch", "warp.cu", 223))])
def test_nvidia_warp_error_from_the_format_strings(fmt, args):
    (e,) = parse_runtime_log(_c(fmt, *args) + "\n").host_errors
    assert (e.api, e.text, e.exception) == ("CUDA", "an illegal memory access was encountered (700)",
                                            "NVIDIA Warp at warp.cu:223")
