"""Kernel-log parser: own fixtures per generation and timestamp style, then every corpus file."""

import pytest

from faultkit.ingest.kernel_log import parse_kernel_log

from .conftest import corpus_bytes, no_internal_errors

GMC9_610 = """\
[ 4778.915423] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)
[ 4778.916081] amdgpu 0000:c6:00.0: amdgpu:  for process pt_main_thread pid 12924 thread pt_main_thread pid 12925)
[ 4778.916571] amdgpu 0000:c6:00.0: amdgpu:   in page starting at address 0x0000ae8570611000 from IH client 0x1b (UTCL2)
[ 4778.916600] amdgpu 0000:c6:00.0: amdgpu:   cookie node_id 1 fault from die AID0.XCD1
[ 4778.917054] amdgpu 0000:c6:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031
[ 4778.917532] amdgpu 0000:c6:00.0: amdgpu: \t Faulty UTCL2 client ID: TCP (0x8)
[ 4778.918012] amdgpu 0000:c6:00.0: amdgpu: \t MORE_FAULTS: 0x1
[ 4778.918491] amdgpu 0000:c6:00.0: amdgpu: \t WALKER_ERROR: 0x0
[ 4778.918961] amdgpu 0000:c6:00.0: amdgpu: \t PERMISSION_FAULTS: 0x3
[ 4778.919424] amdgpu 0000:c6:00.0: amdgpu: \t MAPPING_ERROR: 0x0
[ 4778.919900] amdgpu 0000:c6:00.0: amdgpu: \t RW: 0x0
"""


def test_gmc_v9_610_block_decoded():
    k = parse_kernel_log(GMC9_610.replace("\\t", "\t"), "d.txt")
    f = k.faults[0]
    assert (f.hub, f.retry, f.vmid, f.pasid, f.process, f.pid, f.tid) == ("gfxhub0", False, 3, 32769, "pt_main_thread", 12924, 12925)
    assert (f.address, f.ih_client, f.ih_client_name, f.die) == (0xae8570611000, 0x1b, "UTCL2", "AID0.XCD1")
    assert (f.status, f.client_name, f.client_id, f.rw, f.permission_faults, f.more_faults) == (0x00301031, "TCP", 8, 0, 3, 1)
    assert f.generation == "gfx9" and f.stamp.clock == "monotonic" and f.stamp.seconds == 4778.915423
    assert k.timestamp_style == "dmesg"


def test_status_decoded_without_sub_lines_uses_generation_table():
    k = parse_kernel_log("[ 1.0] amdgpu 0000:01:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:8 "
                         "pasid:32770, for process p pid 1 thread p pid 1)\n"
                         "[ 1.0] amdgpu 0000:01:00.0: amdgpu:   in page starting at address 0x0000000000001000 from client 27\n"
                         "[ 1.0] amdgpu 0000:01:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00841051\n")
    f = k.faults[0]
    assert (f.client_id, f.client_name, f.rw, f.vmid) == (8, "TCP", 1, 8)


def test_mi300_mmhub_sdma_write():
    k = parse_kernel_log("[19277.975569] amdgpu 0000:3d:00.0: amdgpu: [mmhub0] no-retry page fault (src_id:0 ring:160 vmid:3 pasid:32790)\n"
                         "[19277.975611] amdgpu 0000:3d:00.0: amdgpu:  for process python3.12 pid 6071 thread python3.12 pid 6071)\n"
                         "[19277.975625] amdgpu 0000:3d:00.0: amdgpu:   in page starting at address 0x0000709843600000 from IH client 0x12 (VMC)\n"
                         "[19277.975655] amdgpu 0000:3d:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00360251\n")
    f = k.faults[0]
    assert (f.client_id, f.client_name, f.rw, f.permission_faults) == (0x101, "SDMA1", 1, 5)


