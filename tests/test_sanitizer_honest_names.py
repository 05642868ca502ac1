"""Honest names (#33 item 4): a compute-sanitizer report whose only named function is a device
function or a library helper claims no kernel; it says 'device function X (a helper of an unnamed
kernel)' and the JSON carries the device function apart from the kernel.

Two kinds of text: compute-sanitizer 2025.3.1's own output for our program on the H200
(tests/data/live_h200_sanitizer, README there), and records written here in the layout of public
reports: NVIDIA/Fuser#2930 (an `Invalid __local__ write` at nvFuser's jitted-reduction helper
`<unnamed>::loadGeneric<float, (int)4>(T1 *, T1 *)`, no `Device Frame:` line, then a host backtrace)
and NVIDIA/cudf#15258 (a CUB *kernel*, `DeviceReduceSingleTileKernel<...>(T2, T3, ...)`: template
placeholders in a signature do not make a device function)."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import pytest

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.triage import build

LIVE = Path(__file__).parent / "data" / "live_h200_sanitizer"
P = "========= "


def triage(text: str, name: str = "pasted.log") -> dict:
    return to_json(build(Inputs(files=[InputFile(name, text.encode())])))


def cli(tmp_path, text: str) -> dict:
    p = tmp_path / "sanitizer.txt"
    p.write_text(text)
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(p), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def lines(*body: str) -> str:
    return "".join(f"{P}{s}\n" for s in body)


def named(doc: dict) -> list[dict]:
    return [c for c in doc["verdict"]["claims"] if c["named"] and c["kernel"]]


def unnamed(doc: dict) -> list[dict]:
    return [c for c in doc["verdict"]["claims"] if not c["named"]]


def live(name: str) -> str:
    return (LIVE / name).read_text()


def helper_runs() -> tuple[list[str], list[str]]:
    """memcheck_helper.txt's two runs: default backtraces, then `--show-backtrace device`."""
    text = live("memcheck_helper.txt").splitlines(keepends=True)
    second = [i for i, s in enumerate(text) if s.startswith("========= COMPUTE-SANITIZER")][1]
    return text[:second], text[second:]


def first_record(run: list[str]) -> list[str]:
    """The run's first report: its head line up to the `=========` separator that ends it."""
    end = next(i for i, s in enumerate(run) if i > 1 and s.rstrip() == "=========")
    return run[1:end + 1]


# ---- the live H200 texts: values from their lines ----

def test_live_helper_run_with_host_backtrace_names_the_kernel_and_the_device_function(tmp_path):
    run1, _ = helper_runs()
    doc = cli(tmp_path, "".join(run1))
    v = doc["verdict"]
    # `Device Frame: helper_oob_kernel(int *)+0x30`, then `Saved host backtrace`: the outermost frame is the kernel
    assert (v["level"], v["kernel"]) == ("certain", "helper_oob_kernel(int *)")
    (c,) = named(doc)
    # `at [clone helper_oob_kernel(int *)] store_past_end(int *, int)+0xa0 in sanitizer_formats.cu:39`
    assert c["device_function"] == "store_past_end(int *, int)"
    assert "in its device function store_past_end(int *, int), at +0xa0 (sanitizer_formats.cu:39)" in c["why"]
    assert "[clone" not in c["why"]          # the bracket names the kernel, which is the claim already
    assert c["why"].endswith("the kernel by the outermost `Device Frame:` of a record that goes on past its frames")
    writes = [f for f in doc["faults"] if f["kind"] == "invalid-global-write"]
    # `Access to 0x7fe83e804000 is out of bounds` / `13,313 bytes after ... 0x7fe83e800800 of size 1,024`
    assert writes[0]["address"] == "0x7fe83e804000"
    assert (writes[0]["detail"]["allocation"], writes[0]["detail"]["allocation_size"]) == ("0x7fe83e800800", 1024)
    assert len(writes) == 32                 # threads (0,0,0) ... (31,0,0)
    assert writes[0]["detail"]["device_function"] == "store_past_end(int *, int)"
    assert writes[0]["detail"]["meaning"].startswith("compute-sanitizer caught an invalid 4-byte global write in "
                                           "store_past_end(int *, int), a device function of helper_oob_kernel(int *): "
                                           "13,313 bytes after the nearest allocation at 0x7fe83e800800")


