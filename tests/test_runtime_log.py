"""Runtime-log parser: own fixtures in the real formats, then every corpus file."""

import pytest

from faultkit.ingest.runtime_log import parse_runtime_log

from .conftest import corpus_bytes


def parse(text):
    return parse_runtime_log(text.encode(), "t.log")


def test_vm_fault_current_format_with_worker_prefix_and_progress_bar():
    r = parse(" 33%|█████Memory access fault by GPU node-3 (Agent handle: 0x5a5c587a51c0) on address "
              "0x709843600000. Reason: Write access to a read-only page.:54:01, 26.24s/it]\n"
              "(Worker_TP3_EP3 pid=891) Memory access fault by GPU node-12 (Agent handle: 0x13e852f0) on address "
              "0x77d445e00000. Reason: Unknown.\n")
    a, b = r.faults
    assert (a.kind, a.node, a.address, a.reason) == ("vm-fault", 3, 0x709843600000, "Write access to a read-only page")
    assert (b.node, b.address, b.reason, b.pid, b.process_tag) == (12, 0x77d445e00000, "Unknown", 891, "Worker_TP3_EP3 pid=891")


def test_vm_fault_old_format_nil_and_imprecise():
    r = parse("Memory access fault by GPU node-1 on address (nil)(may not be exact address). Reason: Unknown.\n")
    f = r.faults[0]
    assert f.address == 0 and f.imprecise and f.agent_handle is None and f.reason == "Unknown"


@pytest.mark.parametrize("tail", ["", " (Agent handle: 0x55d0f2", " (Agent handle: 0x55d0f2a3c4b0) on addr",
                                  " on address 0x7f3a1"])
def test_vm_fault_line_cut_before_its_address_is_still_a_fault(tail):
    """The process died mid-write (or the paste stops): the GPU node is evidence, the address is not."""
    r = parse(f"(TP1 pid=77) Memory access fault by GPU node-4{tail}")
    (f,) = r.faults
    assert (f.kind, f.node, f.address, f.reason, f.pid) == ("vm-fault", 4, None, None, 77)
    assert any("cut before its address" in p.message for p in r.problems)


def test_text_after_the_head_that_is_not_the_line_is_no_fault():
    assert not parse("Memory access fault by GPU node-4 is what we saw yesterday\n").faults


@pytest.mark.parametrize("reason", ["Page not present or supervisor privilege", "Write access to a read-only page",
                                    "Execute access to a page marked NX", "Host access only", "DRAM ECC failure",
                                    "SRAM ECC failure", "Generic hang recovery"])
def test_every_vm_fault_reason(reason):
    r = parse(f"Memory access fault by GPU node-2 (Agent handle: 0x1) on address 0x7f0000001000. Reason: {reason}.\n")
    assert r.faults[0].reason == reason


def test_hw_exception_both_causes():
    r = parse("HW Exception by GPU node-1 (Agent handle: 0x1b0fc990) reason :GPU Hang\n"
              "HW Exception by GPU node-2 (Agent handle: 0x2b0fc990) reason :ECC\n")
    assert [(f.kind, f.node, f.reason) for f in r.faults] == [("hw-exception", 1, "GPU Hang"), ("hw-exception", 2, "ECC")]


@pytest.mark.parametrize("line,code,pid,queue", [
    (":0:rocdevice.cpp            :2303: 609892899575 us: Device::callbackQueue aborting with status: 0x1016",
     0x1016, None, None),
    (":0:rocdevice.cpp            :2614: 281102691423 us: 54282: [tid:0x7ff1f9c47700] Device::callbackQueue aborting "
     "with error : HSA_STATUS_ERROR_MEMORY_FAULT: Agent attempted to access an inaccessible address. code: 0x2b",
     0x2b, 54282, None),
    (":0:rocdevice.cpp            :2893: 90021033577 us: [pid:192145 tid:0x76fa7d3ff640] Callback: Queue "
     "0x76f676200000 aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware "
     "exception. code: 0x1016", 0x1016, 192145, "0x76f676200000"),
    (":0:rocdevice.cpp            :3586: 0012345678 us:  Callback: Queue 0x7f78cb400000 aborting with error : "
     "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest legal "
     "address. code: 0x29", 0x29, None, "0x7f78cb400000"),
    ("Device::callbackQueue aborting with error : HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION:  The agent attempted to "
     "execute an illegal shader instruction. code: 0x2a", 0x2a, None, None),
])
def test_queue_callback_generations(line, code, pid, queue):
    f = parse(line + "\n").faults[0]
    assert (f.kind, f.code, f.pid, f.queue) == ("queue-callback", code, pid, queue)