def test_gmc_v11_decimal_client_and_in_process_line_dmesg_T():
    k = parse_kernel_log("[Tue Jul 23 13:49:25 2024] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32783)\n"
                         "[Tue Jul 23 13:49:25 2024] amdgpu 0000:03:00.0: amdgpu:  in process python pid 25698 thread python pid 25698)\n"
                         "[Tue Jul 23 13:49:25 2024] amdgpu 0000:03:00.0: amdgpu:   in page starting at address 0x00007f9587e00000 from client 10\n"
                         "[Tue Jul 23 13:49:25 2024] amdgpu 0000:03:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00801031\n")
    f = k.faults[0]
    assert (f.generation, f.ih_client, f.ih_client_name, f.client_name, f.pid) == ("gfx11", 10, "GFX", "TCP", 25698)
    assert f.stamp.wall == "2024-07-23T13:49:25" and k.timestamp_style == "dmesg -T"


def test_gmc_v8_block_and_relative_stamps():
    k = parse_kernel_log("[Apr10 21:21] gmc_v8_0_process_interrupt: 2 callbacks suppressed\n"
                         "[  +0.000006] amdgpu 0000:20:00.0: GPU fault detected: 147 0x00004801 for process  pid 0 thread  pid 0\n"
                         "[  +0.000005] amdgpu 0000:20:00.0:   VM_CONTEXT1_PROTECTION_FAULT_ADDR   0x00508400\n"
                         "[  +0.000002] amdgpu 0000:20:00.0:   VM_CONTEXT1_PROTECTION_FAULT_STATUS 0x12048001\n"
                         "[  +0,000002] amdgpu 0000:20:00.0: VM fault (0x01, vmid 9, pasid 32780) at page 5276672, write from 'TC6' (0x54433600) (136)\n")
    f = k.faults[0]
    assert (f.generation, f.address, f.vmid, f.pasid, f.rw, f.client_name) == ("gfx8", 0x508400000, 9, 32780, 1, "TC6")
    assert f.stamp.clock == "relative" and abs(f.stamp.seconds - 0.000006) < 1e-9
    assert k.events[0].kind == "callbacks-suppressed" and k.events[0].fields["count"] == 2


def test_oldest_gmc_v9_format_freebsd():
    k = parse_kernel_log("drmn0: [mmhub] VMC page fault (src_id:0 ring:153 vm_id:0 pas_id:0)\n"
                         "drmn0:   at page 0x00005b7199707000 from 18\n")
    f = k.faults[0]
    assert (f.pci, f.hub, f.vmid, f.address, f.ih_client, f.generation) == ("drmn0", "mmhub", 0, 0x5b7199707000, 18, "gfx9")


def test_new_process_line_attaches_to_ring_timeout():
    k = parse_kernel_log("[  312.5] amdgpu 0000:28:00.0: ring gfx_0.0.0 timeout, signaled seq=57638, emitted seq=57641\n"
                         "[  312.5] amdgpu 0000:28:00.0:  Process cosmic-comp pid 2288 thread cosmic-com:cs0 pid 2316\n"
                         "[  312.7] amdgpu 0000:28:00.0: GPU reset begin!. Source:  1\n"
                         "[  312.9] amdgpu 0000:28:00.0: BACO reset\n"
                         "[  316.0] amdgpu 0000:28:00.0: VRAM is lost due to GPU reset!\n")
    timeout, reset, method, lost = k.events
    assert timeout.fields["pid"] == 2288 and timeout.fields["in_flight"] == 3 and timeout.fields["ring"] == "gfx_0.0.0"
    assert reset.fields["source"] == 1 and "job timeout" in reset.fields["source_meaning"]
    assert method.fields["method"] == "BACO reset" and lost.kind == "vram-lost"


def test_old_drm_error_timeout_with_process_information_and_mes():
    k = parse_kernel_log("[ 3578.0] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma1 timeout, signaled seq=11391, emitted seq=11393\n"
                         "[ 3578.1] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* Process information: process  pid 0 thread  pid 0\n"
                         "[ 3578.2] [drm:mes_v11_0_submit_pkt_and_poll_completion.constprop.0 [amdgpu]] *ERROR* MES failed to response msg=3\n")
    timeout, mes = k.events
    assert timeout.fields["pid"] == 0 and mes.fields["message"] == "REMOVE_QUEUE"


