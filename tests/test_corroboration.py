"""Evidence corroborates only when every key both pieces carry agrees (pid, GPU node, queue,
address page); a disagreement demotes and says why; an unknown key is neither."""

from __future__ import annotations

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.triage import build


def triage_text(text: str, name: str = "pasted.log") -> dict:
    return to_json(build(Inputs(files=[InputFile(name, text.encode())])))


WAVE_891 = """\
(Worker_TP0 pid=891) wave_0: pc=0x7f3a2c401234 (kernel_code_entry=0x7f3a2c400000 <gemm_kernel>) (stopped, reason: MEMORY_VIOLATION)
"""


def test_wave_dump_of_another_process_is_not_likely():
    doc = triage_text(WAVE_891 + "(Worker_TP1 pid=893) Memory access fault by GPU node-2 (Agent handle: 0x55d1) on "
                      "address 0x7f0000001000. Reason: Page not present or supervisor privilege.\n")
    v = doc["verdict"]
    assert v["level"] == "candidates" and "pid [891]" in v["why"] and "pid [893]" in v["why"]


def test_wave_dump_of_the_same_process_stays_likely():
    doc = triage_text(WAVE_891 + "(Worker_TP0 pid=891) Memory access fault by GPU node-2 (Agent handle: 0x55d1) on "
                      "address 0x7f0000001000. Reason: Page not present or supervisor privilege.\n")
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "gemm_kernel")


def test_focus_switch_after_a_host_stop_is_not_the_stop():
    doc = triage_text("""\
Program received signal SIGSEGV, Segmentation fault.
0x00007ffff7b4a2d1 in PyObject_GetAttr () from /usr/lib/x86_64-linux-gnu/libpython3.10.so.1.0
(gdb) thread 5
[Switching to thread 5, lane 0 (AMDGPU Lane 1:2:1:1/0 (0,0,0)[0,0,0])]
#0  0x00007fffe4a01234 in gemm_kernel () from memory://1234#offset=0x7fffe4a00000&size=4096
(gdb) bt
""", "gdb.txt")
    (stop,) = doc["debugger_stops"]
    assert stop["gpu"] is False and stop["function"] == "PyObject_GetAttr"
    assert doc["verdict"]["level"] == "unknown" and doc["verdict"]["kernel"] is None


LOG4 = """\
:3:rocvirtual.cpp           :3016: 1234 us: [pid:77 tid:0x1] ShaderName : victim_kernel
:4:rocvirtual.cpp           :1002: 1235 us: [pid:77 tid:0x1] HWq=0x7f5c16600000, Dispatch Header = 0xb02 (type=2, barrier=1, acquire=2, release=2), setup=3, grid=[1024, 1, 1], workgroup=[256, 1, 1], private_seg_size=0, group_seg_size=0, kernel_obj=0x7f5c1a001000, kernarg_address=0x7f5c10000000, completion_signal=0x0
:3:rocvirtual.cpp           :3016: 1236 us: [pid:77 tid:0x1] ShaderName : innocent_kernel
:4:rocvirtual.cpp           :1002: 1237 us: [pid:77 tid:0x1] HWq=0x7f5c17700000, Dispatch Header = 0xb02 (type=2, barrier=1, acquire=2, release=2), setup=3, grid=[64, 1, 1], workgroup=[64, 1, 1], private_seg_size=0, group_seg_size=0, kernel_obj=0x7f5c1a002000, kernarg_address=0x7f5c10001000, completion_signal=0x0
:1:rocdevice.cpp            :3055: 1300 us: [pid:77 tid:0x2] Callback: Queue 0x7f5c16600000 aborting with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest legal address. code: 0x29
"""


def test_the_aborting_queue_selects_the_dispatch():
    doc = triage_text(LOG4)
    names = [c["kernel"] for c in doc["verdict"]["candidates"]]
    assert "innocent_kernel" not in names and names[0] == "victim_kernel", doc["verdict"]
    assert "on the aborting queue 0x7f5c16600000" in doc["verdict"]["candidates"][0]["why"]


def test_kernel_log_fault_of_another_process_is_not_consistent():
    dmesg = ("[  183.5] amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:9 pasid:32801, "
             "for process python3 pid 555 thread python3 pid 555)\n"
             "[  183.5] amdgpu 0000:c1:00.0: amdgpu:   in page starting at address 0x00000000dead0000 from IH client "
             "0x1b (UTCL2)\n"
             "[  183.5] amdgpu 0000:c1:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00901031\n")
    doc = to_json(build(Inputs(files=[InputFile("server.log", WAVE_891.encode()),
                                      InputFile("dmesg.txt", dmesg.encode())])))
    why = doc["verdict"]["candidates"][0]["why"]
    assert "consistent with the kernel log" not in why and "not corroborated" in why


def test_trace_suspect_on_an_unknown_gpu_is_not_likely(tmp_path):
    from faultkit.bundle import collect
    from tests.test_traces import FAULT_NS, MS, bundle, k70

    ks = [k70(3, 1, 1, 9, 1, "only_kernel", 1, FAULT_NS - 3 * MS, FAULT_NS + 2 * MS)]
    b = bundle(tmp_path, kernels=ks, node=2)        # 'Agent 3' = logical 3 -> node? only agent_info says
    doc = to_json(build(collect([str(b)])))
    assert doc["verdict"]["level"] == "candidates"  # with agent_info: node 4 != node-2, not plausible
    (b / "rocprofv3" / "host" / "4242_agent_info.csv").unlink()
    doc = to_json(build(collect([str(b)])))
    assert doc["verdict"]["level"] == "candidates" and "its GPU is unknown" in doc["verdict"]["candidates"][0]["why"]


def test_one_incident_per_faulting_process():
    text = ("(Worker_TP0 pid=891) wave_0: pc=0x7f00aa001000 (kernel_code_entry=0x7f00aa000f00 <gemm_kernel>) "
            "(stopped, reason: MEMORY_VIOLATION)\n"
            "(Worker_TP0 pid=891) Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. "
            "Reason: Page not present or supervisor privilege.\n"
            "(Worker_TP1 pid=893) Memory access fault by GPU node-3 (Agent handle: 0x55d2) on address 0x7f9000002000. "
            "Reason: Page not present or supervisor privilege.\n")
    doc = to_json(build(Inputs(files=[InputFile("server.log", text.encode())])))
    first, second = doc["incidents"]
    assert (first["pids"], first["gpus"], first["faults"]) == ([891], ["node-2"], [0])
    assert (first["verdict"]["level"], first["verdict"]["kernel"]) == ("likely", "gemm_kernel")
    # pid 893's fault is not explained by pid 891's wave dump
    assert (second["pids"], second["faults"], second["verdict"]["level"]) == ([893], [1], "unknown")
    assert second["verdict"]["candidates"] == []
    assert doc["verdict"] == first["verdict"]


def test_a_single_process_has_one_incident_equal_to_the_verdict():
    text = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. "
            "Reason: Page not present or supervisor privilege.\n")
    doc = to_json(build(Inputs(files=[InputFile("server.log", text.encode())])))
    (only,) = doc["incidents"]
    assert only["faults"] == [0] and only["verdict"] == doc["verdict"]
