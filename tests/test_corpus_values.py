"""Every text file of the shared corpus through `triage`, as a user would pass it, with its expected
values: the kinds detected, each fault (kind, address, pid, client, engine, code), each debugger
stop (kind, signal or exception, GPU or host, kernel or function) and the verdict.

The table was written from faultkit's output and read line by line against the files (the
`# notes:` of each says what it shows); a change here is a change of behaviour to explain."""

from __future__ import annotations

import pytest

from faultkit.export.report import to_json
from faultkit.triage import triage

from .conftest import corpus_copy


def digest(doc: dict) -> dict:
    faults = []
    for f in doc["faults"]:
        t = [f["kind"]]
        if f["address"]:
            t.append(f["address"])
        if f["pid"] is not None:
            t.append(f"pid={f['pid']}")
        if f["detail"].get("client_name"):
            t.append(f"client={f['detail']['client_name']}")
        if f.get("engine"):
            t.append(f"engine={f['engine']}")
        if f["code"]:
            t.append(f"code={f['code']}")
        faults.append(" ".join(t))
    stops = [f"{s['kind']}:{s['signal'] or s['exception'] or ''}:{'gpu' if s['gpu'] else 'host'}:"
             f"{s['kernel'] or s['function'] or ''}" for s in doc["debugger_stops"]]
    v = doc["verdict"]
    return {"kinds": sorted({k for i in doc["inputs"] for k in i["kinds"]}), "faults": faults, "stops": stops,
            "verdict": [v["level"], v["kernel"] or (v["candidates"][0]["kernel"] if v["candidates"] else None)]}