def test_live_helper_run_with_device_backtrace_only_names_the_kernel():
    _, run2 = helper_runs()
    doc = triage("".join(run2))
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "helper_oob_kernel(int *)")
    (c,) = named(doc)
    assert c["device_function"] == "store_past_end(int *, int)"
    assert [f["address"] for f in doc["faults"] if f["kind"] == "invalid-global-write"][0] == "0x7f2f30804000"


def test_one_record_ended_by_its_separator_names_the_kernel():
    # run 2's first record alone: no host backtrace, no next record; the `=========` line ends it
    _, run2 = helper_runs()
    rec = first_record(run2)
    assert rec[-2].strip().startswith("=========         Device Frame: helper_oob_kernel")
    doc = triage("".join(rec))
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "helper_oob_kernel(int *)")


@pytest.mark.parametrize("keep_host", [True, False], ids=["host-backtrace-after", "paste-cut"])
def test_live_record_with_its_device_frame_removed_names_no_kernel(keep_host):
    run1, _ = helper_runs()
    rec = [s for s in first_record(run1) if "Device Frame:" not in s]
    if not keep_host:
        rec = [s for s in rec if "Host Frame" not in s and "Saved host" not in s and s.strip() != "========="]
    doc = triage("".join(rec))
    v = doc["verdict"]
    assert v["kernel"] is None and v["level"] == "candidates"
    (c,) = unnamed(doc)
    assert c["kernel"] == "device function store_past_end(int *, int) (a helper of an unnamed kernel)"
    assert c["device_function"] == "store_past_end(int *, int)" and c["entry_point"] is False
    assert "clone" in c["why"] and "helper_oob_kernel(int *)" in c["why"]   # the sign it used, said
    # the bracket names the kernel the helper was compiled into (nvcc names the copy $K$f): a candidate, no more
    (k,) = named(doc)
    assert (k["kernel"], k["level"], k["basis"]["kind"]) == ("helper_oob_kernel(int *)", "candidates", "cloned-into")
    assert [x["kernel"] for x in v["candidates"]] == [c["kernel"], "helper_oob_kernel(int *)"]


def test_a_full_record_after_a_cut_one_still_names_its_kernel_certain():
    # the clone's candidate from a cut record must not shadow the kernel a complete record shows
    run1, _ = helper_runs()
    rec = first_record(run1)
    cut = [s for s in rec if "Device Frame:" not in s]
    doc = triage("".join(cut + rec))
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "helper_oob_kernel(int *)")


def test_live_other_tools_kind_address_kernel():
    doc = triage(live("initcheck.txt"))
    f = doc["faults"][0]   # `Uninitialized __global__ memory read of size 4 bytes` / `Address 0x7f6a80800400`
    assert (f["kind"], f["address"]) == ("initcheck-uninitialized-read", "0x7f6a80800400")
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "uninit_read_kernel(const float *, float *)")

    doc = triage(live("synccheck.txt"))
    kinds = [f["kind"] for f in doc["faults"] if f["source"] == "sanitizer"]
    assert kinds == ["synccheck-barrier-error"]     # 16 lines of one finding at sanitizer_formats.cu:20
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "divergent_barrier_kernel(int *)")

    doc = triage(live("memcheck_misaligned_badpc.txt"))
    shared = [f for f in doc["faults"] if f["kind"] == "invalid-shared-write"]
    assert shared[0]["address"] == "0x401" and shared[0]["detail"]["misaligned"] is True   # `Access to 0x401 is misaligned`
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "misaligned_shared_kernel(int *)")
    mis = next(c for c in named(doc) if c["kernel"] == "misaligned_shared_kernel(int *)")
    assert "the kernel by the `at` function of a record that ended with no `Device Frame:` line" in mis["why"]
    pcs = [f for f in doc["faults"] if f["kind"] == "memcheck-invalid-pc"]     # (each exception its own kind)
    assert pcs and pcs[0]["detail"]["kernel"] == "bad_call_kernel(int *, void (*)(int *))"    # `Invalid PC` / `at bad_call_kernel...+0x70`
    assert "bad_call_kernel(int *, void (*)(int *))" in [c["kernel"] for c in named(doc)]


