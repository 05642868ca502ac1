"""Records the front end and the parsers missed on pasted evidence (issue 33, "every line read"): each
test holds the real line shape, from the public report or the producer's source cited beside it."""

from __future__ import annotations

import json
import subprocess
import sys

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.ingest.normalize import normalize
from faultkit.triage import build


def triage(text: str, name: str = "pasted.log") -> dict:
    return to_json(build(Inputs(files=[InputFile(name, text.encode())])))


def faults(text: str) -> list[tuple]:
    return [(f["kind"], f["address"], f["gpu"], f["pid"]) for f in triage(text)["faults"]]


# ---- 1. NVIDIA Xid lines under a bare `kernel:` ident; the fallen-off-the-bus record ----
# NVIDIA/open-gpu-kernel-modules#507 (Xid 79 "GPU has fallen off the bus"), kernel_rc.c's format
# "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, <message>"; a syslog line keeps `kernel: ` when
# the poster cut its stamp and host (`... kernel: NVRM: Xid ...`).
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2431, name=python3, GPU has fallen off the bus."


def test_an_xid_line_under_a_bare_kernel_ident_is_read():
    for head in ("kernel: ", "... kernel: ", "gpu-node-7 kernel: "):
        got = triage(head + XID79 + "\n")["faults"]
        assert [(f["kind"], f["pid"], f["process"]) for f in got] == [("xid-79", 2431, "python3")], head
        assert got[0]["detail"]["text"] == XID79


def test_a_bare_kernel_ident_after_a_sentence_of_prose_is_read():
    got = triage("we got this in syslog right before the crash:\nkernel: " + XID79 + "\n")["faults"]
    assert [(f["kind"], f["pid"], f["detail"]["origin"]) for f in got] == [("xid-79", 2431, "pasted.log:2")]


def test_an_xid_line_hard_wrapped_under_a_bare_kernel_ident_is_joined():
    text = "kernel: " + XID79[:XID79.index(" fallen")] + "\nfallen off the bus.\n"
    (f,) = triage(text)["faults"]
    assert (f["kind"], f["detail"]["text"]) == ("xid-79", XID79)


def test_dmesg_x_facility_and_level_are_read_off():
    # util-linux dmesg -x (--decode): the facility and level, padded, before the stamp
    one = "kern  :err   : [ 1234.567890] " + XID79 + "\n"
    assert faults(one) == [("xid-79", None, "PCI:0000:3b:00", 2431)]
    two = "kern  :info  : [ 1234.000001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n" + one
    assert faults(two) == [("xid-79", None, "PCI:0000:3b:00", 2431)]


# NVIDIA/NVSentinel#155 and open-gpu-kernel-modules nv.c (RmInitAdapter: "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\n
# NVRM: (PCI ID: %04x:%04x) installed in this system has\nNVRM: fallen off the bus and is not responding to
# commands.\n"), dmesg indenting the record's 2nd and 3rd lines; no Xid number is printed.
LOST = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n")


def test_the_fallen_off_the_bus_record_of_three_lines_is_a_fault_of_its_gpu():
    (f,) = triage(LOST)["faults"]
    assert (f["kind"], f["gpu"], f["detail"]["pci_id"]) == ("gpu-fallen-off-bus", "0000:b3:00.0", "10de:26b5")


def test_the_fallen_off_the_bus_record_wrapped_on_two_lines_under_kernel_idents():
    # an older driver's wording (PCI ID on the first line, cut after "in this"), in a journal
    text = ("Mar 05 23:33:35 host kernel: NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1e07) installed in this\n"
            "Mar 05 23:33:35 host kernel: NVRM: system has fallen off the bus and is not responding to commands.\n")
    (f,) = triage(text)["faults"]
    assert (f["kind"], f["gpu"], f["detail"]["pci_id"]) == ("gpu-fallen-off-bus", "0000:01:00.0", "10de:1e07")


def test_a_gpu_line_without_the_end_of_the_record_is_no_fault():
    text = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
            "[ 1843.308150] NVRM: GPU Board Serial Number: 1234567890\n")
    assert triage(text)["faults"] == []


# ---- 2. AMD IOMMU IO_PAGE_FAULT events ----
# drivers/iommu/amd/iommu.c amd_iommu_report_page_fault: pci_err(pdev, "Event logged [IO_PAGE_FAULT
# domain=0x%04x address=0x%llx flags=0x%04x]") under the device's driver prefix (and pr_fmt `AMD-Vi: `), else
# pr_err_ratelimited("Event logged [IO_PAGE_FAULT device=%04x:%02x:%02x.%x ...") (before 6.1: `device=%02x:%02x.%x`).
# Lines: ROCm/ROCm#2642 (`amdgpu 0000:03:00.0: AMD-Vi: ...`), DIGImend/digimend-kernel-drivers#136 (the old
# `device=20:00.0` form), Dasharo/dasharo-issues#1134 (a NIC's: `ath10k_pci 0000:01:00.0: AMD-Vi: ...`).

