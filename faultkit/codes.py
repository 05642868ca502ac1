"""Code tables that turn numbers printed by ROCr, ROCclr, amdgpu, NVIDIA's driver and the CUDA/HIP runtimes into meaning.

Values follow ../shared/reference (runtime_messages.md §12, kernel_log.md §4-6, §8).
Kept in one module because the runtime parser, the kernel-log parser and the report all
need the same interpretation; a second copy would drift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# hsa_status_t: code -> (name, what it means for someone debugging a crash)
HSA_STATUS: dict[int, tuple[str, str]] = {
    0x0: ("HSA_STATUS_SUCCESS", "success"),
    0x28: ("HSA_STATUS_ERROR_INVALID_MEMORY_POOL", "the memory pool is invalid"),
    0x29: ("HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",
           "a wave accessed memory outside the legal GPU aperture (a host or garbage pointer, "
           "an address above 48 bits)"),
    0x2a: ("HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION", "a wave executed an illegal shader instruction"),
    0x2b: ("HSA_STATUS_ERROR_MEMORY_FAULT",
           "a wave accessed an inaccessible address (the queue callback's status on ROCm ~4.5-5.1, and "
           "'Warning: Queue error - ...' from ROCr builds with assertions on, ROCm 7.x; newer callbacks print "
           "'Memory access fault by GPU node-N' as well)"),
    0x2c: ("HSA_STATUS_CU_MASK_REDUCED", "the CU mask was reduced"),
    0x2d: ("HSA_STATUS_ERROR_OUT_OF_REGISTERS", "a kernel requested more VGPRs than the agent has"),
    0x2e: ("HSA_STATUS_ERROR_RESOURCE_BUSY", "resource busy"),
    0x2f: ("HSA_STATUS_ERROR_NOT_SUPPORTED", "not supported"),
    0x1000: ("HSA_STATUS_ERROR", "a generic error (queue preemption error, RAS error, fatal halt "
             "or device removal)"),
    0x1001: ("HSA_STATUS_ERROR_INVALID_ARGUMENT",
             "a dispatch packet had an invalid work-group size"),
    0x1002: ("HSA_STATUS_ERROR_INVALID_QUEUE_CREATION", "invalid queue creation"),
    0x1003: ("HSA_STATUS_ERROR_INVALID_ALLOCATION",
             "a dispatch asked for an invalid group segment (LDS) size"),
    0x1004: ("HSA_STATUS_ERROR_INVALID_AGENT", "invalid agent"),
    0x1005: ("HSA_STATUS_ERROR_INVALID_REGION", "invalid memory region"),
    0x1006: ("HSA_STATUS_ERROR_INVALID_SIGNAL", "invalid signal"),
    0x1007: ("HSA_STATUS_ERROR_INVALID_QUEUE", "invalid queue"),
    0x1008: ("HSA_STATUS_ERROR_OUT_OF_RESOURCES", "out of resources (e.g. scratch memory)"),
    0x1009: ("HSA_STATUS_ERROR_INVALID_PACKET_FORMAT", "a malformed or unsupported AQL packet"),
    0x100a: ("HSA_STATUS_ERROR_RESOURCE_FREE", "error while releasing a resource"),
    0x100b: ("HSA_STATUS_ERROR_NOT_INITIALIZED", "HSA runtime not initialized"),
    0x100c: ("HSA_STATUS_ERROR_REFCOUNT_OVERFLOW", "reference count overflow"),
    0x100d: ("HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS", "a dispatch had invalid grid dimensions"),
    0x100e: ("HSA_STATUS_ERROR_INVALID_INDEX", "invalid index"),
    0x100f: ("HSA_STATUS_ERROR_INVALID_ISA",
             "a dispatch requested an invalid register count (or the ISA is invalid)"),
    0x1010: ("HSA_STATUS_ERROR_INVALID_CODE_OBJECT", "a dispatch pointed at invalid kernel code"),
    0x1011: ("HSA_STATUS_ERROR_INVALID_EXECUTABLE", "invalid executable"),
    0x1012: ("HSA_STATUS_ERROR_FROZEN_EXECUTABLE", "frozen executable"),
    0x1013: ("HSA_STATUS_ERROR_INVALID_SYMBOL_NAME", "no symbol with that name"),
    0x1014: ("HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED", "variable already defined"),
    0x1015: ("HSA_STATUS_ERROR_VARIABLE_UNDEFINED", "variable undefined"),
    0x1016: ("HSA_STATUS_ERROR_EXCEPTION",
             "a wave aborted, trapped or raised a math exception (device assert, __builtin_trap, "
             "s_trap, debug trap). This is NOT a page fault: a bad address is reported as "
             "'Memory access fault' or code 0x29"),
    0x1017: ("HSA_STATUS_ERROR_INVALID_ISA_NAME", "invalid ISA name"),
    0x1018: ("HSA_STATUS_ERROR_INVALID_CODE_SYMBOL", "invalid code symbol"),
    0x1019: ("HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL", "invalid executable symbol"),
    0x1020: ("HSA_STATUS_ERROR_INVALID_FILE", "invalid file descriptor"),
    0x1021: ("HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER", "invalid code object reader"),
    0x1022: ("HSA_STATUS_ERROR_INVALID_CACHE", "invalid cache"),
    0x1023: ("HSA_STATUS_ERROR_INVALID_WAVEFRONT", "invalid wavefront"),
    0x1024: ("HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP", "invalid signal group"),
    0x1025: ("HSA_STATUS_ERROR_INVALID_RUNTIME_STATE", "invalid runtime state"),
    0x1026: ("HSA_STATUS_ERROR_FATAL", "the queue received an error that may require process termination"),
}
HSA_STATUS_BY_NAME = {name: code for code, (name, _) in HSA_STATUS.items()}

# Codes that mean "a wave touched a bad address" as opposed to a trap or a bad packet.
ADDRESS_FAULT_CODES = {0x29, 0x2b}
PACKET_ERROR_CODES = {0x1001, 0x1003, 0x1009, 0x100d, 0x100f, 0x1010}


def status_name(code: int | None) -> str | None:
    if code is None:
        return None
    return HSA_STATUS.get(code, (None, None))[0]


def status_meaning(code: int | None) -> str | None:
    if code is None:
        return None
    entry = HSA_STATUS.get(code)
    return entry[1] if entry else f"unknown HSA status 0x{code:x}"


# ROCr "Reason:" text -> short kind used in fault records
VM_FAULT_REASONS = {
    "Page not present or supervisor privilege": "page-not-present",
    "Write access to a read-only page": "write-to-read-only",
    "Execute access to a page marked NX": "execute-nx",
    "Host access only": "host-access-only",
    "DRAM ECC failure": "dram-ecc",
    "SRAM ECC failure": "sram-ecc",
    "Generic hang recovery": "hang-recovery",
    "ECC failure (if supported by HW)": "ecc",
    "Unknown": "unknown",
}

# ---- kernel log: UTCL2 client ids (status register bits 17:9) ----
GFXHUB_GFX9 = ["CB", "DB", "IA", "WD", "CPF", "CPC", "CPG", "RLC", "TCP", "SQC (inst)",
               "SQC (data)", "SQG", "PA"]
GFXHUB_GFX10_11 = ["CB/DB", "Reserved", "GE1", "GE2", "CPF", "CPC", "CPG", "RLC", "TCP",
                   "SQC (inst)", "SQC (data)", "SQG", "Reserved", "SDMA0", "SDMA1", "GCR",
                   "SDMA2", "SDMA3"]
GFXHUB_GFX12 = ["CB", "DB", "GE1", "GE2", "CPF", "CPC", "CPG", "RLC", "TCP", "SQC (inst)",
                "SQC (data)", "SQG/PC/SC", "Reserved", "SDMA0", "SDMA1", "GCR", "Reserved",
                "Reserved", "WGS", "DSM", "PA"]
# MI200/MI300 mmhub (aldebaran table, read == write): the parts LLM serving runs on.
MMHUB_ALDEBARAN = {2: "MP1", 3: "MP0", 33: "DBGU_IO0", 34: "DBGU_IO2", 36: "MPIO", 107: "JPEG0",
                   108: "VCN0", 109: "VCNU0", 139: "JPEG1", 140: "VCN1", 141: "VCNU1", 161: "XDP",
                   174: "HDP", 256: "SDMA0", 257: "SDMA1", 258: "SDMA2", 259: "SDMA3",
                   260: "SDMA4", 384: "OSS"}
MMHUB_ARCTURUS = {0: "DBGU1", 1: "XDP", 2: "MP1", 14: "HDP", 171: "JPEG", 172: "VCN", 173: "VCNU",
                  203: "JPEG1", 204: "VCN1", 205: "VCN1U", 384: "OSS",
                  **{256 + i: f"SDMA{i}" for i in range(8)}}

# IH client ids (from client N / from IH client 0xN)
SOC15_IH_CLIENTS = {0x00: "IH", 0x01: "SDMA2/ACP", 0x02: "ATHUB", 0x03: "BIF", 0x04: "SDMA3/DCE",
                    0x05: "SDMA4/ISP", 0x06: "VMC1/PCIE0", 0x07: "RLC", 0x08: "SDMA0", 0x09: "SDMA1",
                    0x0a: "SE0SH", 0x0b: "SE1SH", 0x0c: "SE2SH", 0x0d: "SE3SH", 0x0e: "VCN1/UVD1",
                    0x0f: "THM", 0x10: "VCN/UVD", 0x11: "SDMA5/VCE0", 0x12: "VMC", 0x13: "SDMA6/XDMA",
                    0x14: "GRBM_CP", 0x15: "ATS", 0x16: "ROM_SMUIO", 0x17: "DF", 0x18: "SDMA7/VCE1",
                    0x19: "PWR", 0x1b: "UTCL2", 0x1c: "EA", 0x1d: "UTCL2LOG", 0x1e: "MP0", 0x1f: "MP1"}
SOC21_IH_CLIENTS = {0: "IH", 2: "ATHUB", 3: "BIF", 4: "DCN", 5: "ISP", 6: "MP3", 7: "RLC", 10: "GFX",
                    11: "IMU", 14: "VCN1", 15: "THM", 16: "VCN", 17: "VPE1", 18: "VMC", 20: "GRBM_CP",
                    22: "ROM_SMUIO", 23: "DF", 24: "VPE", 25: "PWR", 26: "LSDMA", 30: "MP0", 31: "MP1"}

# gmc_v8 memory-controller clients are printed as 4-char tags
GFX8_MC_CLIENTS = {"TC": "TCP", "CB": "CB", "DB": "DB", "CP": "CPC", "SD": "SDMA", "TA": "TCP"}


# field -> (shift, mask) of *_L2_PROTECTION_FAULT_STATUS
STATUS_LAYOUT = {"more_faults": (0, 1), "walker_error": (1, 0x7), "permission_faults": (4, 0xF),
                 "mapping_error": (8, 1), "cid": (9, 0x1FF), "rw": (18, 1), "vmid": (20, 0xF)}
# GC 12.1's mmhub 4.2.0 MMVM_L2_PROTECTION_FAULT_STATUS_LO32 widens the walker and permission fields.
STATUS_LAYOUT_MMHUB_4_2 = {"more_faults": (0, 1), "walker_error": (1, 0xF), "permission_faults": (5, 0x1F),
                           "mapping_error": (10, 1), "cid": (11, 0x1FF), "rw": (20, 1), "vmid": (22, 0xF)}


def decode_status(status: int, generation: str | None = None, hub: str | None = None) -> dict:
    """Decode *_L2_PROTECTION_FAULT_STATUS: one layout on gfx9-gfx12, another on GC 12.1's mmhub."""
    layout = STATUS_LAYOUT_MMHUB_4_2 if generation == "gc12.1" and (hub or "").startswith("mm") else STATUS_LAYOUT
    return {k: (status >> shift) & mask for k, (shift, mask) in layout.items()}


