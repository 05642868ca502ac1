"""llama.cpp / ggml's CUDA error record and its assert (#33 item 5, facts dropped): the device, the
function and file:line of the check that reported it (a reporting site, never a kernel) and the
checked call are facts of the error; `GGML_ASSERT(...) failed` is a report point.

The format is ggml/src/ggml-cuda/ggml-cuda.cu's ggml_cuda_error: `CUDA error: MSG`, `  current
device: D, in function F at FILE:LINE`, `  STMT`, then GGML_ABORT's `FILE:LINE: CUDA error`
(ggml_abort: `FILE:LINE: ` + the message; GGML_ASSERT's message `GGML_ASSERT(expr) failed`; before
mid-2024 ggml.h printed `GGML_ASSERT: FILE:LINE: expr`). The texts keep the shapes of public reports."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import triage_text

# https://github.com/ggml-org/llama.cpp/issues/13909 (2025): the abort's line first (stderr's order),
# device 7, then a glibc backtrace
LLAMA_13909 = """\
/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:75: CUDA error
CUDA error: an illegal memory access was encountered
  current device: 7, in function ggml_backend_cuda_synchronize at /llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:2461
  cudaStreamSynchronize(cuda_ctx->stream())
./llama.cpp/llama-cli(+0x751b7b)[0x5c5553040b7b]
/lib/x86_64-linux-gnu/libc.so.6(__libc_start_main+0x8b)[0x77c5c8e2a28b]
Aborted (core dumped)
"""

# https://github.com/ollama/ollama/issues/10265 (2025): ollama's bundled ggml on Windows, between
# its server's lines
OLLAMA_10265 = """\
[GIN] 2025/04/14 - 20:20:32 | 200 |    4.2413769s |       127.0.0.1 | POST     "/api/generate"
CUDA error: an illegal memory access was encountered
  current device: 0, in function ggml_cuda_op_mul_mat at C:\\a\\ollama\\ollama\\ml\\backend\\ggml\\ggml\\src\\ggml-cuda\\ggml-cuda.cu:1621
  cudaGetLastError()
C:\\a\\ollama\\ollama\\ml\\backend\\ggml\\ggml\\src\\ggml-cuda\\ggml-cuda.cu:73: CUDA error
"""

# https://github.com/ggml-org/llama.cpp/issues/5991 (2024): pasted without the indentation, and the
# old assert's format
LLAMA_5991 = """\
CUDA error: an illegal memory access was encountered
current device: 0, in function ggml_backend_cuda_buffer_get_tensor at C:\\Users\\u\\llama.cpp\\ggml-cuda.cu:10939
cudaDeviceSynchronize()
GGML_ASSERT: C:\\Users\\u\\llama.cpp\\ggml-cuda.cu:244: !"CUDA error"
"""

# https://github.com/ikawrakow/ik_llama.cpp/issues/425 (2025): a fork that prints the call's name alone
IK_425 = """\
CUDA error: an illegal memory access was encountered
  current device: 0, in function ggml_backend_sched_compute_splits at /home/u/ik_llama.cpp/ggml/src/ggml-backend.c:1820
  cudaStreamSynchronize
"""

# ggml's assert in today's format (ggml_abort's prefix), alone: a host abort, no GPU error
ASSERT_ONLY = "/src/llama.cpp/ggml/src/ggml-cuda/cpy.cu:285: GGML_ASSERT(ggml_nbytes(src0) <= INT_MAX) failed\n"


def triage(tmp_path, text: str, fmt: str = "json"):
    return triage_text(tmp_path, text, "server.log", fmt)


def the_error(doc: dict) -> dict:
    (f,) = [f for f in doc["faults"] if f["kind"] == "cuda-error"]
    return f


def test_the_device_function_site_and_call_are_facts_of_the_error(tmp_path):
    doc = triage(tmp_path, LLAMA_13909)
    f = the_error(doc)
    d = f["detail"]
    assert (f["code"], f["gpu"], d["device"]) == ("700", "CUDA device 7", 7)
    assert d["reported_in"] == "/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:2461 in ggml_backend_cuda_synchronize"
    assert d["call"] == "cudaStreamSynchronize(cuda_ctx->stream())"
    # where the host noticed, said as that: a report point, and no kernel named from it
    (rp,) = [r for r in doc["report_points"] if r["kind"] == "ggml-error-check"]
    assert rp["frame"] == d["reported_in"] and rp["origin"].endswith(":3")
    assert rp["exception"] == ("CUDA error: an illegal memory access was encountered at "
                               "`cudaStreamSynchronize(cuda_ctx->stream())`")
    assert doc["verdict"]["kernel"] is None and doc["verdict"]["candidates"] == []
    assert all(c["kernel"] is None or "ggml_backend_cuda_synchronize" not in c["kernel"]
               for c in doc["verdict"]["claims"])


def test_the_report_says_where_it_was_reported(tmp_path):
    md = triage(tmp_path, LLAMA_13909, "md")
    facts = md.split("## Fault facts")[1].split("\n## Report points")[0]
    assert "| CUDA device 7 |" in facts
    assert ("reported it in /llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:2461 in ggml_backend_cuda_synchronize, at "
            "`cudaStreamSynchronize(cuda_ctx->stream())`, on device 7") in facts.replace("\\", "")
    points = md.split("## Report points")[1].split("\n## ")[0]
    assert "ggml-error-check: /llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:2461 in ggml_backend_cuda_synchronize" in \
        points.replace("\\", "")


def test_windows_paths_and_a_server_around_it(tmp_path):
    d = the_error(triage(tmp_path, OLLAMA_10265))["detail"]
    assert (d["device"], d["call"]) == (0, "cudaGetLastError()")
    assert d["reported_in"] == ("C:\\a\\ollama\\ollama\\ml\\backend\\ggml\\ggml\\src\\ggml-cuda\\ggml-cuda.cu:1621 in "
                                "ggml_cuda_op_mul_mat")


def test_unindented_record_and_the_old_assert(tmp_path):
    doc = triage(tmp_path, LLAMA_5991)
    d = the_error(doc)["detail"]
    assert (d["device"], d["call"]) == (0, "cudaDeviceSynchronize()")
    assert d["reported_in"].endswith("ggml-cuda.cu:10939 in ggml_backend_cuda_buffer_get_tensor")
    (a,) = [r for r in doc["report_points"] if r["kind"] == "ggml-assert"]
    assert (a["frame"], a["exception"]) == ("C:\\Users\\u\\llama.cpp\\ggml-cuda.cu:244", 'GGML_ASSERT(!"CUDA error") failed')


def test_a_call_named_without_its_arguments(tmp_path):
    d = the_error(triage(tmp_path, IK_425))["detail"]
    assert (d["call"], d["reported_in"]) == (
        "cudaStreamSynchronize", "/home/u/ik_llama.cpp/ggml/src/ggml-backend.c:1820 in ggml_backend_sched_compute_splits")


def test_ggml_assert_alone_is_a_report_point(tmp_path):
    doc = triage(tmp_path, ASSERT_ONLY)
    (a,) = doc["report_points"]
    assert (a["kind"], a["frame"], a["exception"]) == (
        "ggml-assert", "/src/llama.cpp/ggml/src/ggml-cuda/cpy.cu:285", "GGML_ASSERT(ggml_nbytes(src0) <= INT_MAX) failed")
    assert doc["verdict"]["kernel"] is None