def test_live_warp_assert_is_in_the_runtimes_assert_handler_not_a_kernel():
    doc = triage(live("assert_and_leak.txt"))
    # the device-assert lines name `void assert_kernel(int)`; the sanitizer's `Warp assert` record is at
    # `__assertfail+0x19a0` with `Device Frame: __assertfail+0x1930` only: the runtime's assert handler
    kernels = [c["kernel"] for c in named(doc)]
    assert "__assertfail" not in " ".join(kernels)
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "void assert_kernel(int)")
    (f,) = [f for f in doc["faults"] if f["kind"] == "memcheck-device-assert"]   # 48 records, one place
    assert (f["detail"]["kernel"], f["detail"]["offset"]) == ("__assertfail", "0x19a0")
    assert [c["device_function"] for c in unnamed(doc)] == ["__assertfail"]


def test_the_sanitizers_lines_alone_give_the_assert_and_no_kernel():
    # only the `=========` lines of the same run (a paste without the program's own output)
    text = "".join(s for s in live("assert_and_leak.txt").splitlines(keepends=True) if s.startswith("========="))
    doc = triage(text)
    kinds = {f["kind"] for f in doc["faults"]}
    assert {"memcheck-device-assert", "api-error"} <= kinds     # `Program hit cudaErrorAssert (error 710)`
    assert doc["verdict"]["kernel"] is None and named(doc) == []
    assert [c["device_function"] for c in unnamed(doc)] == ["__assertfail"]


def test_live_racecheck_of_the_folded_kernel_is_no_fault():
    doc = triage(live("racecheck_folded.txt"))   # `RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)`
    assert doc["faults"] == [] and doc["verdict"]["kernel"] is None


def test_live_racecheck_race_names_the_kernel_and_its_hazards():
    doc = triage(live("racecheck.txt"))
    # `Race reported between Write access at shared_race_kernel(int *)+0x90 in sanitizer_formats.cu:16`
    # `and Read access at shared_race_kernel(int *)+0xa0 in sanitizer_formats.cu:17 [256 hazards]`
    (f,) = doc["faults"]
    assert (f["kind"], f["detail"]["hazards"], f["detail"]["accesses"]) == ("racecheck-race", 256, ["Write", "Read"])
    assert (f["detail"]["source"], f["detail"]["offset"]) == ("sanitizer_formats.cu:16", "0x90")
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "shared_race_kernel(int *)")


def test_live_racecheck_hazard_mode_gives_each_hazard_its_address():
    doc = triage(live("racecheck_hazard.txt"))
    # `Potential RAW hazard detected at __shared__ 0x400 in block (0,0,0)`, 0x401 ..., 100 displayed
    hazards = [f for f in doc["faults"] if f["kind"] == "racecheck-RAW-hazard"]
    assert hazards[0]["address"] == "0x400" and hazards[0]["detail"]["block"] == [0, 0, 0]
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "shared_race_kernel(int *)")