def utcl2_client_name(cid: int, generation: str | None, hub: str | None, rw: int = 0,
                      die: str | None = None) -> str | None:
    """Best-effort client name when the log printed only the raw status; None where the table
    depends on a GPU model the log does not name."""
    if hub and hub.startswith("mm"):
        if generation != "gfx9":
            return None
        if die:                      # the die cookie is printed on MI300 only (mmhub 1.8: aldebaran table)
            return MMHUB_ALDEBARAN.get(cid)
        # Vega10/12/20, Raven and Renoir index other tables by [cid][rw] for cids below 64; only the
        # SDMA/OSS ids of MI100/MI200/MI300 (>= 256) read the same on every part that has them.
        names = {MMHUB_ALDEBARAN.get(cid), MMHUB_ARCTURUS.get(cid)}
        return names.pop() if cid >= 256 and len(names) == 1 else None
    table = {"gfx9": GFXHUB_GFX9, "gfx10": GFXHUB_GFX10_11, "gfx11": GFXHUB_GFX10_11,
             "gfx12": GFXHUB_GFX12}.get(generation or "")
    if table is None:
        return None
    return table[cid] if cid < len(table) else "unknown"


def client_role(name: str | None) -> str | None:
    """What kind of engine a UTCL2/MC client name stands for."""
    if not name:
        return None
    n = name.upper()
    if n.startswith("TCP") or n.startswith("TC") and len(n) <= 3:
        return "shader-memory"
    if n.startswith("SQC (INST)"):
        return "shader-instruction-fetch"
    if n.startswith("SQC"):
        return "shader-scalar-data"
    if n.startswith("SQG") or n == "SQ":
        return "shader"
    if "SDMA" in n or n == "XDMA":
        return "copy-engine"
    if n in ("CPC", "CPF", "CPG"):
        return "command-processor"
    if n in ("CB", "DB", "CB/DB", "PA", "IA", "WD", "GE1", "GE2"):
        return "graphics-pipeline"
    if n.startswith(("VCN", "JPEG", "UVD", "VCE")):
        return "video"
    if n in ("MP0", "MP1", "PSP", "SMU"):
        return "firmware"
    return "other"


