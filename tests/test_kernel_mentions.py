"""Kernels named away from the fault line (#33 item 3): built, dispatched, launched, tuned,
disassembled and named in the text are candidates of that basis, never above `candidate`, and never a
helper or a host function. Through the real CLI (`faultkit triage FILE --format json`); the compilers'
and gdb's output is made here by the real tools (clang-19, gcc, gdb) where this machine has them; the
other lines are written in each producer's format (ingest/kernel_mentions.py names the source)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from .conftest import CORPUS, triage_text

FAULT = "RuntimeError: CUDA error: an illegal memory access was encountered\n"


def triage(tmp_path, text: str, name: str = "paste.txt") -> dict:
    return triage_text(tmp_path, text, name)


def claims(doc: dict, basis: str) -> list[dict]:
    return [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == basis]


def names(doc: dict) -> list[str]:
    return [c["kernel"] for c in doc["verdict"]["candidates"]]


def assert_only_candidates(doc: dict) -> None:
    assert doc["verdict"]["level"] == "candidates" and doc["verdict"].get("kernel") is None
    assert all(c["level"] in ("candidates", None) for c in doc["verdict"]["claims"])


# ---- built: the compilers' own output, made here ----

def _clang(tmp_path, *args: str) -> str:
    if shutil.which("clang-19") is None:
        pytest.skip("clang-19 not on this machine")
    src = tmp_path / "k.cl"
    src.write_text("__kernel void scale_rows(__global float *out, __global const float *in, int n) {\n"
                   "  int i = get_global_id(0); if (i < n) out[i] = in[i] * 2.0f; }\n")
    out = tmp_path / "k.out"
    subprocess.run(["clang-19", *args, "-S", str(src), "-o", str(out)], check=True, capture_output=True)
    return out.read_text()


@pytest.mark.parametrize("args, producer", [
    (("--target=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib"), "AMDGPU assembler"),          # .amdhsa_kernel
    (("--target=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib", "-emit-llvm"), "LLVM IR"),      # define amdgpu_kernel
    (("--target=nvptx64-nvidia-cuda",), "PTX"),                                                 # .visible .entry
], ids=["amdgcn-asm", "llvm-ir", "ptx"])
def test_a_compilers_entry_function_is_a_built_candidate(tmp_path, args, producer):
    doc = triage(tmp_path, _clang(tmp_path, *args) + FAULT)
    (c,) = claims(doc, "built")
    assert (c["kernel"], c["basis"]["producer"], c["ceiling"], c["entry_point"]) == \
        ("scale_rows", producer, "candidates", True)
    assert names(doc) == ["scale_rows"]
    assert_only_candidates(doc)


def test_clangs_resource_usage_remarks_name_the_kernel_not_its_helper(tmp_path):
    if shutil.which("clang-19") is None:
        pytest.skip("clang-19 not on this machine")
    src = tmp_path / "k2.cl"
    src.write_text("__attribute__((noinline)) float helper_scale(float x) { return x * 2.0f; }\n"
                   "__kernel void scale_rows(__global float *out, __global const float *in, int n) {\n"
                   "  int i = get_global_id(0); if (i < n) out[i] = helper_scale(in[i]); }\n")
    r = subprocess.run(["clang-19", "--target=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib", "-O2",
                        "-Rpass-analysis=kernel-resource-usage", "-S", str(src), "-o", str(tmp_path / "k2.s")],
                       capture_output=True, text=True, check=True)
    assert "remark: Function Name: scale_rows" in r.stderr
    doc = triage(tmp_path, r.stderr + FAULT)
    assert names(doc) == ["scale_rows"]
    assert claims(doc, "built")[0]["basis"]["producer"] == "clang kernel-resource-usage"


def test_ptxas_names_entry_functions_not_the_device_functions_it_lists(tmp_path):
    # ptxas -v: `Compiling entry function` is an entry; `Function properties for` lists device
    # functions and host stubs too (dim3's constructor, cudaDeviceGetAttribute)
    text = ("ptxas info    : Compiling entry function '_Z10gather_rowPfPKfPKii' for 'sm_90'\n"
            "ptxas info    : Function properties for _Z10gather_rowPfPKfPKii\n"
            "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
            "ptxas info    : Function properties for _ZN4dim3C2Ejjj\n"
            "    16 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads\n") + FAULT
    doc = triage(tmp_path, text)
    assert names(doc) == ["gather_row(float*, float const*, int const*, int)"]
    assert claims(doc, "built")[0]["basis"]["producer"] == "ptxas"


def test_inductor_output_code_names_the_triton_kernel_built(tmp_path):
    text = ("# kernel path: /tmp/torchinductor_u/ab/cab123.py\n"
            "triton_poi_fused_add_mul_0 = async_compile.triton('triton_poi_fused_add_mul_0', '''\n"
            "import triton\n'''\n") + FAULT
    doc = triage(tmp_path, text)
    assert names(doc) == ["triton_poi_fused_add_mul_0"]


# ---- disassembled: real gdb on a host program gives none; GPU code (the corpus's) gives one ----

def test_gdb_disassembly_of_host_code_names_no_kernel(tmp_path):
    if shutil.which("gdb") is None or shutil.which("gcc") is None:
        pytest.skip("gdb or gcc not on this machine")
    src = tmp_path / "h.c"
    src.write_text("int add_rows(int a, int b) { return a + b; }\nint main(void) { return add_rows(1, 2); }\n")
    subprocess.run(["gcc", "-g", "-O0", str(src), "-o", str(tmp_path / "h")], check=True)
    out = subprocess.run(["gdb", "-batch", "-nx", "-ex", "disassemble add_rows", str(tmp_path / "h")],
                         capture_output=True, text=True, timeout=60).stdout
    assert "Dump of assembler code for function add_rows:" in out
    doc = triage(tmp_path, out + FAULT)
    assert claims(doc, "disassembled") == [] and names(doc) == []


def test_rocgdb_dump_of_gpu_code_is_a_disassembled_candidate(tmp_path, corpus):
    # the corpus's rocgdb transcript, its disassembly alone (the stop lines above it left out)
    lines = (CORPUS / "gdb/nan_check_sigfpe_imprecise_alu.txt").read_text().splitlines()
    start = next(i for i, s in enumerate(lines) if s.startswith("Dump of assembler code for function"))
    end = next(i for i, s in enumerate(lines) if s.startswith("End of assembler dump"))
    doc = triage(tmp_path, "\n".join(lines[start:end + 1]) + "\nMemory access fault by GPU node-1 (Agent handle: "
                 "0x5555) on address 0x7f0000001000. Reason: Page not present or supervisor privilege.\n")
    (c,) = claims(doc, "disassembled")
    assert c["kernel"] == "loop_log_fusion" and c["level"] == "candidates"     # `... for function loop_log_fusion:`
    assert_only_candidates(doc)


def test_cuda_gdb_current_instruction_names_its_function(tmp_path, corpus):
    # cuda-gdb's `x/4i $pc` of the H200 run: `=> 0x7ffddf7a2000 <_Z18scatter_oob_kernelPfPKii+256>:\tEXIT`
    lines = (CORPUS / "cuda/h200_oob_cudagdb.txt").read_text().splitlines()
    pcs = [s for s in lines if s.startswith(("=> 0x", "   0x")) and "scatter_oob_kernel" in s][:4]
    assert pcs and pcs[0].startswith("=> ")
    doc = triage(tmp_path, "\n".join(pcs) + "\n" + FAULT)
    (c,) = claims(doc, "disassembled")
    assert c["kernel"] == "scatter_oob_kernel(float*, int const*, int)"


# ---- dispatched ----

def test_pasted_kernel_trace_rows_are_dispatched_candidates_latest_first(tmp_path, corpus):
    doc = triage(tmp_path, (CORPUS / "rocprofv3/hpctraining-rocm6.3or6.4_kernel_trace_excerpt.txt").read_text())
    # the rows: fillBufferAligned, NormKernel1, NormKernel2, copyBuffer (ROCclr's blits ranked after)
    assert names(doc) == ["NormKernel2(int, double const*, double*)",
                          "NormKernel1(int, double, double, double const*, double*)",
                          "__amd_rocclr_copyBuffer", "__amd_rocclr_fillBufferAligned"]
    assert {c["basis"]["kind"] for c in doc["verdict"]["claims"]} == {"dispatched"}
    assert_only_candidates(doc)


# ---- launched: profilers' kernel tables ----

TORCH_TABLE = """\
-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------
                                                   Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls
-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------
                                         aten::index_put_         2.10%      41.000us        12.00%     234.000us     234.000us       0.000us         0.00%      18.000us      18.000us             1
                                         cudaLaunchKernel         3.00%      58.000us         3.00%      58.000us      29.000us       0.000us         0.00%       0.000us       0.000us             2
void at::native::indexing_backward_kernel<float, 4>(...         0.00%       0.000us         0.00%       0.000us       0.000us      16.000us        88.89%      16.000us      16.000us             1
                                  Memcpy HtoD (Pageable -> Device)         0.00%       0.000us         0.00%       0.000us       0.000us       2.000us        11.11%       2.000us       2.000us             1
-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------
Self CPU time total: 1.952ms
Self CUDA time total: 18.000us
"""

NSYS = """\
[6/8] Executing 'cuda_gpu_kern_sum' stats report

 Time (%)  Total Time (ns)  Instances  Avg (ns)   Med (ns)   Min (ns)  Max (ns)   StdDev (ns)                 Name
 --------  ---------------  ---------  ---------  ---------  --------  ---------  -----------  ------------------------------------
     91.2        6,699,857        182   36,806.7   14,335.0     1,984  1,054,500     95,039.9  void scatter_add_rows<float>(float*, const int*, int)
      8.8          646,011         31   20,839.1   20,800.0    20,512     21,600        201.3  reduce_partials(float*, int)

[7/8] Executing 'cuda_gpu_mem_time_sum' stats report
"""

NVPROF = """\
==4242== Profiling result:
            Type  Time(%)      Time     Calls       Avg       Min       Max  Name
 GPU activities:   84.10%  1.72898s     28160  61.398us  3.4240us  133.22us  resample_by_picking
                   13.71%  281.51ms      5283  53.286us  20.541us  90.880us  grudge_assign_0
                    2.19%  44.995ms        62  725.73us  1.3440us  11.178ms  [CUDA memcpy DtoH]
      API calls:   99.00%  2.00000s     33443  59.803us  2.1110us  9.0000ms  cudaLaunchKernel
"""


@pytest.mark.parametrize("table, expected, producer", [
    (TORCH_TABLE, ["at::native::indexing_backward_kernel<float, 4>"], "PyTorch profiler"),
    (NSYS, ["void scatter_add_rows<float>(float*, const int*, int)", "reduce_partials(float*, int)"], "nsys"),
    (NVPROF, ["resample_by_picking", "grudge_assign_0"], "nvprof"),
], ids=["torch-profiler", "nsys-cuda_gpu_kern_sum", "nvprof"])
def test_a_profilers_kernel_rows_are_launched_candidates(tmp_path, table, expected, producer):
    doc = triage(tmp_path, table + FAULT)
    got = claims(doc, "launched")
    assert [c["kernel"] for c in got] and {c["basis"]["producer"] for c in got} == {producer}
    assert sorted(names(doc)) == sorted(expected)      # no operator, API, copy or memset row
    assert_only_candidates(doc)


# ---- tuned ----

def test_autotuner_logs_name_the_tuned_kernels(tmp_path):
    text = ("Autotuning kernel fused_moe_kernel with config BLOCK_SIZE_M: 64, BLOCK_SIZE_N: 64, num_warps: 4, "
            "num_ctas: 1, num_stages: 3, maxnreg: None\n"
            "AUTOTUNE mm(1024x4096, 4096x4096)\n"
            "  triton_mm_7 0.0410 ms 100.0% ACC_TYPE='tl.float32', BLOCK_K=64\n"
            "  mm 0.0521 ms 78.7%\n") + FAULT
    doc = triage(tmp_path, text)
    assert sorted(c["kernel"] for c in claims(doc, "tuned")) == ["fused_moe_kernel", "triton_mm_7"]
    assert_only_candidates(doc)


# ---- named in the text ----

@pytest.mark.parametrize("line, kernel", [
    ("The faulting kernel is `fused_moe_kernel_gptq_awq` (illegal memory access on H100).", "fused_moe_kernel_gptq_awq"),
    ("kernel: void flash_fwd_splitkv_kernel<Flash_fwd_traits<128>, true>(Flash_fwd_params)",     # as written
     "void flash_fwd_splitkv_kernel<Flash_fwd_traits<128>, true>(Flash_fwd_params)"),
    ("I get CUDA Exception: Warp Illegal Address in `paged_attention_v2_kernel` every few hours",
     "paged_attention_v2_kernel"),
    ("[Bug]: CUDA illegal memory access in fused_marlin_moe for Kimi-K2-Thinking on H20", "fused_marlin_moe"),
], ids=["faulting-kernel-is", "kernel-colon", "backticked-beside-a-fault", "issue-title"])
def test_a_kernel_named_in_prose_is_a_candidate_with_the_fault_kind(tmp_path, line, kernel):
    doc = triage(tmp_path, line + "\n")
    (c,) = claims(doc, "named-in-text")
    assert c["kernel"] == kernel and c["level"] == "candidates" and c["entry_point"] is None
    assert_only_candidates(doc)


def test_prose_fault_kind_is_a_fact_where_no_tool_states_one(tmp_path):
    doc = triage(tmp_path, "Crash: Warp Illegal Address in `paged_attention_v2_kernel` after 3 h.\n")
    (f,) = doc["faults"]
    assert (f["source"], f["kind"]) == ("text", "warp-illegal-address")


def test_a_backticked_kernel_on_the_line_after_the_fault_is_taken(tmp_path):
    doc = triage(tmp_path, FAULT + "It happens inside `moe_align_block_size_kernel` once num_experts > 256.\n")
    assert names(doc) == ["moe_align_block_size_kernel"]


def test_a_launch_in_a_programs_error_macro_is_named_and_kernel_launch_is_no_name(tmp_path):
    # a SAFE_KERNEL_CALL-style macro prints the call as written: `... at kernel "K<<<grid, block>>>(args)"`
    doc = triage(tmp_path, 'CUDA error in kernel launch: an illegal memory access was encountered at kernel '
                           '"matrixMultiply<<<dimGrid, dimBlock>>>(dev_a, dev_b, dev_c, SIZE)"\n'
                           "CUDA error in kernel execution: an illegal memory access was encountered\n")
    assert names(doc) == ["matrixMultiply"]
    assert "illegal memory access" in claims(doc, "named-in-text")[0]["why"]


def test_a_file_or_a_call_after_the_fault_words_is_no_kernel(tmp_path):
    doc = triage(tmp_path, "Illegal memory access in fused_moe.py when batch > 64\n"
                           "crash in forward() of the model\n" + FAULT)
    assert names(doc) == []


def test_backticks_that_are_no_kernel_are_not_taken(tmp_path):
    # PyTorch's own message backticks an error enum and an env var: neither is a kernel
    text = (FAULT + "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/ for more information.\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
            "It fails with an illegal memory access in `torch.cuda.synchronize()` and `CUDA_LAUNCH_BLOCKING=1`.\n")
    doc = triage(tmp_path, text)
    assert names(doc) == []


def test_a_helper_named_in_the_text_is_not_put_up_as_a_kernel(tmp_path):
    doc = triage(tmp_path, "The faulting kernel is `__ockl_dm_alloc` (illegal memory access).\n")
    assert names(doc) == []


# ---- never above a fault's own claim ----

def test_a_mention_never_contests_a_fault_that_names_another_kernel(tmp_path):
    # the debug agent's stopped wave makes its kernel likely; a profiler row naming another stays a candidate
    text = ("wave_1: pc=0x7f5 (kernel_code_entry=0x7f0 <gather_kernel>) (stopped, reason: MEMORY_VIOLATION)\n"
            + NVPROF)
    doc = triage(tmp_path, text)
    v = doc["verdict"]
    assert (v["level"], v["kernel"]) == ("likely", "gather_kernel")
    assert "resample_by_picking" in names(doc)[1:]


def test_the_dispatch_logs_earlier_kernels_are_dispatched_candidates(tmp_path, corpus):
    # rocgdb's stop is in crux_p1sin (maybe a device function: no 'info dispatches'); the AMD_LOG_LEVEL
    # log above it dispatched `ShaderName : _Z11crux_kernelv` before its last dispatch (ROCclr's initHeap)
    doc = triage(tmp_path, (CORPUS / "gdb/p1sin_crux_sigsegv_gfx1101_rocm612.txt").read_text())
    v = doc["verdict"]
    assert (v["level"], v["kernel"]) == ("likely", "crux_p1sin")
    (c,) = claims(doc, "dispatched")
    assert (c["kernel"], c["basis"]["producer"], c["level"]) == ("_Z11crux_kernelv", "ROCclr", "candidates")


def test_a_source_file_is_no_fault_and_its_type_names_are_no_fault_words(tmp_path):
    # a program's own source: `cudaError_t` is a type and `printf("CUDA error ...")` says nothing happened
    text = ("__global__ void scatter_rows(float *a, const int *idx, int n) { a[idx[threadIdx.x]] = 1.f; }\n"
            "int main() {\n"
            "  scatter_rows<<<(n+255)/256,256>>>(a, idx, n);\n"
            "  cudaError_t e = cudaDeviceSynchronize();\n"
            '  if (e) printf("CUDA error: %s\\n", cudaGetErrorString(e));\n}\n')
    doc = triage(tmp_path, text, "scatter.cu")
    assert doc["faults"] == []


LAUNCHER = """\
class JITFunction:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def run(self, *args, grid, **kwargs):
        raise RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered")


fused_moe_kernel = JITFunction()
layers = [lambda x: x / 0]


def invoke_fused_moe_kernel(a, b):
    grid = (4, 1)
    fused_moe_kernel[grid](
        a, b, BLOCK_SIZE_M=64)


def forward(x):
    layers[0](x)


import sys
invoke_fused_moe_kernel(1, 2) if sys.argv[1] == "launch" else forward(1)
"""


@pytest.mark.parametrize("which, expected", [("launch", ["fused_moe_kernel"]), ("module-list", [])])
def test_a_triton_launch_in_a_real_traceback_is_launched(tmp_path, which, expected):
    # CPython's own traceback of a call shaped as Triton's: `kernel[grid](` binds the grid, the call launches
    (tmp_path / "launch.py").write_text(LAUNCHER)
    r = subprocess.run([sys.executable, str(tmp_path / "launch.py"), which], capture_output=True, text=True)
    assert "Traceback (most recent call last)" in r.stderr
    doc = triage(tmp_path, r.stderr, "tb.txt")
    assert names(doc) == expected           # `layers[0](x)` is a module list's call, no launch
    if expected:
        assert claims(doc, "launched")[0]["basis"]["producer"] == "Triton (traceback)"
