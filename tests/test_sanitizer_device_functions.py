"""A compute-sanitizer report of any tool whose visible frames are device functions names no kernel
(#33 item 3, "no helper called a kernel"): 'device function X (a helper of an unnamed kernel)',
apart from the kernel; with its `Device Frame:` lines ended by the host backtrace, the outermost
frame is the kernel. Through the real CLI. The lines are compute-sanitizer's report layout (the
corpus's H200 runs and NVIDIA/cccl#8288's `at FUNC in FILE:LINE` without an offset)."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import pytest

P = "========= "


def triage(tmp_path, lines: list[str], indent: str = "") -> dict:
    p = tmp_path / "sanitizer.txt"
    p.write_text("".join(f"{indent}{P}{s}\n" for s in lines))
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(p), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def kernels(doc: dict) -> list[str]:
    return [c["kernel"] for c in doc["verdict"]["claims"] if c["named"] and c["kernel"]]


def unnamed(doc: dict) -> list[str]:
    return [c["kernel"] for c in doc["verdict"]["claims"] if not c["named"]]


MEMCHECK_CUT = ["Invalid __shared__ read of size 16 bytes",
                "    at cp_async_bulk_cp_mask in cp_async_bulk.h:236",
                "    by thread (96,0,0) in block (2,0,0)",
                "    Address 0x600 is out of bounds",
                "    Device Frame:cp_async_bulk_cp_mask(unsigned int, const void *, unsigned int)+0x30 in cp_async_bulk.h:236",
                "    Device Frame:tma_issue_row(Tile &, int)+0x1a0 in tma_rows.cuh:88"]


@pytest.mark.parametrize("indent", ["", "    "], ids=["as-printed", "ci-indented"])
def test_memcheck_cut_in_its_device_frames_names_no_kernel(tmp_path, indent):
    doc = triage(tmp_path, MEMCHECK_CUT, indent)
    v = doc["verdict"]
    assert v.get("kernel") is None and v["level"] == "candidates"
    assert kernels(doc) == []
    # the outermost frame shown (the paste ends in the frames: the kernel's frame is not shown)
    assert unnamed(doc) == ["device function tma_issue_row(Tile &, int) (a helper of an unnamed kernel)"]


def test_memcheck_frames_ended_by_the_host_backtrace_name_the_outermost_as_the_kernel(tmp_path):
    doc = triage(tmp_path, MEMCHECK_CUT + ["    Device Frame:gather_tiles(float *, const int *)+0x9c0 in gather.cu:41",
                                           "    Saved host backtrace up to driver entry point at kernel launch time",
                                           "    Host Frame: [0x2fe0a5] in libcuda.so.1"])
    v = doc["verdict"]
    assert (v["level"], v["kernel"]) == ("certain", "gather_tiles(float *, const int *)")


def test_memcheck_whose_outermost_frame_is_a_lambda_names_no_kernel(tmp_path):
    doc = triage(tmp_path, ["Invalid __global__ write of size 4 bytes",
                            "    at void at::native::<unnamed>::index_kernel_impl<float>::{lambda(int)#1}::operator()(int) const+0x40",
                            "    by thread (1,0,0) in block (0,0,0)",
                            "    Address 0x7f0000000400 is out of bounds",
                            "    Device Frame:void at::native::<unnamed>::index_kernel_impl<float>::{lambda(int)#1}::operator()(int) const+0x40",
                            "    Saved host backtrace up to driver entry point at kernel launch time"])
    assert kernels(doc) == [] and doc["verdict"].get("kernel") is None
    assert len(unnamed(doc)) == 1 and "operator()" in unnamed(doc)[0]


def test_a_cut_outermost_frame_is_no_kernel_and_not_the_frame_below_it(tmp_path):
    doc = triage(tmp_path, MEMCHECK_CUT + ["    Device Frame:gather_tiles(float *, const i",
                                           "    Saved host backtrace up to driver entry point at kernel launch time"])
    assert kernels(doc) == [] and doc["verdict"].get("kernel") is None


@pytest.mark.parametrize("head, tool", [
    ("Error: Race reported between Write access at WarpPrefix<32>::inclusive(int*)+0x2c40 in warp_prefix.cuh:88", "racecheck"),
    ("Uninitialized __global__ memory read of size 4 bytes", "initcheck"),
    ("Barrier error detected. Divergent thread(s) in warp", "synccheck"),
], ids=["racecheck", "initcheck", "synccheck"])
def test_every_tool_puts_a_class_member_up_as_a_device_function(tmp_path, head, tool):
    # a __global__ function is never a class member: `WarpPrefix<32>::inclusive` is a device function
    lines = [head] + ([] if tool == "racecheck" else ["    at WarpPrefix<32>::inclusive(int*)+0x2c40 in warp_prefix.cuh:88",
                                                       "    by thread (5,0,0) in block (0,0,0)"])
    doc = triage(tmp_path, lines)
    assert kernels(doc) == [] and doc["verdict"].get("kernel") is None
    assert unnamed(doc) == ["device function WarpPrefix<32>::inclusive(int*) (a helper of an unnamed kernel)"]
    assert doc["faults"][0]["kind"].startswith(tool)


def test_a_racecheck_report_with_device_frames_names_its_kernel(tmp_path):
    doc = triage(tmp_path, ["Error: Race reported between Write access at WarpPrefix<32>::inclusive(int*)+0x2c40 in warp_prefix.cuh:88",
                            "    and Read access at WarpPrefix<32>::inclusive(int*)+0x2c80 in warp_prefix.cuh:90 [8 hazards]",
                            "    Device Frame:WarpPrefix<32>::inclusive(int*)+0x2c40 in warp_prefix.cuh:88",
                            "    Device Frame:scan_rows(int *, int)+0x310 in scan.cu:17",
                            "    Saved host backtrace up to driver entry point at kernel launch time"])
    v = doc["verdict"]
    assert (v["level"], v["kernel"]) == ("likely", "scan_rows(int *, int)")


def test_a_windows_assert_without_a_function_claims_no_kernel(tmp_path):
    # PyTorch's Windows build prints no function before `block:` (tests/data/source_shapes); two such lines
    # of one length were read as one wrapped line, and the second's text became a 'likely' function name
    src = Path(__file__).parent / "data" / "source_shapes" / "cuda_assert_windows_no_function.txt"
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(src), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    doc = json.loads(r.stdout)
    assert doc["verdict"]["level"] in ("unknown", "candidates") and doc["verdict"].get("kernel") is None
    assert [f["kind"] for f in doc["faults"]] == ["device-assert"]