@pytest.mark.parametrize("swap", [False, True], ids=["as-printed", "accesses-swapped"])
def test_live_race_with_a_helper_names_the_kernel_and_the_device_function(swap):
    text = live("racecheck_helper.txt")
    if swap:    # the same record with the clone's access first: the kernel is still the plain access's function
        rows = text.splitlines(keepends=True)
        a, b = rows[1], rows[2]
        rows[1] = a.replace("Read access at race_helper_kernel(int *)+0xc0 in sanitizer_formats.cu:32",
                            "Write access at [clone race_helper_kernel(int *)] publish(volatile int *, int)+0x140 in sanitizer_formats.cu:28")
        rows[2] = b.replace("Write access at [clone race_helper_kernel(int *)] publish(volatile int *, int)+0x140 in sanitizer_formats.cu:28",
                            "Read access at race_helper_kernel(int *)+0xc0 in sanitizer_formats.cu:32")
        assert rows[1] != a and rows[2] != b
        text = "".join(rows)
    doc = triage(text)
    # `Read access at race_helper_kernel(int *)+0xc0` / `Write access at [clone race_helper_kernel(int *)] publish(...)`
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "race_helper_kernel(int *)")
    (c,) = named(doc)
    assert c["device_function"] == "publish(volatile int *, int)"
    assert "[clone" not in c["why"].split("; the kernel by")[0]


def test_live_inlined_helper_names_the_kernel_of_its_device_frame():
    doc = triage(live("memcheck_inline_helper.txt"))
    # `at store_inline_past_end(int *, int)+0x60 in sanitizer_formats.cu:65` / `Device Frame: inline_helper_oob_kernel(int *)+0x20`
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "inline_helper_oob_kernel(int *)")
    (c,) = named(doc)
    assert c["device_function"] == "store_inline_past_end(int *, int)"
    w = [f for f in doc["faults"] if f["kind"] == "invalid-global-write"]
    assert w[0]["address"] == "0x7f98c8804000"


# ---- public shapes, written here in compute-sanitizer's layout ----

NVFUSER = ["Invalid __local__ write of size 16 bytes",
           "    at void <unnamed>::loadGeneric<float, (int)4>(T1 *, T1 *)+0x830 in /tmp/nvf/__tmp_kernel_reduction_f3_c1_r0_g2.cu:2623",
           "    by thread (3,4,0) in block (71,0,0)",
           "    Address 0xfffa94 is misaligned"]
HOST = ["    Saved host backtrace up to driver entry point at kernel launch time",
        "    Host Frame: [0x2dcdbf]",
        "               in /usr/lib/x86_64-linux-gnu/libcuda.so.1"]


@pytest.mark.parametrize("tail", [HOST, []], ids=["host-backtrace-only", "paste-cut"])
def test_a_jitted_reduction_helper_is_no_kernel(tmp_path, tail):
    doc = cli(tmp_path, lines(*NVFUSER, *tail))
    v = doc["verdict"]
    assert v["kernel"] is None and v["level"] not in ("certain", "likely")
    assert named(doc) == []
    (c,) = unnamed(doc)
    assert c["device_function"] == "void <unnamed>::loadGeneric<float, (int)4>(T1 *, T1 *)"
    assert c["kernel"] == "device function void <unnamed>::loadGeneric<float, (int)4>(T1 *, T1 *) (a helper of an unnamed kernel)"
    assert "anonymous namespace" in c["why"]             # the sign it used
    (f,) = doc["faults"]
    assert (f["kind"], f["address"]) == ("invalid-local-write", "0xfffa94")


@pytest.mark.parametrize("name, ret", [
    ("unsigned int hash_row<int>(const int *)", "unsigned int"),
    ("float *pick_row<float>(float *, int)", "float"),
    ("__half cub::CUB_200200_800_NS::BlockReduceWarpReductions<__half, (int)256, (int)1, (int)1, (int)0>::"
     "ApplyWarpAggregates<(bool)1, cub::CUB_200200_800_NS::Max, (int)1>(T2, __half, int)", None),   # a member: said so first
])
def test_a_return_type_other_than_void_is_a_device_function(name, ret):
    # a __global__ function returns void; demangled template functions print their return type (cccl#1229's
    # `__half ...::ApplyWarpAggregates<...>`): any other type is a device function's, `void` tells nothing
    from faultkit.analyze.entry_signs import helper_sign
    sign = helper_sign(name)
    assert sign is not None
    if ret:
        assert sign == f"not an entry point: it returns {ret} (a __global__ function returns void)"
    assert helper_sign("void hash_rows<int>(const int *)") is None


