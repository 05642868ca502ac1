"""Evidence as users paste it, through `triage` (not only the parsers): every shape keeps its fault."""

from __future__ import annotations



import pytest

from faultkit.bundle import InputFile, Inputs, collect
from faultkit.export.report import to_json
from faultkit.ingest.kernel_log import parse_kernel_log
from faultkit.analyze.event_faults import event_faults
from faultkit.triage import build

from .conftest import corpus_bytes, corpus_copy

VM = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. "
      "Reason: Page not present or supervisor privilege.")
SHAPES = {
    "markdown code block": "    " + VM,
    "quoted": "> " + VM,
    "fenced": "```\n" + VM + "\n```",
    "ctest prefix": "9: " + VM,
    "github actions stamp": "2024-05-01T10:00:00.1234567Z " + VM,
    "containerd": "2024-05-01T10:00:00.123456789Z stderr F " + VM,
    "json lines": '{"event": "line", "data": "' + VM + '\\n", "pipe": "stderr"}',
}


def triage(text: str, name: str = "pasted.log") -> dict:
    return to_json(build(Inputs(files=[InputFile(name, text.encode())])))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_runtime_fault_in_every_pasted_shape(shape):
    (f,) = triage(SHAPES[shape] + "\n")["faults"]
    assert (f["kind"], f["address"], f["gpu"]) == ("memory-access-fault", "0x7f0000001000", "node-2")


@pytest.mark.parametrize("line, code", [
    ("HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016", "0x1016"),
    ("HSA_STATUS_ERROR_EXCEPTION 0x1016", "0x1016"),
    ("hipErrorLaunchFailure ... HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory "
     "beyond the largest legal address. code: 0x29", "0x29"),
])
def test_bare_status_lines_are_faults(line, code):
    doc = triage(line + "\n")
    assert [(f["kind"], f["code"]) for f in doc["faults"]] == [("queue-error", code)]
    assert doc["verdict"]["why"] != "no GPU fault was found in the inputs"


def test_syslog_lines_with_a_monotonic_stamp_are_a_kernel_log():
    text = ("Oct  7 12:58:23 host kernel: [ 2237.944235] amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault "
            "(src_id:0 ring:24 vmid:9 pasid:32801, for process python3 pid 48213 thread python3 pid 48291)\n"
            "Oct  7 12:58:23 host kernel: [ 2237.944240] amdgpu 0000:c1:00.0: amdgpu:   in page starting at address "
            "0x00007f3a2c400000 from IH client 0x1b (UTCL2)\n")
    doc = triage(text, "kern.log")
    assert doc["inputs"][0]["kinds"] == ["kernel-log"]
    (f,) = doc["faults"]
    assert (f["address"], f["pid"], f["detail"]["pasid"]) == ("0x7f3a2c400000", 48213, 32801)


def test_every_corpus_kernel_log_keeps_its_faults_through_triage(corpus, tmp_path):
    for path in sorted((corpus / "dmesg").iterdir()):
        parsed = parse_kernel_log(corpus_bytes(path), str(path))
        doc = to_json(build(collect([str(corpus_copy(path, tmp_path / path.stem))])))
        got = [f for f in doc["faults"] if f["source"] == "kernel-log"]
        # (and the events that are faults by themselves: an IOMMU page fault, a GPU off the bus)
        assert len(got) == len(parsed.faults) + len(parsed.xids) + len(event_faults(parsed)), path.name


# ---------------- kernel-log shapes ----------------

def _block(*lines: str, stamp: float = 1001.1, pci: str = "0000:3d:00.0") -> str:
    return "".join(f"[{stamp + i / 1e6:12.6f}] amdgpu {pci}: amdgpu: {line}\n" for i, line in enumerate(lines))


def test_mi300_die_cookie_and_stray_parenthesis():
    doc = triage(_block("[gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:9 pasid:32770)",
                        " for process python3 pid 4242 thread python3 pid 4242)",
                        "  in page starting at address 0x00007f1234560000 from IH client 0x1b (UTCL2)",
                        "  cookie node_id 1 fault from die AID0.XCD0",
                        "VM_L2_PROTECTION_FAULT_STATUS:0x00901031",
                        "\t Faulty UTCL2 client ID: TCP (0x8)"), "dmesg.txt")
    (f,) = doc["faults"]
    assert (f["address"], f["pid"], f["process"], f["engine"]) == ("0x7f1234560000", 4242, "python3", "shader")
    assert (f["detail"]["die"], f["detail"]["client_name"], f["detail"]["generation"]) == ("AID0.XCD0", "TCP", "gfx9")