ENGINE_OF_ROLE = {"shader-memory": "shader", "shader-instruction-fetch": "shader", "shader-scalar-data": "shader",
                  "shader": "shader", "copy-engine": "copy", "command-processor": "command-processor",
                  "firmware": "firmware", "graphics-pipeline": "graphics", "video": "video", "other": "other"}


def engine_of(client: str | None) -> str | None:
    """Which engine faulted: shader, copy, command-processor, firmware, graphics, video, other.
    The one rule every analysis uses (a kernel is a suspect only where a shader faulted)."""
    role = client_role(client)
    return ENGINE_OF_ROLE[role] if role else None


ROLE_WORDS = {
    "shader-memory": "a shader's vector memory access (client {c}: a kernel's global load or store)",
    "shader-instruction-fetch": "a shader instruction fetch (client {c}: a jump into unmapped code "
                                "or a freed code object)",
    "shader-scalar-data": "a shader's scalar data load (client {c}: kernel arguments or constants)",
    "shader": "a shader (client {c})",
    "copy-engine": "the SDMA copy engine (client {c}): a memory copy, not a kernel, touched the address",
    "command-processor": "the command processor (client {c}): a bad queue, packet or ring, "
                         "not a kernel's own load or store",
    "graphics-pipeline": "the graphics pipeline (client {c}): a graphics context, not compute",
    "video": "the video engine (client {c})",
    "firmware": "a firmware block (client {c})",
    "other": "client {c}",
}