def test_template_placeholders_do_not_make_a_kernel_a_helper():
    # cudf#15258's shape: a CUB __global__ printed with placeholders; the record ends in its host backtrace
    doc = triage(lines("Invalid __shared__ read of size 16 bytes", f"    at 0x9670 in {CUB_KERNEL}",
                       "    by thread (0,0,0) in block (0,0,0)", "    Address 0x8 is misaligned", *HOST))
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", CUB_KERNEL)


CUB_KERNEL = ("void cub::CUB_200200_800_NS::DeviceReduceSingleTileKernel<cub::CUB_200200_800_NS::DeviceReducePolicy"
              "<short, unsigned int, thrust::minimum<void>>::Policy600, short *, short *, unsigned int, "
              "thrust::minimum<void>, short, short>(T2, T3, T4, T5, T6)")


@pytest.mark.parametrize("name, helper", [
    ("cub::CUB_200200_800_NS::LoadDirectBlocked<float, (int)4>(int, float *, float (&)[4])", True),
    ("at::native::memory::detail::vectorized_load_helper<float>(float *)", True),
    ("void (anonymous namespace)::warpReduceSum<float>(float)", True),
    ("void at::native::<unnamed>::indexSelectLargeIndex<float, long, unsigned int, (int)2, (int)2, (int)-2, (bool)1>"
     "(at::cuda::detail::TensorInfo<T1, T3>, at::cuda::detail::TensorInfo<const T1, T3>, "
     "at::cuda::detail::TensorInfo<const T2, T3>, int, int, T3, T3, long)", False),
    ("void at::native::<unnamed>::reduce_kernel<(int)512, (int)1, float>(float *)", False),
    ("void at::native::<unnamed>::softmax_warp_forward<float, float, float, (int)10, (bool)0, (bool)0>(T2 *, const T1 *, int, int, int, const bool *, int, bool)", False),
    # kernels instantiated with types that carry a helper's sign: vLLM's bf16 kernels (`__nv_bfloat16` is a
    # type, not a libdevice function) and ATen's elementwise kernels (a lambda is their template argument)
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
     "(const T1 *, const T1 *, T2 *, T2 *, const long *, long, long, long, long, int, int, int)", False),
    ("void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_nocast<at::native::"
     "direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda(float) "
     "(instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)", False),
    ("void at::native::<unnamed>::index_kernel_impl<float>::{lambda(int)#1}::operator()(int) const", True),
    ("__nv_fast_sinf", True),
    # kernels in anonymous or detail namespaces (the shapes of cudf#16578, cudf PR#19995, Fuser#2632)
    ("void cudf::io::parquet::detail::<unnamed>::gpuDecodePageDataFixed<unsigned char>(cudf::io::parquet::detail::PageInfo *, "
     "unsigned long, unsigned long, unsigned int *)", False),
    ("void cudf::io::parquet::detail::<unnamed>::decode_page_data_generic<unsigned char, (int)128>(unsigned int *)", False),
    ("<unnamed>::nvfuser_inner_outer_persistent_f0_c1_r0_g0(<unnamed>::Tensor<bool, (int)2, (int)2>)", False),
    # helpers of the same libraries (cccl#1889's ThreadLoad, cccl#1898's functor operator ())
    ("std::iterator_traits<T2>::value_type cub::CUB_200500_600_700_800_NS::ThreadLoad<(cub::CUB_200500_600_700_800_NS::"
     "CacheLoadModifier)5, const unsigned long long *>(T2)", True),
    ("void thrust::THRUST_200500_600_700_800_NS::cuda_cub::__uninitialized_copy::functor<int *, int *>::operator ()<long>(T1)", True),
    # a member template of a class template returning void (the member pattern needs `(` after the name)
    ("void cub::CUB_200500_800_NS::BlockScanRaking<int, (int)128>::ExclusiveScan<cub::Sum>(int, int &, cub::Sum)", True),
    ("void WarpTile<(int)32>::stage<float>(float *)", True),
    # a kernel whose template argument is a member of a class template (`Policy<...>::Policy600`)
    (CUB_KERNEL, False),
], ids=["cub-load", "memory-detail", "anon-warp-reduce", "torch-index-kernel", "torch-reduce-kernel", "torch-softmax-kernel",
        "vllm-bf16-kernel", "aten-elementwise-lambda-arg", "aten-lambda-operator", "libdevice",
        "cudf-decode-kernel", "cudf-generic-kernel", "nvfuser-kernel", "cub-threadload", "thrust-functor",
        "cub-member-template", "member-template", "cub-kernel-policy-arg"])