EXPECTED = {
    'dmesg/gfx1010_rx5700xt_gfx_timeout_ring_reset_cosmic_epoch_issue_3764.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1013_bc250_sdma_timeout_hws_reset_journalctl_czech_rocm_issue_6313.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1035_680m_gfxhub_pagefault_in_process_rocm_issue_5225.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x7a6e20839000 pid=3710 client=TCP engine=shader', 'page-fault 0x7a6efabbb000 pid=3710'],
        'stops': []},
    'dmesg/gfx1035_680m_queue_preemption_failed_quiesce_mode2_rocm_issue_5225.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx10_gcvm_inline_task_wezterm_rocm_amdgpu_issue_168.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault client=TCP engine=shader', 'page-fault 0x800505606000 pid=5044'],
        'stops': []},
    'dmesg/gfx10_pagefault_callbacks_suppressed_rocm_issue_2804.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x7f5279bab000 pid=1796'],
        'stops': []},
    'dmesg/gfx10_reverse_journal_scrubbed_host_thread_with_space_proton_issue_5030.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x80016425b000', 'page-fault 0x80016425c000 pid=1551537'],
        'stops': []},
    'dmesg/gfx1100_7900gre_boot_ip_discovery_dmesg_T_rocm_issue_5952.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1100_7900gre_kfd_topology_added_device_dmesg_T_rocm_issue_5952.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1100_7900gre_svm_hogged_cpu_freeing_vital_buffer_dmesg_T_rocm_issue_5952.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1100_7900xt_sdma1_timeout_guilty_signaled_rocm_issue_1880.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1100_7900xt_sdma_timeout_mes_syslog_rocm_issue_2533.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1100_7900xtx_in_process_variant_dmesg_T_rocm_issue_3452.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x7f9587e00000 pid=25698 client=TCP engine=shader'],
        'stops': []},
    'dmesg/gfx1100_7900xtx_sdma_pagefault_mes_msg2_rocm_issue_2205.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x7f0000002000 pid=8285 client=SDMA0 engine=copy', 'page-fault 0x7f0000002000 pid=8285 client=SDMA0 engine=copy', 'page-fault 0x7f0000002000 pid=8285 client=SDMA1 engine=copy'],
        'stops': []},
    'dmesg/gfx1102_navi33_gfx_timeout_mes_reset_fail_dmesg_T_steamos_issue_2802.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1102_vmid0_kernel_cpc_fault_rocm_issue_2766.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0xe8601000 pid=0 client=CPC engine=command-processor'],
        'stops': []},
    'dmesg/gfx1103_780m_compute_ring_timeout_ring_reset_rocm_issue_5180.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1103_780m_freebsd_gfx_timeout_mes_drmkmod_issue_387.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1103_780m_mes_remove_queue_iso8601_syslog_rocm_issue_5180.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1103_780m_mes_suspend_kfd_restore_fail_rocm_issue_5180.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1150_pagefault_process_line_therock_issue_1271.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x7f5e85f94000 pid=5578 client=TCP engine=shader', 'page-fault 0x7f5e85f72000 pid=5578', 'page-fault'],
        'stops': []},
    'dmesg/gfx1150_strix_fault_ring_reset_wedged_cosmic_comp_issue_1953.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x800112c14000 pid=7844 client=TCP engine=shader'],
        'stops': []},
    'dmesg/gfx1151_mes_remove_queue_quiesce_journalctl_rocm_issue_5151.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx1151_strix_halo_mes_remove_queue_kfd_evict_rocm_issue_5724.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx11_in_process_variant_journalctl_locale_cosmic_greeter_issue_344.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x8001089f0000 pid=4732 client=TCP engine=shader', 'page-fault pid=4732'],
        'stops': []},
    'dmesg/gfx11_vmid0_cpc_fault_with_amd_vi_iommu_rocm_issue_2642.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x0 pid=0 client=CPC engine=command-processor'],
        'stops': []},
    'dmesg/gfx1200_rx9060xt_gfx_timeout_mes_remove_queue_rocm_amdgpu_issue_202.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx8_polaris_vm_fault_evict_pasid_dmesg_e_rocm_issue_759.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0xc500000000 pid=0 client=TC4 engine=shader'],
        'stops': []},
    'dmesg/gfx900_vega64_mmhub0_old_format_journalctl_rocm_issue_924.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x800109862000 pid=4218'],
        'stops': []},
    'dmesg/gfx90a_mi210_noretry_hiq_preemption_timeout_sq_intr_rocm_issue_3696.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault-retry 0xa000 pid=2919831', 'page-fault 0x3000 pid=2919831', 'page-fault 0x3000 pid=2919831'],
        'stops': []},
    'dmesg/gfx942_mi300x_8gpu_ras_athub_aca_cp_preemption_rocm_issue_4021.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx942_mi300x_hive_mode1_reset_vram_lost_rocm_issue_4021.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx942_mi300x_mmhub0_retry_unknown_client_rocm_issue_4021.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault-retry 0x709843601000 pid=6071'],
        'stops': []},
    'dmesg/gfx942_mi300x_mmhub0_sdma1_rocm_issue_4021.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault-retry', 'page-fault 0x709843600000 pid=6071 client=SDMA1 engine=copy'],
        'stops': []},
    'dmesg/gfx9_4_15_era_vmc_page_fault_freebsd_kmsdrm_issue_76.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x5b7199707000'],
        'stops': []},
    'dmesg/gfx9_apu_qcm_fence_timeout_mode2_journalctl_rocm_issue_1584.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/gfx9_gfxhub0_cs2_tab_nospace_valve_csgo_issue_3298.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x80012ae91000', 'page-fault 0x80012ae97000 pid=20579'],
        'stops': []},
    'dmesg/gfx9_gfxhub0_noretry_rocm_amdgpu_issue_172.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0xae8570611000 pid=12924 client=TCP engine=shader', 'page-fault 0xae8570612000 pid=12924'],
        'stops': []},
    'dmesg/gfx9_mmhub0_cid_hex_only_variant_rocm_issue_1399.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault', 'page-fault 0x7f4a4ba02000 pid=11888'],
        'stops': []},
    'dmesg/gfx9_mmhub0_noretry_multigpu_rocm_amdgpu_issue_150.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x7fe99dff7000 pid=846049', 'page-fault 0x7fe99dff8000 pid=846049'],
        'stops': []},
    'dmesg/gfx9_two_gpus_null_deref_dmesg_T_rocm_issue_2480.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x0 pid=4277 client=TCP engine=shader', 'page-fault 0x0 pid=4278 client=TCP engine=shader'],
        'stops': []},
    'dmesg/kfd_evict_restore_pasid_debug_trace_rocm_issue_1399.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/kfd_hiq_preemption_timeout_quiesce_restore_loop_ollama_issue_738.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/rdna_gfx_timeout_baco_reset_journalctl_cosmic_comp_issue_2626.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'dmesg/rdna_pagefault_no_timestamp_cosmic_comp_issue_2352.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['page-fault 0x800107007000 pid=20242 client=TCP engine=shader', 'page-fault 0x800107001000 pid=20242 client=TCP engine=shader'],
        'stops': []},
    'dmesg/rocr_memory_access_fault_core_dump_680m_rocm_issue_5225.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x7a6eedb80000'],
        'stops': []},
    'dmesg/rocr_memory_access_fault_mi300x_rocm_issue_4021.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x709843600000'],
        'stops': []},
    'dmesg/rocr_memory_access_fault_stderr_7900xtx_rocm_issue_3452.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x7f9587e00000'],
        'stops': []},
    'runtime/debug_agent_v1_memfault_rocm_issue_993.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x7f36437bb000'],
        'stops': []},
    'runtime/debug_agent_v1_memfault_rocr_debug_agent_issue_2.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x12345000'],
        'stops': []},
    'runtime/debug_agent_v2_assert_trap_docs_sample.txt': {
        'kinds': ['runtime-log'], 'verdict': ['likely', 'vector_add_assert_trap(int*, int*, int*)'],
        'faults': ['queue-error code=0x1016'],
        'stops': []},
    'runtime/debug_agent_v2_memfault_event_docs_snippet.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x7fbe4cc01000'],
        'stops': []},
    'runtime/debug_agent_v2_mfc_fixture_rocm631.txt': {
        'kinds': ['runtime-log'], 'verdict': ['likely', 's_tvd_rk$m_time_steppers_$ck_L486_6'],
        'faults': ['memory-access-fault 0x7ffb6a0f6000'],
        'stops': []},
    'runtime/debug_agent_v2_mfc_fixture_rocm720_offload.txt': {
        'kinds': ['runtime-log'], 'verdict': ['likely', '__omp_offloading_8116438_1c00689b__QMm_time_steppersPs_tvd_rk_l486'],
        'faults': ['memory-access-fault 0x7ffb61f02000'],
        'stops': []},
    'runtime/gpucore_created_mi300x_cmssw_pr_50391.txt': {
        'kinds': ['runtime-log'], 'verdict': ['candidates', '_ZN6alpaka6detail9gpuKernelIN17alpaka_rocm_async33ECLCCPrologueComputeOffsetsKernelILj8EEENS_22AccGpuUniformCudaHipRtINS_8ApiHipRtESt17integral_constantImLm1EEjEEJN4reco38PFMultiDepthECLCCPrologueArgsSoALayoutILm128ELb0EE22ViewTemplateFreeParamsILm128ELb0ELb1ELb1EEENSA_39PFMultiDepthClusteringCCLabelsSoALayoutILm128ELb0EE22ViewTemplateFreeParamsILm128ELb0ELb1ELb1EEEEEEvNS_3VecINS_5trait7DimTypeIT0_vE4typeENSK_7IdxTypeISM_vE4typeEEET_DpT1_'],
        'faults': [],
        'stops': []},
    'runtime/gpucore_pipe_handler_failed_xgrammar_issue_678.txt': {
        'kinds': ['runtime-log'], 'verdict': ['candidates', 'apply_token_bitmask_inplace_kernel'],
        'faults': [],
        'stops': []},
    'runtime/hang_analysis_kernel_name_cmssw_issue_50607.txt': {
        'kinds': ['runtime-log'], 'verdict': ['candidates', 'kernel_obj=0x1512f5489a80'],
        'faults': [],
        'stops': []},
    'runtime/hip_log_level4_dispatch_rocm_issue_2804.txt': {
        'kinds': ['runtime-log'], 'verdict': ['candidates', 'kernel_obj=0x7f5c101260c0'],
        'faults': [],
        'stops': []},
    'runtime/hsa_0x1016_iree_issue_17872.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error pid=192145 code=0x1016'],
        'stops': []},
    'runtime/hsa_0x1016_rocm_issue_6023.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error code=0x1016'],
        'stops': []},
    'runtime/hsa_0x1016_rocm_issue_6245_redacted.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error code=0x1016'],
        'stops': []},
    'runtime/hsa_0x1016_vllm_issue_20007_title.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error code=0x1016'],
        'stops': []},
    'runtime/hsa_0x29_aperture_janusminer_issue_10.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error pid=804147 code=0x29'],
        'stops': []},
    'runtime/hsa_0x29_aperture_rocm_issue_2153.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error pid=5999 code=0x29'],
        'stops': []},
    'runtime/hsa_0x2a_illegal_instruction_hip_issue_2344.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error code=0x2a'],
        'stops': []},
    'runtime/hsa_0x2b_memfault_crusher_rocm5.1.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error pid=54282 code=0x2b'],
        'stops': []},
    'runtime/hsa_status_0x100f_rocm_issue_1393.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error code=0x100f'],
        'stops': []},
    'runtime/hsa_status_0x1016_rocm_issue_1441.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error code=0x1016'],
        'stops': []},
    'runtime/hsa_status_0x29_and_vmfault_rocm3.7_rocm_issue_1220.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error code=0x29', 'memory-access-fault 0x8000000000'],
        'stops': []},
    'runtime/hsa_status_0x29_rocm4.0_rocm_issue_1366.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error code=0x29'],
        'stops': []},
    'runtime/hw_exception_gpu_hang_gfx1103_rocm_sdk_builder_issue_141.txt': {
        'kinds': ['kernel-log', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': ['gpu-hang'],
        'stops': []},
    'runtime/hw_exception_gpu_hang_r9700_raylight_issue_102.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['gpu-hang pid=63079'],
        'stops': []},
    'runtime/hw_exception_gpu_hang_w7900_rocm6.4.3_rocm_issue_6137.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['gpu-hang'],
        'stops': []},
    'runtime/memory_fault_error_kernel_name_therock_issue_6472.txt': {
        'kinds': ['runtime-log'], 'verdict': ['candidates', 'void rocsparse::csr2hyb_kernel<512u, float>(int, float const*, int const*, int const*, int, int*, float*, int*, int*, float*, int*, rocsparse_index_base_)'],
        'faults': ['memory-access-fault 0x0', 'memory-access-fault 0x0'],
        'stops': []},
    'runtime/pytorch_hip_illegal_address_ci_pytorch_pr_170469.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['hip-error'],
        'stops': []},
    'runtime/pytorch_hip_no_kernel_image_autotrain_issue_737.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['hip-error'],
        'stops': []},
    'runtime/rocgdb_precise_memory_warning_rocgdb_issue_17.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': ['gpu-stop engine=shader'],
        'stops': ['signal::gpu:']},
    'runtime/rocr_debugbuild_nearby_memory_map_rocm-libraries_issue_6166.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['queue-error code=0x2b', 'memory-access-fault 0x7f06e865a000'],
        'stops': []},
    'runtime/vmfault_miopen_kernel_hint_miopen_issue_579.txt': {
        'kinds': ['runtime-log'], 'verdict': ['candidates', 'MIOpenCvBwdWrW_rdc'],
        'faults': ['memory-access-fault 0x7f8d61545000'],
        'stops': []},
    'runtime/vmfault_notpresent_polaris_dmesg_rocm_issue_993.txt': {
        'kinds': ['kernel-log', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x508400000', 'page-fault 0x508400000 pid=18204 client=TC6 engine=shader'],
        'stops': []},
    'runtime/vmfault_rocm1.6_no_agent_handle_imprecise_rocm_issue_195.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x0'],
        'stops': []},
    'runtime/vmfault_rocm2.0_rx580_rocm_issue_664.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x501006000'],
        'stops': []},
    'runtime/vmfault_unknown_gfx950_aiter_vllm_issue_43605.txt': {
        'kinds': ['runtime-log'], 'verdict': ['candidates', '_ZN5aiter43fmoe_bf16_blockscaleFp8_g1u1_vs_silu_32x384E'],
        'faults': ['memory-access-fault 0x77d445e00000'],
        'stops': []},
    'gdb/bc250_gfx1013_unsupported_warnings.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/cuda_gdb_coredump_warp_illegal_address.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'illegalMemoryAccessKernel(int*, int)'],
        'faults': ['cuda-exception engine=shader'],
        'stops': ['cuda-exception:Warp Illegal Address:gpu:illegalMemoryAccessKernel(int*, int)']},
    'gdb/cuda_gdb_info_cuda_kernels_old.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/cuda_gdb_juwels_attach_stop.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'jacobi_kernel<32, 32>'],
        'faults': ['cuda-exception engine=shader'],
        'stops': ['cuda-exception:CUDA_EXCEPTION_14:gpu:jacobi_kernel<32, 32>']},
    'gdb/cuda_gdb_openmp_offload_warp_illegal_address.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', '__omp_offloading_9491be2_4e000773_main_l9'],
        'faults': ['cuda-exception engine=shader', 'cuda-exception engine=shader'],
        'stops': ['cuda-exception:CUDA_EXCEPTION_14:gpu:__omp_offloading_9491be2_4e000773_main_l9', 'cuda-exception:CUDA_EXCEPTION_14:gpu:__omp_offloading_9491be2_4e000773_main_l9_debug__']},
    'gdb/flang_170211_offload_runtime_error_no_debugger.txt': {
        'kinds': ['runtime-log'], 'verdict': ['candidates', '_QQmain @ 4 (__omp_offloading_804_2b87b0e__QQmain_l4)'],
        'faults': ['memory-access-fault 0x0'],
        'stops': []},
    'gdb/gnu_gdb_catch_signal_sigsegv.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': ['host-signal'],
        'stops': ['catchpoint:SIGSEGV:host:worker_bad']},
    'gdb/gnu_gdb_clinfo_thread_received_sigsegv.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': ['host-signal'],
        'stops': ['signal:SIGSEGV:host:free']},
    'gdb/gnu_gdb_mi_stopped_sigsegv.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': ['host-signal'],
        'stops': ['mi:SIGSEGV:host:D main']},
    'gdb/gnu_gdb_rocminfo_program_received_sigsegv.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': ['host-signal'],
        'stops': ['signal:SIGSEGV:host:??']},
    'gdb/hpctraining_info_agents_mi250.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/hpctraining_info_dispatches.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/hpctraining_omp_offload_sigsegv.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', '__omp_offloading_..._main_l23'],
        'faults': ['gpu-memory-violation engine=shader'],
        'stops': ['signal:SIGSEGV:gpu:__omp_offloading_..._main_l23']},
    'gdb/hpctraining_saxpy_runtime_fault_no_debugger.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['memory-access-fault 0x0'],
        'stops': []},
    'gdb/hpctraining_saxpy_sigsegv.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['likely', 'saxpy'],
        'faults': ['gpu-memory-violation engine=shader'],
        'stops': ['signal:SIGSEGV:gpu:saxpy']},
    'gdb/lumi_info_threads_rocm51.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/lumi_thread_switch_cpu_rocm51.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/nan_check_sigfpe_imprecise_alu.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['likely', 'loop_log_fusion'],
        'faults': ['gpu-arithmetic-exception engine=shader'],
        'stops': ['signal:SIGFPE:gpu:loop_log_fusion']},
    'gdb/p1sin_crux_sigsegv_gfx1101_rocm612.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['likely', 'crux_p1sin'],
        'faults': ['gpu-memory-violation engine=shader'],
        'stops': ['signal:SIGSEGV:gpu:crux_p1sin']},
    'gdb/p1sin_fee_debugprints_sigsegv_gfx1101.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['likely', 'fee_kernel'],
        'faults': ['gpu-memory-violation engine=shader'],
        'stops': ['signal:SIGSEGV:gpu:fee_kernel']},
    'gdb/p1sin_inferior_exit.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/p1sin_p1sin_sigbus_9999dirs.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['likely', 'jones_p1sin_device'],
        'faults': ['gpu-address-error engine=shader'],
        'stops': ['signal:SIGBUS:gpu:jones_p1sin_device']},
    'gdb/rocgdb_pr68_cpu_thread_sigsegv.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': ['host-signal'],
        'stops': ['signal:SIGSEGV:host:main']},
    'gdb/rocke_breakpoint_pending_hit.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/rocke_disassemble_around_pc.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/rocke_info_dispatches.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/rocke_no_debuginfo_memory_uri_frame.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/rocke_registers.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/rocke_sigsegv_imprecise_gfx950_rocm72.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['likely', 'rocke_elementwise_add_f16_b256_v8'],
        'faults': ['gpu-stop engine=shader'],
        'stops': ['signal::gpu:rocke_elementwise_add_f16_b256_v8']},
    'gdb/windows_hipsdk_breakpoint_kernel_named_wave.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_cuda_gdb_exception_and_disas.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'exception_kernel'],
        'faults': ['cuda-exception engine=shader'],
        'stops': ['cuda-exception:CUDA_EXCEPTION_14:gpu:exception_kernel']},
    'gdb/doc_examples/doc_cuda_gdb_info_cuda_kernels.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_breakpoint_with_lanes.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_core_dump.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['likely', 'faulty_kernel'],
        'faults': ['gpu-memory-violation engine=shader'],
        'stops': ['core:SIGSEGV:gpu:faulty_kernel']},
    'gdb/doc_examples/doc_rocgdb_info_agents.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_info_dispatches_full.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_info_lanes.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_info_queues.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_info_sharedlibrary.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_info_threads_lanes_column.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_info_threads_unknown_coords.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_lane_switch_inactive.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_mi_lane_info.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_mi_thread_select_lane.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_precise_memory_warning.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['likely', 'bit_extract_kernel'],
        'faults': ['gpu-memory-violation engine=shader'],
        'stops': ['signal:SIGSEGV:gpu:bit_extract_kernel']},
    'gdb/doc_examples/doc_rocgdb_show_precise_memory.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'gdb/doc_examples/doc_rocgdb_testsuite_info_dispatches_samples.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'cuda/h200_attach_gdb_1105.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'gather_kernel'],
        'faults': ['cuda-exception engine=shader'],
        'stops': ['cuda-exception:CUDA_EXCEPTION_14:gpu:gather_kernel']},
    'cuda/h200_attach_pids.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'cuda/h200_attach_ps.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'cuda/h200_attach_server.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'cuda/h200_coredump_load.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'gather_kernel'],
        'faults': ['cuda-exception engine=shader'],
        'stops': ['cuda-exception:Warp Illegal Address:gpu:gather_kernel']},
    'cuda/h200_coredump_progress.txt': {
        'kinds': ['runtime-log'], 'verdict': ['certain', 'gather_kernel'],
        'faults': ['cuda-exception engine=shader'],
        'stops': []},
    'cuda/h200_coredump_run.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'cuda/h200_cudacore_lightweight_gdb.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'gather_kernel'],
        'faults': ['cuda-exception engine=shader'],
        'stops': ['cuda-exception:Warp Illegal Address:gpu:gather_kernel']},
    'cuda/h200_cudacore_lightweight_readelf.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'cuda/h200_dmesg_tail.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['xid-13 engine=shader', 'xid-13', 'xid-43 pid=494', 'xid-13 engine=shader', 'xid-13', 'xid-43 pid=570', 'xid-31 0x838c74800000 pid=581 engine=shader', 'xid-31 0x83b754800000 pid=621 engine=shader', 'xid-13 engine=shader', 'xid-13', 'xid-31 pid=694'],
        'stops': []},
    'cuda/h200_dmesg_xid.txt': {
        'kinds': ['kernel-log'], 'verdict': ['unknown', None],
        'faults': ['xid-43 pid=570', 'xid-31 0x838c74800000 pid=581 engine=shader', 'xid-31 0x83b754800000 pid=621 engine=shader', 'xid-13 engine=shader', 'xid-13', 'xid-31 pid=694', 'xid-31 0x837f1c800000 pid=799 engine=shader', 'xid-13 engine=shader', 'xid-13', 'xid-31 pid=963'],
        'stops': []},
    'cuda/h200_mp_cudagdb.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['unknown', None],
        'faults': [],
        'stops': []},
    'cuda/h200_mp_plain.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['cuda-error'],
        'stops': []},
    'cuda/h200_oob_cudagdb.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'scatter_oob_kernel'],
        'faults': ['cuda-exception engine=shader'],
        'stops': ['cuda-exception:CUDA_EXCEPTION_7:gpu:scatter_oob_kernel']},
    'cuda/h200_oob_plain.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['gpu-runtime-error'],
        'stops': []},
    'cuda/h200_oob_sanitizer.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'scatter_oob_kernel(float *, const int *, int)'],
        'faults': ['gpu-runtime-error', 'invalid-global-write 0x7f8e2aa00000 engine=shader'],
        'stops': []},
    'cuda/h200_sanitizer_mp.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'gather_kernel'],
        'faults': ['cuda-error', 'invalid-global-read 0x83eb06800000 engine=shader'],
        'stops': []},
    'cuda/h200_torch_cudagdb.txt': {
        'kinds': ['debugger', 'runtime-log'], 'verdict': ['certain', 'gather_kernel'],
        'faults': ['cuda-exception engine=shader'],
        'stops': ['cuda-exception:CUDA_EXCEPTION_14:gpu:gather_kernel']},
    'cuda/h200_torch_plain.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['cuda-error'],
        'stops': []},
    'cuda/h200_torch_prof.txt': {
        'kinds': ['runtime-log'], 'verdict': ['unknown', None],
        'faults': ['cuda-error'],
        'stops': []},
}



@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_values(corpus, tmp_path, name):
    path = corpus_copy(corpus / name, tmp_path)
    assert digest(to_json(triage([str(path)]))) == EXPECTED[name]


def test_every_corpus_text_file_has_expected_values(corpus):
    files = {str(p.relative_to(corpus)) for sub in ("dmesg", "runtime", "gdb", "gdb/doc_examples", "cuda")
             for p in (corpus / sub).glob("*.txt")}
    assert files == set(EXPECTED), "corpus files without expected values (or gone): " + str(files ^ set(EXPECTED))