def test_queue_callback_2026_suffix_names_kernel_and_gpu():
    f = parse(":0:rocdevice.cpp            :3781: 1322868210220 us:  Callback: Queue 0x7f4580c00000 aborting with "
              "error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016 "
              "[host: n1, GPU index: 2, kernel: void foo<int>(int*)]\n").faults[0]
    assert (f.code, f.gpu_index, f.host, f.kernel) == (0x1016, 2, "n1", "void foo<int>(int*)")


def test_wrapped_callback_line_is_joined():
    f = parse(":0:rocdevice.cpp :3587: <ts>: Callback: Queue 0x<...> aborting with error :\n"
              "  HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016\n").faults[0]
    assert f.code == 0x1016 and f.status == "HSA_STATUS_ERROR_EXCEPTION"


def test_cut_callback_line_keeps_status_and_reports_problem():
    r = parse("Callback: Queue 0x7f4580c00000 aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL op")
    assert r.faults[0].status == "HSA_STATUS_ERROR_EXCEPTION" and r.faults[0].code == 0x1016
    assert r.problems


def test_memory_fault_error_wrapped_bracket():
    r = parse("9: :0:rocdevice.cpp            :3781: 1 us:  Memory Fault Error [host: h, GPU index: 0, faulting addr: 0x0,\n"
              "kernel: void k<512u, float>(int, float const*,\n"
              "float*)]\n")
    f = r.faults[0]
    assert (f.kind, f.gpu_index, f.address, f.kernel) == ("memory-fault-error", 0, 0, "void k<512u, float>(int, float const*, float*)")


def test_memory_fault_error_not_identified_has_no_kernel():
    f = parse("Memory Fault Error [GPU index: 1, faulting addr: 0x7f0000000000, kernel: <not identified>]\n").faults[0]
    assert f.kernel is None and f.address == 0x7f0000000000


def test_dispatch_log_level3_and_4():
    r = parse(":3:rocvirtual.cpp           :3016: 301282651089 us: [pid:145 tid:0x7f] ShaderName : _Z11crux_kernelv\n"
              ":4:rocvirtual.cpp           :888 : 0893897953 us: [pid:145   tid:0x7f] HWq=0x7f5c16600000, Dispatch Header "
              "= 0xb02 (type=2, barrier=1, acquire=1, release=1), setup=3, grid=[16384, 1, 1], workgroup=[256, 1, 1], "
              "private_seg_size=0, group_seg_size=0, kernel_obj=0x7f5c101260c0, kernarg_address=0x7f5c15603200, "
              "completion_signal=0x0\n")
    shader, packet = r.dispatches
    assert shader.kernel == "_Z11crux_kernelv" and shader.pid == 145
    assert (packet.kernel, packet.hw_queue, packet.grid, packet.workgroup, packet.kernel_obj) == (
        "_Z11crux_kernelv", "0x7f5c16600000", (16384, 1, 1), (256, 1, 1), "0x7f5c101260c0")