GPU_RESET_SOURCES = {0: "unknown", 1: "job timeout (ring timeout)", 2: "RAS error", 3: "MES failure",
                     4: "HWS / KFD hang", 5: "user request"}

MES_OPCODES = {0: "SET_HW_RSRC", 1: "SET_SCHEDULING_CONFIG", 2: "ADD_QUEUE", 3: "REMOVE_QUEUE",
               4: "PERFORM_YIELD", 5: "SET_GANG_PRIORITY_LEVEL", 6: "SUSPEND", 7: "RESUME",
               8: "RESET", 9: "SET_LOG_BUFFER", 10: "CHANGE_GANG_PRORITY",
               11: "QUERY_SCHEDULER_STATUS", 12: "PROGRAM_GDS", 13: "SET_DEBUG_VMID", 14: "MISC",
               15: "UPDATE_ROOT_PAGE_TABLE", 16: "AMD_LOG", 19: "SET_HW_RSRC_1"}

# NVIDIA's Xid catalogue, for the ones a compute user meets: the one table (the report's meaning,
# the fleet's hardware signs, the job's and the fleet's causes and consequences read it).
@dataclass(frozen=True)
class XidInfo:
    """What an NVIDIA Xid means for a compute user: a card's fault or another event's consequence."""
    meaning: str
    hardware: bool = False       # a sign of the card itself (ECC, NVLink, the bus, GSP): drain it, not the code
    consequence: bool = False    # it reports the end of work another event caused (not a first mover)