def test_library_helper_shape_against_kernels_of_the_same_namespaces(name, helper):
    from faultkit.analyze.entry_signs import helper_sign
    assert (helper_sign(name) is not None) == helper


def test_a_kernel_name_in_a_record_cut_before_it_ends_is_not_certain():
    # the live misaligned record cut after its `Access to` line: a device frame could have followed
    rec = live("memcheck_misaligned_badpc.txt").splitlines(keepends=True)[1:5]
    assert rec[-1].strip().endswith("Access to 0x401 is misaligned")
    doc = triage("".join(rec))
    v = doc["verdict"]
    assert (v["level"], v["kernel"]) == ("likely", "misaligned_shared_kernel(int *)")
    (c,) = named(doc)
    assert c["entry_point"] is None and any("device function" in s for s in c["limits"])


def test_the_report_says_where_the_fault_was_when_no_kernel_is_shown(tmp_path):
    p = tmp_path / "sanitizer.txt"
    p.write_text(lines(*NVFUSER, *HOST))
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(p)], capture_output=True, text=True, timeout=120)
    verdict = r.stdout.split("## Verdict", 1)[1].split("\n## ", 1)[0]
    assert ("The fault was in device function `void <unnamed>::loadGeneric<float, (int)4>(T1 *, T1 *)` "
            "(a helper of an unnamed kernel).") in verdict
    assert "faulting kernel" not in verdict


def test_frames_ended_by_the_separator_name_the_kernel_of_an_inlined_frame():
    # a Triton kernel whose inlined function shows as a Device Frame of the same symbol, the record ended by
    # the bare `=========` line (the layout of a 2025 public memcheck paste; names and numbers ours)
    doc = triage(lines("Invalid __global__ read of size 16 bytes",
                       "    at _attn_fwd_inner+0x2a40 in attn_v2_5d1e.py:61",
                       "    by thread (64,0,0) in block (17,0,0)",
                       "    Access to 0x7f10aa000400 is out of bounds",
                       "        Device Frame: _attn_fwd_inner+0x1100 in attn_v2_5d1e.py:140", ""))
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "_attn_fwd_inner")


