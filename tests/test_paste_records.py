"""Parser records that are faults by themselves reach the report and the judge: a device-side
assert alone, a CUDA API error compute-sanitizer reported alone; a helper is never called a kernel."""

from __future__ import annotations

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.triage import build

# the shape PyTorch's index kernels print (one line per failing thread)
ASSERT = ("../aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: block: [654,0,0], thread: [{t},0,0] "
          "Assertion `srcIndex < srcSelectDimSize` failed.\n")
LAMBDA = ("/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:367: operator(): block: [0,0,0], thread: [3,0,0] "
          "Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"` failed.\n")
API = ('========= Program hit cudaErrorIllegalAddress (error 700) due to "an illegal memory access was encountered" '
       'on CUDA API call to cudaLaunchKernel.\n'
       '=========     Saved host backtrace up to driver entry point at error\n'
       '=========         Host Frame: ggml_cuda_cpy(ggml_backend_cuda_context&, ggml_tensor const*, ggml_tensor*) '
       'in cpy.cu:612 [0x59421a8] in libggml-cuda.so\n')


def triage(text: str) -> dict:
    return to_json(build(Inputs(files=[InputFile("pasted.log", text.encode())])))


def test_a_device_assert_alone_is_a_fault_and_names_the_asserting_function():
    doc = triage("".join(ASSERT.format(t=t) for t in (46, 47, 48)))
    (f,) = doc["faults"]
    assert (f["kind"], f["detail"]["function"], f["detail"]["line"], f["detail"]["threads"]) == \
        ("device-assert", "indexSelectLargeIndex", 1292, 3)
    assert f["detail"]["assertion"] == "srcIndex < srcSelectDimSize" and f["detail"]["block"] == [654, 0, 0]
    v = doc["verdict"]
    assert (v["level"], v["kernel"]) == ("likely", "indexSelectLargeIndex")
    (c,) = v["claims"]
    assert c["basis"]["kind"] == "device-assert" and c["entry_point"] is None     # never claimed as the entry


def test_a_lambdas_operator_is_a_helper_not_a_kernel():
    doc = triage(LAMBDA)
    (f,) = doc["faults"]
    assert (f["kind"], f["detail"]["function"]) == ("device-assert", "operator()")
    v = doc["verdict"]
    assert v["kernel"] is None and v["level"] not in ("certain", "likely")
    (c,) = v["claims"]
    assert c["named"] is False and c["kernel"] == "device function operator() (a helper of an unnamed kernel)"
    assert "a lambda's operator()" in c["why"]


def test_a_sanitizer_api_error_alone_is_a_fault_with_its_code():
    doc = triage(API)
    (f,) = doc["faults"]
    assert (f["source"], f["kind"], f["detail"]["error_code"], f["code"]) == ("sanitizer", "api-error", 700, None)
    assert (f["detail"]["api"], f["detail"]["error"]) == ("cudaLaunchKernel", "cudaErrorIllegalAddress")
    assert doc["verdict"]["why"] != "no GPU fault was found in the inputs"
    assert doc["verdict"]["kernel"] is None          # the host frame ggml_cuda_cpy is no kernel


SAN = ("========= Invalid __global__ write of size 4 bytes\n"
       "=========     at void add_one(float *, int)+0x70 in /src/k.cu:9\n"
       "=========     by thread (3,0,0) in block (1,0,0)\n"
       "=========     Address 0x7f0000001000 is out of bounds\n"
       "=========     Device Frame:void apply<float>(float *, int)+0x40 in /src/k.cu:14\n")
TAIL = ("=========     Device Frame:void launch_me(float *, int)+0x20 in /src/k.cu:20\n"
        "=========     Saved host backtrace up to driver entry point at kernel launch time\n"
        "=========         Host Frame: main [0x1234] in k\n")


def test_a_sanitizer_report_cut_in_its_device_frames_claims_no_kernel():
    v = triage(SAN)["verdict"]
    assert v["kernel"] is None and v["level"] not in ("certain", "likely")
    (c,) = v["claims"]
    assert c["named"] is False and c["entry_point"] is False
    assert c["kernel"] == "device function void apply<float>(float *, int) (a helper of an unnamed kernel)"
    assert "the kernel's frame, the outermost, is not shown" in c["why"]


def test_a_complete_sanitizer_report_names_its_outermost_device_frame():
    v = triage(SAN + TAIL)["verdict"]
    assert (v["level"], v["kernel"]) == ("certain", "void launch_me(float *, int)")
