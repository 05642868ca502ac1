"""Random, cut and binary input: parsers and the whole triage never raise."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultkit.triage import build
from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import render_html, render_json, render_markdown
from faultkit.sources import detect_kinds
from faultkit.ingest.kernel_log import parse_kernel_log
from faultkit.ingest.runtime_log import parse_runtime_log

from .conftest import no_internal_errors
from .test_kernel_log import GMC9_610

SEEDS = [
    GMC9_610,
    "Memory access fault by GPU node-3 (Agent handle: 0x5a5c587a51c0) on address 0x709843600000. Reason: Unknown.\n",
    ":0:rocdevice.cpp            :2893: 90021033577 us: [pid:192145 tid:0x76fa7d3ff640] Callback: Queue "
    "0x76f676200000 aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware "
    "exception. code: 0x1016\n",
    "Memory Fault Error [host: h, GPU index: 0, faulting addr: 0x0,\nkernel: void k<int>(int*)]\n",
    "wave_1: pc=0x10 (kernel_code_entry=0x20 <k>, kernargs=0x30) (stopped, reason: MEMORY_VIOLATION)\n"
    "Disassembly for function k:\n    code object: memory://1#offset=0x1&size=2\n=>  0x10 <+0>:    s_endpgm\n",
    "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nRuntimeError: HIP error: x\n",
    "[  1.0] NVRM: Xid (PCI:0000:00:06): 31, pid=581, name=python3, channel 0x0000000a, intr 00000000. MMU Fault: "
    "ENGINE GRAPHICS GPC0 GPCCLIENT_T1_12 faulted @ 0x838c_74800000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n",
    "Kernel Name: k\nVGPU=0x1 SWq=0x2, HWq=0x3, id=4\n\tgrid=[1, 1, 1], workgroup=[1, 1, 1]\n\trptr=1, wptr=2\n",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), st.integers(min_value=0, max_value=400), st.binary(max_size=64))
def test_truncated_and_corrupted_seeds(seed, cut, noise):
    data = seed.encode()[:cut] + noise + seed.encode()[cut:cut + 50]
    no_internal_errors(parse_runtime_log(data, "x").problems)
    no_internal_errors(parse_kernel_log(data, "x").problems)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=500))
def test_random_text(text):
    no_internal_errors(parse_runtime_log(text, "x").problems)
    no_internal_errors(parse_kernel_log(text, "x").problems)
    detect_kinds(text)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(SEEDS + ["\n", "# ---\n", "garbage\n"]), max_size=12), st.binary(max_size=32))
def test_whole_triage_on_random_mixtures(parts, noise):
    data = "".join(parts).encode() + noise
    inc = build(Inputs(files=[InputFile("mix.log", data)]))
    no_internal_errors(inc.problems)
    for render in (render_markdown, render_html, render_json):
        assert render(inc)