def test_journal_reverse_order_is_detected_and_read_forward():
    text = ("Aug 22 20:26:07 h kernel: amdgpu 0000:0d:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00701031\n"
            "Aug 22 20:26:07 h kernel: amdgpu 0000:0d:00.0: amdgpu:   in page starting at address 0x0000800505606000 from client 0x1b (UTCL2)\n"
            "Aug 22 20:26:07 h kernel: amdgpu 0000:0d:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:3 pasid:32882, for process a pid 1 thread 00 MAIN pid 2)\n"
            "Aug 22 20:26:06 h sudo[3]: something else\n")
    k = parse_kernel_log(text)
    assert k.reversed_input
    f = k.faults[0]
    assert (f.address, f.status, f.thread, f.tid, f.client_name) == (0x800505606000, 0x00701031, "00 MAIN", 2, "TCP")


def test_iso_and_journal_locale_stamps():
    k = parse_kernel_log("2025-08-10T19:55:33.635860+01:00 host kernel: amdgpu 0000:c1:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE\n"
                         "kvě 25 19:29:48 bc250 kernel: amdgpu 0000:01:00.0: ring sdma0 timeout, signaled seq=309, emitted seq=313\n")
    mes, timeout = k.events
    assert mes.stamp.wall == "2025-08-10T19:55:33.635860+01:00" and mes.fields["message"] == "REMOVE_QUEUE"
    assert timeout.stamp.raw == "kvě 25 19:29:48" and "locale" in timeout.stamp.wall_note


def test_all_zero_status_is_secondary_and_client_not_trusted():
    k = parse_kernel_log("[1.0] amdgpu 0000:06:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:56 vmid:6 pasid:32784, for process cs2 pid 1 thread V pid 2)\n"
                         "[1.0] amdgpu 0000:06:00.0: amdgpu:   in page starting at address 0x000080012ae97000 from IH client 0x1b (UTCL2)\n"
                         "[1.0] amdgpu 0000:06:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00000000\n"
                         "[1.0] amdgpu 0000:06:00.0: amdgpu: \tFaulty UTCL2 client ID: CB (0x0)\n")
    f = k.faults[0]
    assert f.secondary and f.client_name is None


def test_nvidia_xid_lines():
    k = parse_kernel_log("[   38.591266] NVRM: Xid (PCI:0000:00:06): 31, pid=581, name=python3, channel 0x0000000a, intr 00000000. "
                         "MMU Fault: ENGINE GRAPHICS GPC0 GPCCLIENT_T1_12 faulted @ 0x838c_74800000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n"
                         "[   62.911216] NVRM: Xid (PCI:0000:00:06): 13, Graphics SM Warp Exception on (GPC 6, TPC 2, SM 0): MMU Fault\n"
                         "[   28.963062] NVRM: Xid (PCI:0000:00:06): 43, pid=570, name=oob, channel 0x0000000a\n"
                         "[   64.0] NVRM: Xid (PCI:0000:00:06): 31, pid=694, name=python3, channel 0x0000000a, intr 00000000. MMU Fault: "
                         "ENGINE GRAPHICS GPC6 UNRECOGNIZED_CLIENT faulted @ 0x1825a4_00015fe0. Fault is of type UNRECOGNIZED_FAULT UNRECOGNIZED_ACCESS_TYPE\n")
    x31, x13, x43, bad = k.xids
    assert (x31.xid, x31.pid, x31.process, x31.address, x31.fault_type, x31.access) == (
        31, 581, "python3", 0x838c74800000, "FAULT_PDE", "ACCESS_TYPE_VIRT_READ")
    assert x13.location == "GPC 6, TPC 2, SM 0" and x13.exception == "MMU Fault"
    assert (x43.pid, x43.process) == (570, "oob")
    assert not bad.trusted and bad.pid == 694


