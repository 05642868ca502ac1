"""A debugger stop inside a device-library helper names no kernel unless the entry point's frame
is shown; where it is, the kernel is the outermost device frame (#33 item 4). The transcripts are
rocgdb's own lines (its signal stop, the wave's lane switch, `bt`), as in tests/../corpus/gdb."""

from __future__ import annotations

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.triage import build

STOP = ('Thread 3 "saxpy" received signal SIGSEGV, Segmentation fault.\n'
        "[Switching to thread 3, lane 0 (AMDGPU Lane 1:2:1:1/0 (0,0,0)[0,0,0])]\n"
        "0x00007ffff7ec1094 in __ockl_dm_alloc (sz=64) at /long_pathname/ockl/src/dm.cl:462\n"
        "462     /long_pathname/ockl/src/dm.cl: No such file or directory.\n")
BT_FULL = ("(gdb) bt\n"
           "#0  0x00007ffff7ec1094 in __ockl_dm_alloc (sz=64) at /long_pathname/ockl/src/dm.cl:462\n"
           "#1  0x00007ffff7ec1300 in scratch_fill (n=1024) at fill.cpp:21\n"
           "#2  0x00007ffff7ec1400 in fill_kernel (out=0x7fffe4400000, n=1024) at fill.cpp:30\n")
BT_CUT = ("(gdb) bt 1\n"
          "#0  0x00007ffff7ec1094 in __ockl_dm_alloc (sz=64) at /long_pathname/ockl/src/dm.cl:462\n"
          "(More stack frames follow...)\n")


def triage(text: str) -> dict:
    return to_json(build(Inputs(files=[InputFile("rocgdb.txt", text.encode())])))


def test_a_stop_in_a_helper_with_no_entry_frame_names_no_kernel():
    for text in (STOP, STOP + BT_CUT):
        doc = triage(text)
        named = [c["kernel"] for c in doc["verdict"]["claims"] if c.get("named", True) and c.get("kernel")]
        assert not any("__ockl_dm_alloc" in k for k in named), named
        assert doc["verdict"].get("kernel") is None
        (helper,) = [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "device-function"]
        assert helper["kernel"] == "device function __ockl_dm_alloc (a helper of an unnamed kernel)"
        assert "OCML/OCKL" in helper["why"]


def test_a_stop_in_a_helper_under_its_kernel_names_the_outermost_device_frame():
    doc = triage(STOP + BT_FULL)
    (c,) = [c for c in doc["verdict"]["claims"] if c.get("kernel") and "fill_kernel" in c["kernel"]]
    assert c["kernel"] == "fill_kernel"
    assert "outermost" in c["why"] and "__ockl_dm_alloc" in c["why"]
    assert not [x for x in doc["verdict"]["claims"] if x["basis"]["kind"] == "device-function"]


# cuda-gdb opening a GPU core, as it prints it (its exception, focus and frame lines); the stop is in
# a libdevice helper
CUDA = ("(cuda-gdb) target cudacore /tmp/cuda_coredump_host.4242.1754898045\n"
        "Opening GPU coredump: /tmp/cuda_coredump_host.4242.1754898045\n\n"
        "CUDA Exception: Warp Illegal Address\n"
        "The exception was triggered at PC 0x7f31abb9f6d0  __nv_fast_sinf\n"
        "[Current focus set to CUDA kernel 0, grid 1, block (0,0,0), thread (0,0,0), device 0, sm 124, warp 0, lane 0]\n"
        "#0  0x00007f31abb9f6e0 in __nv_fast_sinf ()\n")


def test_cuda_gdb_in_a_libdevice_helper_names_the_launched_frame_or_no_kernel():
    doc = triage(CUDA)
    assert doc["verdict"].get("kernel") is None
    (helper,) = [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "device-function"]
    assert "__nv_fast_sinf" in helper["kernel"] and "libdevice" in helper["why"]
    doc = triage(CUDA + "#1  0x00007f31abb9f800 in sinKernel(float*, int)<<<(1,1,1),(256,1,1)>>> ()\n")
    assert doc["verdict"]["kernel"] == "sinKernel(float*, int)"
    assert not [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "device-function"]