def test_hang_analysis_block():
    r = parse("Kernel Name: _Z3fooPi\nVGPU=0x1 SWq=0x2, HWq=0x3, id=4\n\tDispatch Header =0xb02 (type=2, barrier=1, "
              "acquire=1, release=1), setup=0\n\tgrid=[1024, 1, 1], workgroup=[256, 1, 1]\n\tprivate_seg_size=112, "
              "group_seg_size=4132\n\tkernel_obj=0x14975d422dc0, kernarg_address=0x0x14976ef4bd80\n\t"
              "completion_signal=0x0, correlation_id=7\n\trptr=931, wptr=959\nnext line\n")
    d = r.dispatches[0]
    assert (d.source, d.kernel, d.hw_queue, d.grid, d.kernel_obj, d.correlation_id, d.rptr, d.wptr) == (
        "hang-analysis", "_Z3fooPi", "0x3", (1024, 1, 1), "0x14975d422dc0", 7, 931, 959)


def test_debug_agent_v2_block_with_disassembly():
    text = """Queue error (HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception.)
wave_3: pc=0x7fd4f100d0e8 (kernel_code_entry=0x7fd4f100d000 <vadd(int*)>) (stopped, reason: ASSERT_TRAP)

scalar registers:
        s0: f520c000            s1: 00007fd5

Disassembly for function vadd(int*):
    code object: file:///tmp/a.out#offset=14309&size=31336
    loaded at: [0x7fd4f100c000-0x7fd4f100e070]

/src/vadd.cpp:
53          __builtin_trap ();
    0x7fd4f100d0e4 <+228>:    s_mov_b64 s[0:1], s[6:7]
=>  0x7fd4f100d0e8 <+232>:    s_trap 2
    0x7fd4f100d0ec <+236>:    s_endpgm

End of disassembly.
"""
    r = parse(text)
    w = r.waves[0]
    assert (w.generation, w.wave, w.pc, w.kernel, w.reasons) == ("v2-kernel-entry", 3, 0x7fd4f100d0e8, "vadd(int*)", ["ASSERT_TRAP"])
    assert w.marked_pc == 0x7fd4f100d0e8 and w.code_object.startswith("file:///tmp/a.out#offset=")
    assert w.loaded_at == (0x7fd4f100c000, 0x7fd4f100e070)
    assert any("s_trap 2" in x for x in w.disassembly) and w.source_lines
    assert r.faults[0].code == 0x1016


def test_debug_agent_2026_header_with_kernargs_and_running_wave():
    r = parse("wave_1: pc=0x10 (kernel_code_entry=0x20 <k>, kernargs=0x30) (stopped, reason: MEMORY_VIOLATION|TRAP)\n"
              "wave_2: pc=0x14 (kernel_code_entry=not available) (running)\n")
    a, b = r.waves
    assert (a.generation, a.kernargs, a.reasons) == ("v2-kernargs", 0x30, ["MEMORY_VIOLATION", "TRAP"])
    assert b.running and b.reasons == []


def test_debug_agent_v1():
    r = parse("[rocr debug agent]: \nMemory access fault at GPU Node: 2\nAddress: 0x12345xxx (page not present;)\n"
              "\n4 wavefront(s) found in @PC: 0x00007F36D440A844\n   EXEC: 0x00000000FFFFFFFF\n")
    assert r.faults[0].address == 0x12345000 and r.faults[0].node == 2
    assert r.waves[0].pc == 0x7F36D440A844 and r.waves[0].waves_at_pc == 4 and r.waves[0].exec_mask == "00000000FFFFFFFF"


def test_pytorch_error_enum_and_traceback_report_point():
    r = parse("Process SpawnProcess-2:\nTraceback (most recent call last):\n"
              '  File "/x/mp.py", line 23, in worker\n    torch.cuda.synchronize()\n'
              "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
              "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/ for more information.\n")
    e = r.host_errors[0]
    assert (e.api, e.text, e.exception, e.enum) == ("CUDA", "an illegal memory access was encountered",
                                                    "torch.AcceleratorError", "cudaErrorIllegalAddress")
    rp = r.report_points[0]
    assert rp.frame == "/x/mp.py:23 in worker" and rp.process_tag == "SpawnProcess-2"
    assert rp.exception.startswith("torch.AcceleratorError")