def test_garbage_and_cut_lines_do_not_raise():
    k = parse_kernel_log(b"\x00\xff[  12.3] amdgpu 0000:01:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ri\n"
                         b"[  12.3] amdgpu 0000:01:00.0: amdgpu: \t RW: 0x1\n[ 1", "cut.txt")
    no_internal_errors(k.problems)
    # line 1 begins with \x00\xff (not UTF-8) and the fault's block is cut after its first line
    assert k.problems and all(p.file == "cut.txt" for p in k.problems)


# ---------------- the shared corpus ----------------



# file -> (page addresses that must be found, client names that must be found)
EXPECTED_FAULTS = {
    "gfx1035_680m_gfxhub_pagefault_in_process_rocm_issue_5225.txt": ({0x7a6e20839000}, {"TCP"}),
    "gfx10_gcvm_inline_task_wezterm_rocm_amdgpu_issue_168.txt": ({0x800505606000}, {"TCP"}),
    "gfx10_pagefault_callbacks_suppressed_rocm_issue_2804.txt": ({0x7f5279bab000}, set()),
    "gfx10_reverse_journal_scrubbed_host_thread_with_space_proton_issue_5030.txt": ({0x80016425b000, 0x80016425c000}, set()),
    "gfx1100_7900xtx_in_process_variant_dmesg_T_rocm_issue_3452.txt": ({0x7f9587e00000}, {"TCP"}),
    "gfx1100_7900xtx_sdma_pagefault_mes_msg2_rocm_issue_2205.txt": ({0x7f0000002000}, {"SDMA0", "SDMA1"}),
    "gfx1102_vmid0_kernel_cpc_fault_rocm_issue_2766.txt": ({0xe8601000}, {"CPC"}),
    "gfx1150_pagefault_process_line_therock_issue_1271.txt": ({0x7f5e85f94000, 0x7f5e85f72000}, {"TCP"}),
    "gfx1150_strix_fault_ring_reset_wedged_cosmic_comp_issue_1953.txt": ({0x800112c14000}, {"TCP"}),
    "gfx11_in_process_variant_journalctl_locale_cosmic_greeter_issue_344.txt": ({0x8001089f0000}, {"TCP"}),
    "gfx11_vmid0_cpc_fault_with_amd_vi_iommu_rocm_issue_2642.txt": ({0x0}, {"CPC"}),
    "gfx8_polaris_vm_fault_evict_pasid_dmesg_e_rocm_issue_759.txt": ({0xc500000000}, {"TC4"}),
    "gfx900_vega64_mmhub0_old_format_journalctl_rocm_issue_924.txt": ({0x800109862000}, set()),
    "gfx90a_mi210_noretry_hiq_preemption_timeout_sq_intr_rocm_issue_3696.txt": ({0xa000, 0x3000}, set()),
    "gfx942_mi300x_mmhub0_retry_unknown_client_rocm_issue_4021.txt": ({0x709843601000}, set()),
    "gfx942_mi300x_mmhub0_sdma1_rocm_issue_4021.txt": ({0x709843600000}, {"SDMA1"}),
    "gfx9_4_15_era_vmc_page_fault_freebsd_kmsdrm_issue_76.txt": ({0x5b7199707000}, set()),
    "gfx9_gfxhub0_cs2_tab_nospace_valve_csgo_issue_3298.txt": ({0x80012ae97000}, set()),
    "gfx9_gfxhub0_noretry_rocm_amdgpu_issue_172.txt": ({0xae8570611000}, {"TCP"}),
    "gfx9_mmhub0_cid_hex_only_variant_rocm_issue_1399.txt": ({0x7f4a4ba02000}, set()),
    "gfx9_mmhub0_noretry_multigpu_rocm_amdgpu_issue_150.txt": ({0x7fe99dff7000}, set()),
    "gfx9_two_gpus_null_deref_dmesg_T_rocm_issue_2480.txt": ({0x0}, {"TCP"}),
    "rdna_pagefault_no_timestamp_cosmic_comp_issue_2352.txt": ({0x800107007000, 0x800107001000}, {"TCP"}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_FAULTS))