def test_an_amdgpu_io_page_fault_is_a_fault_with_its_address_and_device():
    text = "[  262.094625] amdgpu 0000:03:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0010 address=0x64a7f000 flags=0x0020]\n"
    (f,) = triage(text)["faults"]
    assert (f["kind"], f["address"], f["gpu"]) == ("iommu-io-page-fault", "0x64a7f000", "0000:03:00.0")
    assert (f["detail"]["domain"], f["detail"]["flags"], f["detail"]["write"]) == ("0x10", "0x20", True)


def test_the_io_page_fault_of_an_unknown_device_names_it_in_both_spellings():
    old = "[    1.116842] AMD-Vi: Event logged [IO_PAGE_FAULT device=20:00.0 domain=0x0003 address=0x000000f4001eef80 flags=0x0010]\n"
    new = ("[  123.456789] iommu ivhd0: AMD-Vi: Event logged [IO_PAGE_FAULT device=0000:c1:00.0 domain=0x000e "
           "address=0x1fffe0000 flags=0x0000 vflags=0x0]\n")
    assert faults(old) == [("iommu-io-page-fault", "0xf4001eef80", "0000:20:00.0", None)]
    assert faults(new) == [("iommu-io-page-fault", "0x1fffe0000", "0000:c1:00.0", None)]


def test_a_repeated_io_page_fault_is_one_fault_and_another_drivers_is_none():
    line = "[  262.094688] amdgpu 0000:03:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0010 address=0x64a7f000 flags=0x0020]\n"
    nic = "[   40.182570] ath10k_pci 0000:01:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000d address=0xcff49550 flags=0x0070]\n"
    assert faults(line * 3 + nic) == [("iommu-io-page-fault", "0x64a7f000", "0000:03:00.0", None)]


def test_an_io_page_fault_through_the_cli(tmp_path):
    p = tmp_path / "dmesg.txt"
    p.write_text("kernel: amdgpu 0000:03:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0010 address=0x64a7f000 "
                 "flags=0x0000]\n")
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(p), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    doc = json.loads(r.stdout)
    assert [(f["kind"], f["address"], f["gpu"], f["detail"]["write"]) for f in doc["faults"]] == \
        [("iommu-io-page-fault", "0x64a7f000", "0000:03:00.0", False)]


# ---- 5. an indented block after a sentence of prose ----
# QubesOS/qubes-issues#7648: the journal pasted as a Markdown code block (four spaces), a sentence before it
BLOCK = ("    [ 4778.915423] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)\n"
         "    [ 4778.916081] amdgpu 0000:c6:00.0: amdgpu:  for process pt_main_thread pid 12924 thread pt_main_thread pid 12924)\n"
         "    [ 4778.916571] amdgpu 0000:c6:00.0: amdgpu:   in page starting at address 0x0000ae8570611000 from IH client 0x1b (UTCL2)\n"
         "    [ 4778.917054] amdgpu 0000:c6:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031\n")


def test_an_indented_dmesg_block_after_a_line_of_prose_is_read():
    got = faults("here is dmesg:\n" + BLOCK)
    assert got == [("page-fault", "0xae8570611000", "0000:c6:00.0", 12924)]
    n = normalize("here is dmesg:\n" + BLOCK)
    assert n.split("\n")[0] == "here is dmesg:" and n.split("\n")[1].startswith("[ 4778.915423] amdgpu")
    assert "a common indentation of 4 character(s) was read off" in n.notes.sentences()
    # and with a closing remark after it
    assert faults("here is dmesg:\n" + BLOCK + "it happens every time.\n") == got


def test_an_unindented_record_before_indented_lines_keeps_them_its_own():
    # a traceback's indented frames under its unindented head: never a code block to dedent
    text = ("Fatal Python error: Aborted\n\nThread 0x00007f0000000700 (most recent call first):\n"
            "  File \"/srv/model.py\", line 88 in forward\n  File \"/srv/serve.py\", line 12 in step\n")
    assert normalize(text) is text


# ---- 6. two complete records of one length are never one wrapped line ----
# kousw/stable-diffusion-webui-daam#4 (tests/data/source_shapes): PyTorch's Windows build, no function before `block:`
WIN = ("C:\\ci\\_work\\pytorch\\pytorch\\builder\\windows\\pytorch\\aten\\src\\ATen\\native\\cuda\\IndexKernel.cu:91: "
       "block: [12,0,0], thread: [{t},0,0] Assertion `index >= -sizes[i] && index < sizes[i] && \"index out of bounds\"` "
       "failed.\n")