def test_gc12_1_mmhub_status_uses_the_mmhub_4_2_layout():
    # CID 19:11 = 6, RW 20 = 1, PERM 9:5 = 1, VMID 25:22 = 2, MORE_FAULTS = 1; the gfx9-12 layout
    # would read CID 24, RW 0, PERM 2.
    doc = triage(_block("[mmhub0] no-retry page fault (src_id:0 ring:40 vmid:2 pasid:32771)",
                        " Process python3 pid 5151 thread python3 pid 5151",
                        "  in page starting at address 0x0000000012345000 from IH client 18 (VMC)",
                        "MMVM_L2_PROTECTION_FAULT_STATUS_LO32:0x00903021"), "dmesg.txt")
    d = doc["faults"][0]["detail"]
    assert (d["generation"], d["client_id"], d["rw"], d["permission_faults"], d["more_faults"]) == ("gc12.1", 6, 1, 1, 1)


def test_gfx12_0_mmhub_lo32_keeps_the_common_layout():
    doc = triage(_block("[mmhub] page fault (src_id:0 ring:40 vmid:2 pasid:32771)",
                        "  in page starting at address 0x0000000012345000 from client 18",
                        "MMVM_L2_PROTECTION_FAULT_STATUS_LO32:0x00240A31"), "dmesg.txt")
    d = doc["faults"][0]["detail"]
    assert (d["generation"], d["client_id"], d["rw"], d["permission_faults"]) == ("gfx12", 5, 1, 3)


@pytest.mark.parametrize("status, die, name", [
    ("0x00360251", None, "SDMA1"),      # cid 0x101: SDMA1 on MI100, MI200 and MI300 alike
    ("0x00001E30", None, None),         # cid 15: SDMA1 on Vega10 reads, SDMA0 on Vega20: the model decides
    ("0x00000630", "AID0", "MP0"),      # the die cookie says MI300: aldebaran table (cid 3)
])
def test_gfx9_mmhub_client_from_a_raw_status(status, die, name):
    lines = ["[mmhub0] no-retry page fault (src_id:0 ring:158 vmid:3 pasid:32770, for process python3 pid 7 "
             "thread python3 pid 7)", "  in page starting at address 0x0000000012345000 from client 18"]
    if die:
        lines.append(f"  cookie node_id 0 fault from die {die}")
    doc = triage(_block(*lines, f"VM_L2_PROTECTION_FAULT_STATUS:{status}"), "dmesg.txt")
    assert doc["faults"][0]["detail"].get("client_name") == name


def test_xid_without_pid_and_a_chained_xid():
    text = ("[ 4001.000000] NVRM: Xid (PCI:0000:01:00): 13, name=llama-server, Graphics Exception: channel 0x09, "
            "Class 0000c7c0, Offset 00000000, Data 00000000, ErrorCode 00000000\n"
            "[ 4002.000001] NVRM: Xid (PCI:0000:01:00): 45, pid=777, name=python3, Ch 00000010, caused by previous Xid 149\n")
    doc = triage(text, "dmesg.txt")
    x13, x45 = doc["faults"]
    assert (x13["kind"], x13["pid"], x13["process"], x13["detail"]["channel"]) == ("xid-13", None, "llama-server", "09")
    assert (x45["kind"], x45["pid"], x45["detail"]["caused_by"]) == ("xid-45", 777, 149)
    assert "caused by the earlier Xid 149" in x45["detail"]["meaning"]
    assert doc["verdict"]["why"].startswith("the evidence shows a GPU error")


# ---------------- runtime shapes ----------------

def test_rocm7_runtime_lines():
    text = (":0:rocdevice.cpp            :3781: 1322868210220 us:  Memory Fault Error [host: node7, GPU index: 0,\n"
            " faulting addr: 0x7f5c20000000, kernel: void vllm::paged_attention_kernel<float>(float*, int)]\n"
            "Warning: Queue error - HSA_STATUS_ERROR_MEMORY_FAULT\n"
            "Memory exception on virtual address 0x7f5c20000000, node id 3 : Page not present\n"
            "Address does not belong to a known buffer\n"
            "Memory critical error by agent node-0 (Agent handle: 0x55d1c0) on address 0x7f5c21000000. "
            "Reason: Memory in use.\n")
    doc = triage(text)
    got = [(f["kind"], f["address"], f["gpu"]) for f in doc["faults"]]
    assert got == [("memory-access-fault", "0x7f5c20000000", "GPU index 0"), ("queue-error", None, None),
                   ("memory-access-fault", "0x7f5c20000000", "node-3"), ("memory-in-use", "0x7f5c21000000", "node-0")]
    assert doc["faults"][2]["detail"]["buffer"] == "in no known buffer"
    assert "ROCm 7.x" in doc["faults"][1]["detail"]["meaning"]
    # ROCclr's named kernel stays a candidate: it walks every queue
    v = doc["verdict"]
    assert (v["level"], v["candidates"][0]["kernel"]) == ("candidates", "void vllm::paged_attention_kernel<float>(float*, int)")


