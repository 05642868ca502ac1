"""CUDA/HIP runtime and driver errors printed by producers faultkit has no reader of its own for:
one reading (ingest/gpu_errors.py) finds the error by its message, its enum name or its number
after a CUDA/HIP error word, wherever in the line, and gives the kind and the code of the one table
(codes.GPU_ERRORS). Each line below has the shape of its producer's format string (the source file
is named beside it); the expected code is the one the line itself prints, or the number CUDA's
driver_types.h / cuda.h / HIP's hip_runtime_api.h give the printed enum name."""

from __future__ import annotations

import pytest

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.triage import build


def faults(text: str) -> list[tuple]:
    doc = to_json(build(Inputs(files=[InputFile("pasted.log", text.encode())])))
    return [(f["kind"], f["code"], f["detail"].get("enum")) for f in doc["faults"]]


LINES = [
    # flashinfer include/flashinfer/utils.cuh FLASHINFER_CUDA_CALL:
    # "CUDA Error: " << cudaGetErrorString(e) << " (" << e << ") " << __FILE__ << ": line " << __LINE__ << " at function "
    ("RuntimeError: BatchPrefillWithPagedKVCache failed with error CUDA Error: an illegal memory access was "
     "encountered (700) /opt/flashinfer/include/flashinfer/attention/prefill.cuh: line 2346 at function "
     "cudaLaunchKernel((void*)kernel, nblks, nthrs, args, smem_size, stream)", ("cuda-error", "700", None)),
    # XLA xla/stream_executor/cuda/cuda_status.cc: detail + ": " + cuGetErrorName + ": " + cuGetErrorString, in glog's line
    ("E0523 10:01:02.123456  4242 pjrt_stream_executor_client.cc:3045] Execution of replica 0 failed: INTERNAL: "
     "Failed to complete all kernels launched on stream 0x55d1c2a0: CUDA error: Could not synchronize CUDA stream: "
     "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", ("cuda-error", "700", "CUDA_ERROR_ILLEGAL_ADDRESS")),
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to launch CUDA kernel: fusion_12 with block dimensions: "
     "128x1x1 and grid dimensions: 64x1x1: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",
     ("cuda-error", "719", "CUDA_ERROR_LAUNCH_FAILED")),
    # NCCL src/include/checks.h CUDACHECK: WARN("Cuda failure '%s'", cudaGetErrorString(e)); CUCHECK:
    # WARN("Cuda failure %d '%s'", err, errStr); WARN's head from src/debug.cc: "host:pid:tid [dev] file:line NCCL WARN "
    ("gpu-node-7:4242:4300 [3] NCCL INFO enqueue.cc:1556 -> 1\ngpu-node-7:4242:4300 [3] enqueue.cc:1556 NCCL WARN "
     "Cuda failure 'an illegal memory access was encountered'", ("cuda-error", "700", None)),
    ("gpu-node-7:4242:4300 [3] transport/nvls.cc:190 NCCL WARN Cuda failure 719 'unspecified launch failure'",
     ("cuda-error", "719", None)),
    # TensorRT-LLM cpp/include/tensorrt_llm/common/cudaUtils.h check():
    # "[TensorRT-LLM][ERROR] CUDA runtime error in %s: %s" with cudaGetErrorString
    ("[TensorRT-LLM][ERROR] CUDA runtime error in cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, stream): "
     "misaligned address (/src/tensorrt_llm/runtime/bufferManager.cpp:120)", ("cuda-error", "716", None)),
    # TensorRT's logger, as trtexec prints it: "[E] [TRT] N: [file::func::line] Error Code N: Cuda Runtime (%s)"
    ("[06/01/2025-10:00:00] [TRT] [E] 1: [defaultAllocator.cpp::deallocate::42] Error Code 1: Cuda Runtime "
     "(an illegal memory access was encountered)", ("cuda-error", "700", None)),
    # ggml/src/ggml-cuda/ggml-cuda.cu ggml_cuda_error: "%s error: %s" with GGML_CUDA_NAME = "ROCm" in the HIP build
    ("ROCm error: unspecified launch failure", ("hip-error", "719", None)),
    # Triton's AMD launcher (third_party/amd/backend/driver.c): "Triton Error [HIP]:  Code: %d, Messsage: %s"
    ("RuntimeError: Triton Error [HIP]:  Code: 1, Messsage: invalid argument", ("hip-error", "1", None)),
    # a program's own check (the common `printf("Failed: Cuda error %s:%d '%s'\n", ...)` of CUDA samples), by number
    ("HIP error code 710 in hipDeviceSynchronize()", ("hip-error", "710", None)),
    # cuDNN's status (cudnn.h cudnnStatus_t, through PyTorch's aten/src/ATen/cudnn/Exceptions.h "cuDNN error: %s"):
    # the name, no CUDA number (the libraries number their statuses their own way)
    ("RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED", ("cuda-error", None, "CUDNN_STATUS_EXECUTION_FAILED")),
    # cuBLAS's (cublas_api.h) through c10's "CUDA error: %s when calling `%s`" (aten/src/ATen/cuda/CUDABlas.cpp)
    ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, "
     "&falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, "
     "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`", ("cuda-error", None, "CUBLAS_STATUS_EXECUTION_FAILED")),
]