def test_faulthandler_dump_gives_current_thread_frame():
    r = parse('Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n'
              '  File "/s/scheduler.py", line 987 in event_loop\n  File "/s/x.py", line 2 in run\n\nKilled\n')
    rp = r.report_points[0]
    assert rp.kind == "fatal-python-error" and rp.frame == "/s/scheduler.py:987 in event_loop"


def test_hints_core_dump_offload_and_hsakmt():
    r = parse(" INFO - MIOpen(HIP): Info2 [PrepareInvoker] Preparing kernel: MIOpenCvBwdWrW_rdc\n"
              "[aiter] LoadKernel: _ZN5aiter3fooE hsaco: /x.co\n"
              "GPU core dump created: gpucore.574720\n"
              "OFFLOAD ERROR: memory access fault by GPU 4 (agent 0x55555896f810) at virtual address 0x7ffb61f02000. "
              "Reasons: Write access to a read-only page\n"
              "Memory exception on virtual address 0x7f0000001000, node id 2 : Page not present\n")
    assert [h.kernel for h in r.hints] == ["MIOpenCvBwdWrW_rdc", "_ZN5aiter3fooE"]
    assert any(n.kind == "gpu-core-dump" and n.fields["file"] == "gpucore.574720" for n in r.notes)
    assert r.faults[0].kind == "offload-fault" and r.faults[0].address == 0x7ffb61f02000
    hsakmt = r.faults[1]
    assert (hsakmt.kind, hsakmt.address, hsakmt.node, hsakmt.reason) == ("hsakmt-fault", 0x7f0000001000, 2, "Page not present")


def test_non_utf8_input_is_reported_and_parsed():
    data = b"\xff\xfe garbage\nMemory access fault by GPU node-1 (Agent handle: 0x1) on address 0x1000. Reason: Unknown.\n"
    r = parse_runtime_log(data, "bad.log")
    assert r.faults[0].address == 0x1000
    assert any("UTF-8" in p.message for p in r.problems)


# ---------------- the shared corpus ----------------



# file -> what it must yield: (kind, node, address, reason/code)
EXPECTED_RUNTIME = {
    "vmfault_rocm2.0_rx580_rocm_issue_664.txt": ("vm-fault", 1, 0x501006000, "Page not present or supervisor privilege"),
    "vmfault_rocm1.6_no_agent_handle_imprecise_rocm_issue_195.txt": ("vm-fault", 1, 0, "Unknown"),
    "vmfault_unknown_gfx950_aiter_vllm_issue_43605.txt": ("vm-fault", 3, 0x77d445e00000, "Unknown"),
    "vmfault_miopen_kernel_hint_miopen_issue_579.txt": ("vm-fault", 7, 0x7f8d61545000, "Page not present or supervisor privilege"),
    "rocr_debugbuild_nearby_memory_map_rocm-libraries_issue_6166.txt": ("vm-fault", 1, 0x7f06e865a000, "Page not present or supervisor privilege"),
    "debug_agent_v2_mfc_fixture_rocm631.txt": ("vm-fault", 4, 0x7ffb6a0f6000, "Write access to a read-only page"),
    "hsa_0x1016_iree_issue_17872.txt": ("queue-callback", None, None, 0x1016),
    "hsa_0x1016_rocm_issue_6023.txt": ("queue-callback", None, None, 0x1016),
    "hsa_0x1016_rocm_issue_6245_redacted.txt": ("queue-callback", None, None, 0x1016),
    "hsa_0x1016_vllm_issue_20007_title.txt": ("queue-callback", None, None, 0x1016),
    "hsa_0x29_aperture_janusminer_issue_10.txt": ("queue-callback", None, None, 0x29),
    "hsa_0x29_aperture_rocm_issue_2153.txt": ("queue-callback", None, None, 0x29),
    "hsa_0x2a_illegal_instruction_hip_issue_2344.txt": ("queue-callback", None, None, 0x2a),
    "hsa_0x2b_memfault_crusher_rocm5.1.txt": ("queue-callback", None, None, 0x2b),
    "hsa_status_0x100f_rocm_issue_1393.txt": ("queue-callback", None, None, 0x100f),
    "hsa_status_0x1016_rocm_issue_1441.txt": ("queue-callback", None, None, 0x1016),
    "hsa_status_0x29_rocm4.0_rocm_issue_1366.txt": ("queue-callback", None, None, 0x29),
    "hw_exception_gpu_hang_gfx1103_rocm_sdk_builder_issue_141.txt": ("hw-exception", 1, None, "GPU Hang"),
    "hw_exception_gpu_hang_r9700_raylight_issue_102.txt": ("hw-exception", 1, None, "GPU Hang"),
    "hw_exception_gpu_hang_w7900_rocm6.4.3_rocm_issue_6137.txt": ("hw-exception", 1, None, "GPU Hang"),
    "memory_fault_error_kernel_name_therock_issue_6472.txt": ("memory-fault-error", None, 0, None),
    "debug_agent_v2_mfc_fixture_rocm720_offload.txt": ("offload-fault", 4, 0x7ffb61f02000, "Write access to a read-only page"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_RUNTIME))