def test_faulthandler_dump_at_the_end_of_the_file_is_kept():
    text = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. Reason: Page not "
            "present or supervisor privilege.\nFatal Python error: Aborted\n\n"
            "Thread 0x00007f0000000700 (most recent call first):\n  File \"/srv/model.py\", line 88 in forward\n"
            "  File \"/srv/serve.py\", line 12 in step")
    (rp,) = triage(text)["report_points"]
    assert (rp["kind"], rp["frame"], rp["exception"]) == ("fatal-python-error", "/srv/model.py:88 in forward",
                                                          "Fatal Python error: Aborted")


def test_library_lines_rank_below_a_dispatch_and_never_above_it():
    text = ("MIOpen(HIP): Info2 [run] kernel_name = MIOpenBatchNormFwdTrainSpatial, global_work_dim = { 256, 1, 1 }, "
            "local_work_dim = { 256, 1, 1 }\n"
            "WARNING 11-30 10:00:00 Triton kernel JIT compilation during inference: _fwd_kernel\n"
            "[aiter] LoadKernel: fmoe_bf16_kernel hsaco: /x.co\n" + VM + "\n")
    v = triage(text)["verdict"]
    assert v["level"] == "candidates"
    assert [c["kernel"] for c in v["candidates"]] == ["MIOpenBatchNormFwdTrainSpatial", "_fwd_kernel", "fmoe_bf16_kernel"]


def test_hip_illegal_address_without_an_abort_is_a_gpu_error():
    text = ("torch.AcceleratorError: HIP error: an illegal memory access was encountered\n"
            "Search for `hipErrorIllegalAddress' in https://rocm.docs.amd.com/projects/HIP/en/latest/index.html "
            "for more information.\n")
    doc = triage(text)
    assert [f["kind"] for f in doc["faults"]] == ["hip-error"]
    assert doc["verdict"]["why"].startswith("the evidence shows a GPU error")


# ---------------- NVIDIA shapes ----------------

def test_older_sanitizer_report_keeps_kernel_and_allocation():
    text = ("========= Invalid __global__ read of size 4 bytes\n=========     at 0x440 in triton__0d1d2d\n"
            "=========     by thread (0,0,0) in block (0,0,0)\n"
            "=========     Address 0x7f0000000002 is misaligned and is inside the nearest allocation at 0x7f0000000000 "
            "of size 1024 bytes\n=========\n")
    doc = triage(text, "sanitizer.txt")
    (f,) = doc["faults"]
    assert (f["detail"]["kernel"], f["detail"]["offset"], f["detail"]["allocation"], f["detail"]["allocation_size"],
            f["detail"]["allocation_relation"]) == ("triton__0d1d2d", "0x440", "0x7f0000000000", 1024, "inside")
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "triton__0d1d2d")


CORE_SUMMARY = ("(cuda-gdb) target cudacore core.cuda.host.1234\nOpening GPU coredump: core.cuda.host.1234\n\n"
                "CUDA Exception: Warp Out-of-range Address\nThe exception was triggered at PC 0x7fffd2c0f2a0\n"
                "[Current focus set to CUDA kernel 0, grid 3, block (2,0,0), thread (32,0,0), device 0, sm 0, warp 1, "
                "lane 0]\nKernel: triton.0d1d2d<<<(8,1,1),(128,1,1)>>>\n"
                "#0  0x00007fffd2c0f2a0 in triton.0d1d2d<<<(8,1,1),(128,1,1)>>> ()\n")


def test_cuda_gdb_core_summary_names_the_kernel():
    v = triage(CORE_SUMMARY, "core.txt")["verdict"]
    assert (v["level"], v["kernel"]) == ("certain", "triton.0d1d2d")


def test_cuda_gdb_and_sanitizer_spellings_of_a_triton_kernel_are_one_kernel():
    san = ("========= Invalid __global__ read of size 4 bytes\n=========     at 0x440 in triton__0d1d2d\n"
           "=========     Address 0x7f0000000002 is out of bounds\n")
    doc = to_json(build(Inputs(files=[InputFile("core.txt", CORE_SUMMARY.encode()), InputFile("san.txt", san.encode())])))
    v = doc["verdict"]
    assert v["level"] == "certain" and len(v["candidates"]) == 1, v["candidates"]


# ---------------- shapes of real public reports (tests/data/shapes/SOURCES.md) ----------------