XIDS: dict[int, XidInfo] = {
    13: XidInfo("Graphics engine exception (SM warp exception: an illegal address, an out-of-range access "
                "or an assert in a kernel)"),
    31: XidInfo("GPU memory page fault (MMU fault): a kernel or copy touched an unmapped address"),
    32: XidInfo("invalid or corrupted push buffer stream"),
    43: XidInfo("GPU stopped processing (the faulting channel was torn down; follows Xid 13/31)", consequence=True),
    45: XidInfo("preemptive cleanup of a channel, due to a previous error", consequence=True),
    48: XidInfo("double-bit ECC error", hardware=True),
    63: XidInfo("ECC page retirement / row remapping event", hardware=True),
    64: XidInfo("ECC page retirement / row remapping failure", hardware=True),
    74: XidInfo("NVLink error", hardware=True),
    79: XidInfo("GPU has fallen off the bus", hardware=True),
    92: XidInfo("high single-bit ECC error rate", hardware=True),
    94: XidInfo("contained ECC error", hardware=True),
    95: XidInfo("uncontained ECC error", hardware=True),
    109: XidInfo("context switch timeout"),
    119: XidInfo("GSP RPC timeout", hardware=True),
    120: XidInfo("GSP error", hardware=True),
}
HARDWARE_XIDS = frozenset(x for x, i in XIDS.items() if i.hardware)
CONSEQUENCE_XIDS = frozenset(x for x, i in XIDS.items() if i.consequence)


def xid_meaning(xid: int) -> str:
    info = XIDS.get(xid)
    return info.meaning if info else "see NVIDIA Xid documentation"



# Instructions that touch memory (AMDGPU and NVIDIA SASS): a debugger stop on one of these is the
# faulting access itself; the faulting instruction is searched for among them.
MEMORY_OPS = re.compile(r"^(?:global_|flat_|scratch_|buffer_|s_load|s_store|s_buffer_|s_scratch_|ds_|image_|tbuffer_|"
                        r"LDG|STG|LD\.|ST\.|ATOM|RED|LDS|STS|LDL|STL)", re.I)


# ---- CUDA and HIP runtime/driver errors: the one table every reader of an error line uses ----
# cudaError_t (CUDA's driver_types.h), CUresult (cuda.h) and hipError_t (HIP's hip_runtime_api.h) share
# their numbers since CUDA 10.1 / ROCm 3 for the errors a crash shows; the messages are
# cudaGetErrorString's / cuGetErrorString's / hipGetErrorString's (HIP copies CUDA's wording).
@dataclass(frozen=True)
class GpuError:
    """One CUDA/HIP error code with its names in each API and the runtime's message."""
    code: int
    runtime: str                 # cudaError_t name
    driver: str | None           # CUresult name (CUDA_ERROR_*)
    hip: str | None              # hipError_t name
    message: str
    device: bool = False         # a kernel failed on the GPU (the context is lost): a GPU fault, not a host misuse
    own: bool = False            # the message alone is this error (its words are no one else's); else a
    #                              CUDA/HIP error word must be on the line with it ("invalid argument")