def test_runtime_corpus_fault_records(corpus, name):
    kind, node, address, reason_or_code = EXPECTED_RUNTIME[name]
    r = parse_runtime_log(corpus_bytes(corpus / "runtime" / name), name)
    match = [f for f in r.faults if f.kind == kind]
    assert match, f"{name}: no {kind} record"
    f = match[0]
    assert f.node == node and f.address == address
    if isinstance(reason_or_code, int):
        assert f.code == reason_or_code
    elif reason_or_code is not None:
        assert f.reason == reason_or_code


def test_runtime_corpus_kernel_names(corpus):
    r = parse_runtime_log(corpus_bytes(corpus / "runtime" / "memory_fault_error_kernel_name_therock_issue_6472.txt"))
    assert r.faults[0].kernel.startswith("void rocsparse::csr2hyb_kernel<512u, float>(")
    r = parse_runtime_log(corpus_bytes(corpus / "runtime" / "debug_agent_v2_mfc_fixture_rocm720_offload.txt"))
    assert {w.kernel for w in r.waves} == {"__omp_offloading_8116438_1c00689b__QMm_time_steppersPs_tvd_rk_l486"}
    assert [w.wave for w in r.waves] == [249, 250]
    r = parse_runtime_log(corpus_bytes(corpus / "runtime" / "debug_agent_v2_assert_trap_docs_sample.txt"))
    assert r.waves[0].kernel == "vector_add_assert_trap(int*, int*, int*)" and r.waves[0].marked_pc == 0x7fd4f100d0e8
    r = parse_runtime_log(corpus_bytes(corpus / "runtime" / "hang_analysis_kernel_name_cmssw_issue_50607.txt"))
    named = [d for d in r.dispatches if d.kernel]
    assert named[0].kernel.startswith("_ZN6alpaka6detail9gpuKernel") and (named[0].rptr, named[0].wptr) == (155, 442)


def test_runtime_corpus_glued_lines_in_dmesg_folder(corpus):
    for name, addr in [("rocr_memory_access_fault_mi300x_rocm_issue_4021.txt", 0x709843600000),
                       ("rocr_memory_access_fault_stderr_7900xtx_rocm_issue_3452.txt", 0x7f9587e00000),
                       ("rocr_memory_access_fault_core_dump_680m_rocm_issue_5225.txt", 0x7a6eedb80000)]:
        r = parse_runtime_log(corpus_bytes(corpus / "dmesg" / name), name)
        assert r.faults[0].address == addr, name