SHAPES_DIR = __import__("pathlib").Path(__file__).parent / "data" / "shapes"
REAL_SHAPES = {   # file -> (faults as (kind, address, pid, engine), verdict level, kernel, a detail to check)
    "sanitizer_ci_indented.txt": ([("invalid-global-read", "0x7f3a11e00190", None, "shader")], "certain",
                                  "resize_rows(const unsigned int *, unsigned int *, int, int)",
                                  ("allocation_relation", "after")),
    "sanitizer_old_file_line_func.txt": ([("invalid-global-read", "0x7f20aa81f000", None, "shader")], "certain",
                                         "moe_gate_kernel", ("source", "/srv/app/kernels/moe_gate.py:141")),
    # issue 22's rule: 'out of bounds' inside the allocation the same report names contradicts itself: a candidate
    "sanitizer_inside_expandable.txt": ([("invalid-global-write", "0x7f5510ffff80", None, "shader")], "candidates",
                                        None, ("allocation_relation", "inside")),
    "journal_gfx11_interleaved.txt": ([("page-fault", "0x7f61c2a48000", 38804, "shader")], "unknown", None,
                                      ("ih_client_name", "GFX")),
    "glued_nil_address.txt": ([("memory-access-fault", "0x0", None, None)], "unknown", None,
                              ("reason", "Page not present or supervisor privilege")),
    "title_wrapped_reason.txt": ([("memory-access-fault", "0x7f13c4d05000", None, None)], "unknown", None,
                                 ("reason", "Page not present or supervisor privilege")),
    "xid31_ch_format.txt": ([("xid-31", "0x7f1122334000", 7716, "copy"), ("xid-62", None, None, None),
                             ("xid-45", None, None, None)], "unknown", None, ("engine", "CE2")),
    "xid31_title_no_comma.txt": ([("xid-31", "0x7e0211c4a000", None, "shader")], "unknown", None,
                                 ("access", "ACCESS_TYPE_VIRT_WRITE")),
    "ray_nested_worker_tags.txt": ([("memory-access-fault", "0x7e51a2c00000", 20733, None)], "unknown", None,
                                   ("reason", "Write access to a read-only page")),
    "fault_glued_after_progress_bar.txt": ([("memory-access-fault", "0x7d90c4a08000", None, None)], "unknown", None,
                                           ("reason", "Page not present or supervisor privilege")),
    "comfyui_stamped_traceback.txt": ([("hip-error", None, None, None)], "unknown", None,
                                      ("enum", "hipErrorIllegalAddress")),
    # one rank's watchdog timeout is a hang (likely, no kernel): tests/test_one_rank_watchdog.py
    "collective_watchdog_timeout.txt": ([("collective-timeout", None, None, None)], "likely", None,
                                        ("reason", "ALLREDUCE #8812 waited 600.047 s")),
}


def test_a_collective_timeout_is_a_hang_symptom_not_a_fault():
    doc = to_json(build(collect([str(SHAPES_DIR / "collective_watchdog_timeout.txt")])))
    assert doc["faults"][0]["process"] == "rank 1"
    assert doc["verdict"]["why"].startswith("no GPU exception; hang (likely): one rank's watchdog: rank 1 (its pid is "
                                            "not in the log) waits in collective allreduce #8812 of process group "
                                            "default_pg for 600.047 s")
    steps = " ".join(doc["next_steps"])
    assert "--hang-after" in steps and "rocgdb" not in steps


def test_stamped_traceback_keeps_its_report_point():
    doc = to_json(build(collect([str(SHAPES_DIR / "comfyui_stamped_traceback.txt")])))
    (rp,) = doc["report_points"]
    assert (rp["frame"], rp["exception"]) == ("/srv/app/nodes/sampler.py:512 in sample", "torch.AcceleratorError: HIP "
                                             "error: an illegal memory access was encountered")


def test_every_shape_file_has_expected_values():
    assert {p.name for p in SHAPES_DIR.glob("*.txt")} == set(REAL_SHAPES)


@pytest.mark.parametrize("name", sorted(REAL_SHAPES))
def test_real_report_shapes(name):
    faults, level, kernel, (key, value) = REAL_SHAPES[name]
    doc = to_json(build(collect([str(SHAPES_DIR / name)])))
    assert [(f["kind"], f["address"], f["pid"], f["engine"]) for f in doc["faults"]] == faults
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == (level, kernel)
    assert doc["faults"][0]["detail"][key] == value
    assert not [p for p in doc["problems"] if "cut before its Reason" in p]


def test_a_programs_own_error_print_is_a_gpu_error_of_either_runtime():
    doc = triage("step 3\nsync: operation not supported on global/shared address space (717)\n")
    assert [(f["kind"], f["detail"]["text"]) for f in doc["faults"]] == [
        ("gpu-runtime-error", "operation not supported on global/shared address space (717)")]
    steps = " ".join(doc["next_steps"])
    assert "compute-sanitizer" in steps and "rocgdb" in steps       # the text does not say which runtime