def test_two_assert_lines_of_one_length_stay_two_lines():
    text = WIN.format(t=40) + WIN.format(t=41)
    assert normalize(text) is text
    (f,) = triage(text)["faults"]
    assert (f["kind"], f["detail"]["threads"], f["detail"]["function"]) == ("device-assert", 2, None)
    assert triage(text)["verdict"]["kernel"] is None


# ---- 7. a launcher's pid and rank reach the faults of its lines ----
# vLLM V1's engine core tag (vllm-project/vllm-ascend#3395: `(EngineCore_DP0 pid=3452) ERROR 10-12 02:10:43
# [core.py:710] ...`), torchrun's per-line `[rank3]:` (torch.distributed.elastic's default log line prefix),
# both at once where vLLM runs torch's workers, and SGLang's `[2025-01-02 10:11:12 DP0 TP3]` (its logger's
# rank suffix inside the stamp).
TORCH_ERROR = ("Traceback (most recent call last):\n  File \"/srv/worker.py\", line 10, in execute_model\n"
               "    out = self.model(x)\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
               "CUDA kernel errors might be asynchronously reported at some other API call.\n")
MAF = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. Reason: Page not "
       "present or supervisor privilege.\n")


def _tagged(head: str, text: str) -> str:
    return "".join(head + ln + "\n" for ln in text.splitlines())


def _who(text: str) -> list[tuple]:
    return [(f["kind"], f["code"], f["pid"], f["process"]) for f in triage(text)["faults"]]


def test_torchs_rank_prefix_reaches_the_host_error():
    assert _who(_tagged("[rank3]: ", TORCH_ERROR)) == [("cuda-error", "700", None, "rank3")]


def test_a_worker_tag_outside_the_rank_prefix_gives_pid_and_rank():
    text = _tagged("(EngineCore_DP0 pid=1234) [rank0]: ", TORCH_ERROR)
    assert _who(text) == [("cuda-error", "700", 1234, "EngineCore_DP0 pid=1234, rank0")]
    # and under a container's prefix too
    assert _who(_tagged("vllm-1  | (EngineCore_DP0 pid=1234) [rank0]: ", TORCH_ERROR)) == _who(text)


def test_a_vllm_worker_tag_reaches_a_host_error_and_a_runtime_fault():
    head = "(VllmWorker rank=2 pid=5678) "
    assert _who(_tagged(head, TORCH_ERROR)) == [("cuda-error", "700", 5678, "VllmWorker rank=2 pid=5678")]
    assert _who(_tagged(head, "INFO starting\n" + MAF)) == \
        [("memory-access-fault", None, 5678, "VllmWorker rank=2 pid=5678")]


def test_sglangs_rank_inside_its_stamp_reaches_the_fault():
    got = _who(_tagged("[2025-01-02 10:11:12 DP0 TP3] ", "INFO starting\n" + MAF))
    assert got == [("memory-access-fault", None, None, "DP0 TP3")]
    doc = triage(_tagged("[2025-01-02 10:11:12 TP1] ", "INFO starting\n" + MAF))
    assert doc["faults"][0]["process"] == "TP1" and doc["faults"][0]["address"] == "0x7f0000001000"


# ---- 4. memcheck's error heads, each a fault of its kind, with or without compute-sanitizer's `=========` ----
# the shape of a public report (a Marlin kernel's sanitizer run, 2025: "========= Illegal instruction /
# =========     at void Marlin<256,1,8,8,4,8>(...)+0x1180 / =========     by thread (131,0,0) in block (45,0,0)"),
# the hardware exceptions of the compute-sanitizer documentation and the CUDA-MEMCHECK manual's malloc/free errors
MARLIN = "void Marlin<256,1,8,8,4,8>(const int4 *, int4 *)"
HEADS = [("Illegal instruction", "memcheck-illegal-instruction"), ("Invalid PC", "memcheck-invalid-pc"),
         ("Misaligned address", "memcheck-misaligned-address"),
         ("Misaligned shared or local address", "memcheck-misaligned-shared-or-local-address"),
         ("Warp Out-of-range Address", "memcheck-out-of-range-address"),
         ("Hardware Stack Overflow", "memcheck-hardware-stack-overflow"),
         ("Malloc/Free error encountered : Double free", "memcheck-double-free"),
         ("Invalid __global__ read of size 4 bytes", "invalid-global-read")]