GPU_ERRORS: tuple[GpuError, ...] = (
    GpuError(1, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE", "hipErrorInvalidValue", "invalid argument"),
    GpuError(2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY", "hipErrorOutOfMemory", "out of memory"),
    GpuError(3, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED", "hipErrorNotInitialized",
             "initialization error"),
    GpuError(4, "cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED", "hipErrorDeinitialized", "driver shutting down"),
    GpuError(9, "cudaErrorInvalidConfiguration", None, "hipErrorInvalidConfiguration", "invalid configuration argument"),
    GpuError(35, "cudaErrorInsufficientDriver", None, "hipErrorInsufficientDriver",
             "CUDA driver version is insufficient for CUDA runtime version", own=True),
    GpuError(46, "cudaErrorDevicesUnavailable", None, None, "CUDA-capable device(s) is/are busy or unavailable",
             own=True),
    GpuError(98, "cudaErrorInvalidDeviceFunction", None, "hipErrorInvalidDeviceFunction", "invalid device function"),
    GpuError(100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", "hipErrorNoDevice", "no CUDA-capable device is detected",
             own=True),
    GpuError(101, "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE", "hipErrorInvalidDevice", "invalid device ordinal"),
    GpuError(200, "cudaErrorInvalidKernelImage", "CUDA_ERROR_INVALID_IMAGE", "hipErrorInvalidImage",
             "device kernel image is invalid"),
    GpuError(201, "cudaErrorDeviceUninitialized", "CUDA_ERROR_INVALID_CONTEXT", "hipErrorInvalidContext",
             "invalid device context"),
    GpuError(209, "cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU", "hipErrorNoBinaryForGpu",
             "no kernel image is available for execution on the device", own=True),
    GpuError(214, "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE", "hipErrorECCNotCorrectable",
             "uncorrectable ECC error encountered", own=True),
    GpuError(218, "cudaErrorInvalidPtx", "CUDA_ERROR_INVALID_PTX", "hipErrorInvalidKernelFile",
             "a PTX JIT compilation failed"),
    GpuError(222, "cudaErrorUnsupportedPtxVersion", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", None,
             "the provided PTX was compiled with an unsupported toolchain.", own=True),
    GpuError(400, "cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE", "hipErrorInvalidHandle",
             "invalid resource handle"),
    GpuError(500, "cudaErrorSymbolNotFound", "CUDA_ERROR_NOT_FOUND", "hipErrorNotFound", "named symbol not found"),
    GpuError(700, "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS", "hipErrorIllegalAddress",
             "an illegal memory access was encountered", device=True, own=True),
    GpuError(701, "cudaErrorLaunchOutOfResources", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "hipErrorLaunchOutOfResources",
             "too many resources requested for launch", own=True),
    GpuError(702, "cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT", "hipErrorLaunchTimeOut",
             "the launch timed out and was terminated", device=True, own=True),
    GpuError(709, "cudaErrorContextIsDestroyed", "CUDA_ERROR_CONTEXT_IS_DESTROYED", "hipErrorContextIsDestroyed",
             "context is destroyed"),
    GpuError(710, "cudaErrorAssert", "CUDA_ERROR_ASSERT", "hipErrorAssert", "device-side assert triggered",
             device=True, own=True),
    GpuError(714, "cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR", None, "hardware stack error",
             device=True, own=True),
    GpuError(715, "cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION", None,
             "an illegal instruction was encountered", device=True, own=True),
    GpuError(716, "cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS", None, "misaligned address",
             device=True, own=True),
    GpuError(717, "cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE", None,
             "operation not supported on global/shared address space", device=True, own=True),
    GpuError(718, "cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC", None, "invalid program counter", device=True, own=True),
    GpuError(719, "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", "hipErrorLaunchFailure",
             "unspecified launch failure", device=True, own=True),
    GpuError(720, "cudaErrorCooperativeLaunchTooLarge", "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
             "hipErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch", own=True),
    GpuError(801, "cudaErrorNotSupported", "CUDA_ERROR_NOT_SUPPORTED", "hipErrorNotSupported", "operation not supported"),
    GpuError(900, "cudaErrorStreamCaptureUnsupported", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
             "hipErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing", own=True),
    GpuError(999, "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN", "hipErrorUnknown", "unknown error"),
)
GPU_ERROR_BY_CODE = {e.code: e for e in GPU_ERRORS}
GPU_ERROR_BY_NAME = {n: e for e in GPU_ERRORS for n in (e.runtime, e.driver, e.hip) if n}
# HIP's other spellings of the same numbers (hip_runtime_api.h keeps them as aliases)
GPU_ERROR_BY_NAME.update({"hipErrorMemoryAllocation": GPU_ERROR_BY_CODE[2], "hipErrorInitializationError": GPU_ERROR_BY_CODE[3],
                          "hipErrorInvalidResourceHandle": GPU_ERROR_BY_CODE[400]})
DEVICE_ERROR_CODES = frozenset(e.code for e in GPU_ERRORS if e.device)


# cuBLAS's (cublas_api.h cublasStatus_t), cuDNN's (cudnn_ops / cudnn.h cudnnStatus_t) and hipBLAS's status
# names a failed library call prints (`CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling ...`,
# `cuDNN error: CUDNN_STATUS_EXECUTION_FAILED`): name -> what it means. Their numbers are each library's own
# (cuDNN 9 renumbered them), never a CUDA error number: a fault of these carries the name, not a code.
LIBRARY_STATUS: dict[str, str] = {
    "CUBLAS_STATUS_NOT_INITIALIZED": "cuBLAS was not initialized",
    "CUBLAS_STATUS_ALLOC_FAILED": "cuBLAS could not allocate GPU memory",
    "CUBLAS_STATUS_INVALID_VALUE": "an unsupported value or parameter was passed to cuBLAS",
    "CUBLAS_STATUS_ARCH_MISMATCH": "the GPU lacks a feature the cuBLAS call needs",
    "CUBLAS_STATUS_MAPPING_ERROR": "cuBLAS could not access GPU memory",
    "CUBLAS_STATUS_EXECUTION_FAILED": "the cuBLAS kernel failed to execute on the GPU (often a fault of an earlier kernel)",
    "CUBLAS_STATUS_INTERNAL_ERROR": "an internal cuBLAS operation failed (often a CUDA error underneath)",
    "CUBLAS_STATUS_NOT_SUPPORTED": "the cuBLAS functionality is not supported",
    "CUDNN_STATUS_NOT_INITIALIZED": "cuDNN was not initialized",
    "CUDNN_STATUS_ALLOC_FAILED": "cuDNN could not allocate memory",
    "CUDNN_STATUS_BAD_PARAM": "an incorrect value or parameter was passed to cuDNN",
    "CUDNN_STATUS_ARCH_MISMATCH": "the GPU lacks a feature the cuDNN call needs",
    "CUDNN_STATUS_MAPPING_ERROR": "cuDNN could not access GPU memory",
    "CUDNN_STATUS_EXECUTION_FAILED": "the cuDNN kernel failed to execute on the GPU (often a fault of an earlier kernel)",
    "CUDNN_STATUS_INTERNAL_ERROR": "an internal cuDNN operation failed",
    "CUDNN_STATUS_NOT_SUPPORTED": "the cuDNN functionality is not supported",
    "HIPBLAS_STATUS_ALLOC_FAILED": "hipBLAS could not allocate GPU memory",
    "HIPBLAS_STATUS_EXECUTION_FAILED": "the hipBLAS kernel failed to execute on the GPU",
    "HIPBLAS_STATUS_INTERNAL_ERROR": "an internal hipBLAS operation failed",
    "HIPBLAS_STATUS_NOT_SUPPORTED": "the hipBLAS functionality is not supported",
}