def test_cuda_corpus_host_errors(corpus):
    r = parse_runtime_log(corpus_bytes(corpus / "cuda" / "h200_mp_plain.txt"))
    assert r.host_errors[0].enum == "cudaErrorIllegalAddress"
    assert r.report_points[0].frame.endswith("in worker") and r.report_points[0].process_tag == "SpawnProcess-2"


def _aql(us: int, hwq: str, kobj: str) -> str:
    return (f":4:rocvirtual.cpp           :888 : {us} us: [pid:145   tid:0x7f] HWq={hwq}, Dispatch Header "
            "= 0xb02 (type=2, barrier=1, acquire=1, release=1), setup=3, grid=[16384, 1, 1], workgroup=[256, 1, 1], "
            f"private_seg_size=0, group_seg_size=0, kernel_obj={kobj}, kernarg_address=0x7f5c15603200, "
            "completion_signal=0x0\n")


def test_queue_states_of_the_abort_analysis():
    r = parse("VGPU(0x55d0a0) Queue(0x7f5c16600000) is idle\n"
              "VGPU(0x55d0a0) Queue(0x7f5c16700000) rptr=12, wptr=14. A barrier packet in the queue!\n"
              "VGPU(0x55d0a0) Queue(0x7f5c16800000). Couldn't find kernel\n"
              "VGPU(0x55d0a0) Queue(0x7f5c16900000). Couldn't find the hang AQL packet!\n")
    states = [(n.fields["queue"], n.fields["state"], n.fields["rptr"]) for n in r.notes if n.kind == "queue-state"]
    assert states == [("0x7f5c16600000", "idle", None), ("0x7f5c16700000", "barrier", 12),
                      ("0x7f5c16800000", "no-kernel", None), ("0x7f5c16900000", "no-hang-packet", None)]


def test_an_idle_queue_at_the_abort_rules_out_its_last_dispatch(tmp_path):
    """The last logged dispatch ran on a queue ROCclr then found idle: it had completed, so the
    suspect is the last dispatch on a queue that still held work."""
    from faultkit.triage import triage
    log = tmp_path / "server.log"
    log.write_text(_aql(100, "0x7f5c16700000", "0x7f5c10000100") + _aql(200, "0x7f5c16600000", "0x7f5c10000200")
                   + "Memory access fault by GPU node-2 (Agent handle: 0x1) on address 0x7f0000001000. "
                     "Reason: Page not present or supervisor privilege.\n"
                   + "VGPU(0x55d0a0) Queue(0x7f5c16600000) is idle\n")
    v = triage([str(log)]).verdict
    assert v.candidates[0].kernel == "kernel_obj=0x7f5c10000100"
    assert "ROCclr found that queue idle" in v.candidates[0].why
    assert all("0x7f5c10000200" not in (c.kernel or "") for c in v.candidates)


def test_the_report_lists_each_queue_as_rocclr_saw_it_at_the_abort(tmp_path):
    from faultkit.export.report import render_markdown, to_json
    from faultkit.triage import triage
    log = tmp_path / "server.log"
    log.write_text("Kernel Name: _Z3fooPi\nVGPU=0x1 SWq=0x2, HWq=0x3, id=4\n\tgrid=[1024, 1, 1], workgroup=[256, 1, 1]\n"
                   "\trptr=931, wptr=959\nVGPU(0x1) Queue(0x5) is idle\n"
                   "VGPU(0x1) Queue(0x6) rptr=3, wptr=4. A barrier packet in the queue!\n")
    inc = triage([str(log)])
    assert [(q["queue"], q["state"], q["kernel"], q["rptr"]) for q in to_json(inc)["queue_analysis"]] == [
        ("0x3", "packet", "_Z3fooPi", 931), ("0x5", "idle", None, None), ("0x6", "barrier", None, 3)]
    md = render_markdown(inc)
    assert "## ROCclr's queue analysis at the abort" in md
    assert "queue 0x5: idle: every packet done, so not the queue that faulted" in md
    assert "queue 0x3: the packet at its read pointer (in flight when rptr < wptr): `foo(int*)` (rptr=931, wptr=959)" in md