def test_a_helper_shaped_name_yields_to_a_format_that_shows_an_entry_point():
    # ptxas names entry functions only: a kernel named like a helper (anonymous namespace, `warp...`) is
    # still built; the shape of a name is a reading, the format is evidence
    text = ("ptxas info    : Compiling entry function '_ZN12_GLOBAL__N_114warpReduceRowsEPfi' for 'sm_90'\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    doc = triage(text)
    built = [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "built"]
    assert [c["kernel"] for c in built] == ["(anonymous namespace)::warpReduceRows(float*, int)"]


# the same rule for a debugger: cuda-gdb opening a GPU core whose excepting warp is in a CUB helper (the layout of
# tests/test_debug_stop_helper.py's core; the helper's name is CUB's LoadDirectBlocked, no frame above it)
CORE_IN_CUB = ("(cuda-gdb) target cudacore /tmp/cuda_coredump_host.5151.1754898045\n"
               "Opening GPU coredump: /tmp/cuda_coredump_host.5151.1754898045\n\n"
               "CUDA Exception: Warp Illegal Address\n"
               "The exception was triggered at PC 0x7f31abb9f6d0  void cub::CUB_200500_800_NS::LoadDirectBlocked"
               "<float, (int)4>(int, float *, float (&)[4])\n"
               "[Current focus set to CUDA kernel 0, grid 1, block (3,0,0), thread (64,0,0), device 0, sm 12, warp 2, lane 0]\n"
               "#0  0x00007f31abb9f6e0 in cub::CUB_200500_800_NS::LoadDirectBlocked<float, 4> (linear_tid=64, "
               "block_itr=0x7f3000000000, items=...) at /src/cub/cub/block/block_load.cuh:112\n")


def test_a_core_stopped_in_a_library_helper_names_no_kernel():
    doc = triage(CORE_IN_CUB)
    assert doc["verdict"].get("kernel") is None and named(doc) == []
    (c,) = unnamed(doc)
    assert c["basis"]["kind"] == "device-function" and "LoadDirectBlocked" in c["device_function"]
    assert "library's internals" in c["why"]


# ---- the same names however the report was pasted (#33 item 2's transforms on these texts) ----

def _pasted_texts() -> dict[str, str]:
    run1, run2 = helper_runs()
    rec1 = first_record(run1)
    return {"helper-host": "".join(rec1),
            "helper-separator": "".join(first_record(run2)),
            "clone-cut": "".join(s for s in rec1 if "Device Frame:" not in s),
            "race-helper": live("racecheck_helper.txt"),
            "jit-helper": lines(*NVFUSER, *HOST)}


def _names(text: str) -> tuple:
    doc = triage(text)
    v = doc["verdict"]
    return (v["level"], v.get("kernel"), sorted(str(c.get("device_function")) for c in v["claims"]),
            sorted((f["kind"], f["address"]) for f in doc["faults"]))


@pytest.mark.parametrize("transform", sorted(__import__("tests.paste_transforms", fromlist=["SIMPLE"]).SIMPLE))
def test_names_hold_however_the_report_is_pasted(transform):
    from tests.paste_transforms import SIMPLE
    broke = []
    for name, text in _pasted_texts().items():
        if _names(SIMPLE[transform](text)) != _names(text):
            broke.append(name)
    assert broke == []


@pytest.mark.parametrize("at, level", [("tma_issue_rows in tma_rows.h:88", "likely"),
                                       ("tma_issue_rows(float *, int)+0x1a0 in tma_rows.cu:88", "certain")],
                         ids=["no-offset-no-signature", "symbol-with-offset"])
def test_a_name_without_offset_or_signature_may_be_an_inlined_helper(at, level):
    # cccl#8288's 2026 layout `at cp_async_bulk_cp_mask in cp_async_bulk.h:236` named a helper inside a CUB kernel;
    # here the record ends in its host backtrace and the program's API error (it did not go on)
    doc = triage(lines("Invalid __shared__ read of size 16 bytes", f"    at {at}", "    by thread (128,0,0) in block (0,0,0)",
                       "    Address 0x400 is out of bounds", *HOST, "",
                       'Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API '
                       "call to cudaDeviceSynchronize."))
    v = doc["verdict"]
    assert v["level"] == level and v["kernel"].startswith("tma_issue_rows")


def test_many_records_of_one_helper_make_one_claim_each():
    # run 1 with every Device Frame line removed: 32 records of one store, each names the same helper and clone
    run1, _ = helper_runs()
    doc = triage("".join(s for s in run1 if "Device Frame:" not in s))
    kinds = sorted(c["basis"]["kind"] for c in doc["verdict"]["claims"])
    assert kinds == ["cloned-into", "device-function"]


def test_a_kernel_instantiated_with_a_helpers_type_is_named():
    # vLLM's cache kernel over bf16 (the shape of vLLM's memcheck pastes; names ours): `__nv_bfloat16` is a
    # template argument, not the libdevice prefix of the function
    k = ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
         "(const T1 *, const T1 *, T2 *, T2 *, const long *, long, long, long, long, int, int, int)")
    doc = triage(lines("Invalid __global__ write of size 2 bytes", f"    at {k}+0x3f0 in cache_kernels.cu:287",
                       "    by thread (12,0,0) in block (931,0,0)", "    Address 0x7f21c0000010 is out of bounds", *HOST))
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", k)