def _report(head: str, mark: str) -> str:
    return (f"{mark}{head}\n{mark}    at {MARLIN}+0x1180\n{mark}    by thread (131,0,0) in block (45,0,0)\n"
            f"{mark}    Address 0x7f0000001000 is misaligned\n")


def test_every_memcheck_head_is_a_fault_of_its_kind_that_claims_its_function():
    for head, kind in HEADS:
        for mark in ("========= ", ""):          # (a paste that cut compute-sanitizer's head off every line)
            doc = triage(_report(head, mark))
            assert [f["kind"] for f in doc["faults"]] == [kind], (head, mark)
            assert doc["verdict"]["claims"][0]["kernel"] in (MARLIN, f"device function {MARLIN} (a helper of "
                                                             "an unnamed kernel)"), (head, mark)


def test_a_cut_sanitizer_head_is_restored_only_on_a_report():
    text = "Illegal instruction\nthe run stopped there\n    at the end of the day\n"
    assert normalize(text) is text
    n = normalize(_report("Illegal instruction", ""))
    assert n.split("\n")[:2] == ["========= Illegal instruction", f"=========     at {MARLIN}+0x1180"]
    assert "compute-sanitizer's cut `=========` head was restored on 4 line(s)" in n.notes.sentences()


# ---- 3. a 0x1016 queue error's `Kernel Name:` through a redaction and a mail client's wrap ----
# ROCclr's queue analysis at an abort (rocvirtual.cpp AnalyzeAqlQueue, as in cms-sw/cmssw#50607 and #50391):
# ` Kernel Name: <mangled>` then `VGPU=.. SWq=.., HWq=.., id=N` and the packet's tab-indented fields. A poster
# cut lines (`...`) and a mail client wrapped at 80 columns: the mangled name, longer than a line, went alone
# onto the line after its label. (The name here is made up in the shape of alpaka's.)
NAME = ("_ZN6alpaka6detail9gpuKernelIN3foo13ScatterKernelENS_22AccGpuUniformCudaHipRtINS_8ApiHipRtESt17"
        "integral_constantImLm1EEjEEJPfPKfjEEEvT0_T_DpT1_")
QUEUE = [":0:rocdevice.cpp            :3020: 2208813034120 us: [pid:51022 tid:0x7f5a01ffe700] Callback: Queue "
         "0x7f58e4a00000 aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware "
         "exception. code: 0x1016", "...", " Kernel Name: " + NAME,
         "VGPU=0x149822731800 SWq=0x14a06a622000, HWq=0x14977a700000, id=4",
         "\tDispatch Header =0xb02 (type=2, barrier=1, acquire=1, release=1), setup=0",
         "\tgrid=[1024, 1, 1], workgroup=[256, 1, 1]", "\tprivate_seg_size=0, group_seg_size=0",
         "\tkernel_obj=0x1512f5489a80, kernarg_address=0x0x1512c8306100", "\tcompletion_signal=0x0, correlation_id=0",
         "Aborted (core dumped)"]


def _mail(lines: list[str], width: int = 80) -> str:
    """A mail client's wrap: words moved to the next line where they would pass the width."""
    out = []
    for ln in lines:
        cur = ""
        for w in ln.split(" "):
            if cur and len(cur) + 1 + len(w) > width:
                out.append(cur)
                cur = w
            else:
                cur = f"{cur} {w}" if cur else w
        out.append(cur)
    return "\n".join(out) + "\n"


def test_the_kernel_name_of_a_redacted_mail_wrapped_queue_error_is_kept():
    text = _mail(QUEUE)
    assert "Kernel Name:\n" + NAME in text          # (the wrap put the name alone on the next line)
    doc = triage(text)
    assert [(f["kind"], f["code"]) for f in doc["faults"]] == [("queue-error", "0x1016")]
    assert [c["kernel"] for c in doc["verdict"]["candidates"]] == [NAME]
    n = normalize(text)
    assert "Kernel Name: " + NAME in n.split("\n")


def test_a_label_line_is_joined_only_where_a_record_reads_the_two():
    text = _mail(["Kernel Name:", "...", "config:", "x" * 90])
    assert "config: " + "x" * 90 not in normalize(text)


def test_words_about_an_io_page_fault_are_no_fault():
    # a note that quotes the record's shape with its values elided (as an issue's prose does)
    text = ("# seen: 'AMD-Vi: Event logged [IO_PAGE_FAULT domain=... address=... flags=...]' lines on the device\n"
            "[  262.094625] amdgpu 0000:03:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0010 address=0x64a7f000 "
            "flags=0x0000]\n")
    assert faults(text) == [("iommu-io-page-fault", "0x64a7f000", "0000:03:00.0", None)]