def test_dmesg_corpus_fault_pages_and_clients(corpus, name):
    pages, clients = EXPECTED_FAULTS[name]
    k = parse_kernel_log(corpus_bytes(corpus / "dmesg" / name), name)
    found_pages = {f.address for f in k.faults}
    found_clients = {f.client_name for f in k.faults if f.client_name}
    assert pages <= found_pages, f"missing pages {[hex(p) for p in pages - found_pages]}"
    assert clients <= found_clients


def test_dmesg_corpus_mi300_die_and_pids(corpus):
    k = parse_kernel_log(corpus_bytes(corpus / "dmesg" / "gfx942_mi300x_mmhub0_sdma1_rocm_issue_4021.txt"))
    f = [f for f in k.faults if f.address][0]
    assert (f.die, f.pid, f.process, f.rw) == ("AID0", 6071, "python3.12", 1)
    k = parse_kernel_log(corpus_bytes(corpus / "dmesg" / "gfx9_two_gpus_null_deref_dmesg_T_rocm_issue_2480.txt"))
    assert {f.pid for f in k.faults} >= {4277, 4278}


EXPECTED_EVENTS = {
    "gfx1010_rx5700xt_gfx_timeout_ring_reset_cosmic_epoch_issue_3764.txt": {"ring-timeout", "gpu-reset", "vram-lost"},
    "gfx1013_bc250_sdma_timeout_hws_reset_journalctl_czech_rocm_issue_6313.txt": {"ring-timeout", "kfd", "gpu-reset"},
    "gfx1100_7900xt_sdma1_timeout_guilty_signaled_rocm_issue_1880.txt": {"ring-timeout", "gpu-reset", "reset-result"},
    "gfx1103_780m_freebsd_gfx_timeout_mes_drmkmod_issue_387.txt": {"ring-timeout", "mes", "gpu-reset"},
    "gfx1103_780m_mes_remove_queue_iso8601_syslog_rocm_issue_5180.txt": {"mes", "gpu-reset", "reset-method"},
    "gfx942_mi300x_8gpu_ras_athub_aca_cp_preemption_rocm_issue_4021.txt": {"ras", "kfd"},
    "gfx942_mi300x_hive_mode1_reset_vram_lost_rocm_issue_4021.txt": {"reset-method", "vram-lost", "core-dump"},
    "gfx90a_mi210_noretry_hiq_preemption_timeout_sq_intr_rocm_issue_3696.txt": {"sq-intr"},
    "gfx11_vmid0_cpc_fault_with_amd_vi_iommu_rocm_issue_2642.txt": {"iommu"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_EVENTS))
def test_dmesg_corpus_events(corpus, name):
    k = parse_kernel_log(corpus_bytes(corpus / "dmesg" / name), name)
    assert EXPECTED_EVENTS[name] <= {e.kind for e in k.events}


def test_dmesg_corpus_reset_source_and_reverse(corpus):
    k = parse_kernel_log(corpus_bytes(corpus / "dmesg" / "gfx1010_rx5700xt_gfx_timeout_ring_reset_cosmic_epoch_issue_3764.txt"))
    reset = [e for e in k.events if e.kind == "gpu-reset"][0]
    timeout = [e for e in k.events if e.kind == "ring-timeout"][0]
    assert reset.fields["source"] == 1 and timeout.fields["pid"] == 2288
    k = parse_kernel_log(corpus_bytes(corpus / "dmesg" / "gfx10_reverse_journal_scrubbed_host_thread_with_space_proton_issue_5030.txt"))
    assert k.reversed_input
    assert any(f.process == "HaloInfinite.ex" and f.thread == "00 MAIN" for f in k.faults)


def test_cuda_corpus_xids(corpus):
    k = parse_kernel_log(corpus_bytes(corpus / "cuda" / "h200_dmesg_xid.txt"))
    assert {x.xid for x in k.xids} == {13, 31, 43}
    assert any(x.xid == 31 and x.pid == 581 and x.address == 0x838c74800000 for x in k.xids)
    k = parse_kernel_log(corpus_bytes(corpus / "cuda" / "h200_dmesg_tail.txt"))
    assert k.xids