@pytest.mark.parametrize("text, want", LINES, ids=[f"{w[0]}-{w[1]}-{i}" for i, (_, w) in enumerate(LINES)])
def test_a_producers_cuda_error_line_gives_kind_and_code(text, want):
    assert faults(text + "\n") == [want]


def test_pytorchs_own_line_gets_the_code_of_its_text():
    # c10/cuda/CUDAException.cpp: "CUDA error: " + cudaGetErrorString; the enum line follows
    text = ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
            "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
            "group__CUDART__TYPES.html for more information.\n")
    assert faults(text) == [("cuda-error", "700", "cudaErrorIllegalAddress")]


def test_one_error_seen_by_several_layers_is_one_fault():
    # Triton's text, then PyTorch's, then a program's print without a runtime's name: the same 700
    text = ("Triton Error [CUDA]: an illegal memory access was encountered\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "sync: an illegal memory access was encountered (700)\n")
    assert faults(text) == [("cuda-error", "700", None)]


@pytest.mark.parametrize("text", [
    "Error: invalid argument",                     # a shared message without a CUDA/HIP word: anyone's
    "cudaErrorCheck(cudaMemcpy(dst, src, n, cudaMemcpyDefault));",   # a macro's name, no error
    # cuda-gdb's notice of a host call's failure (it warns of every one): not the program's error
    "warning: Cuda Driver error detected: Returning 201 (CUDA_ERROR_INVALID_CONTEXT) from cuCtxGetDevice_v2",
    # the same notice's rest where a mail client wrapped it: a host call's error named without a word of failure
    "(CUDA_ERROR_INVALID_CONTEXT) from cuCtxGetDevice_v2",
    "CUDA error 0",                                # success
    # PyTorch's caching allocator's own words (c10/cuda/CUDACachingAllocator.cpp), not a runtime's error print
    "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 191.98 GiB",
])
def test_no_error_where_the_line_states_none(text):
    assert faults(text + "\n") == []


# Every error word a program prints before the number (`CUDA error 700`, `Cuda failure 700`, `HIP Runtime
# Error 700`, ...): 6 ways to write the API, 5 kinds, 6 ways to write the word. The number is the one the
# line prints; the kind is the API's.
WORDED = [f"{api} {kind}{word}" for api in ("CUDA", "Cuda", "cuda", "HIP", "Hip", "hip")
          for kind in ("", "runtime ", "driver ", "Runtime ", "Driver ")
          for word in ("error", "Error", "ERROR", "failure", "Failure", "FAILURE")]


def test_every_error_word_before_a_number_reads_the_number():
    got = {w: faults(f"worker 3: {w} 700 at step 12\n") for w in WORDED}
    want = {w: [("hip-error" if w[0] in "Hh" else "cuda-error", "700", None)] for w in WORDED}
    assert got == want, {w: g for w, g in got.items() if g != want[w]}
