"""faultkit triage end to end: the bundled sample, the three formats, the JSON contract."""

import json
import tarfile

from click.testing import CliRunner

from faultkit.cli import main

from .conftest import TRACES

SAMPLE = str(TRACES / "sglang-tp2-mi300x")


def run(*args):
    result = CliRunner().invoke(main, ["triage", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_sample_json_contract_and_verdict():
    report = json.loads(run(SAMPLE, "--format", "json"))
    assert report["schema"] == "faultkit.triage/1"
    v = report["verdict"]
    assert set(v) >= {"level", "kernel", "candidates", "why"}
    # ROCclr names the kernel but walks every queue: a candidate, not a certainty.
    assert v["level"] == "candidates" and v["kernel"] is None
    # the trace's launch with no completion record on the faulting GPU, then ROCclr's name
    assert v["candidates"][0]["kernel"].startswith("kernel launched by thread 48291 (correlation id 104")
    assert "on the faulting GPU (node 3)" in v["candidates"][0]["why"]
    assert v["candidates"][1]["kernel"] == "_fwd_grouped_kernel_stage1"
    assert "consistent with the kernel log" in v["candidates"][1]["why"]
    assert report["trace"]["address"]["verdict"] == "freed"
    for f in report["faults"]:
        assert set(f) >= {"source", "kind", "address", "code", "gpu", "pid", "process", "time", "detail"}
        assert f["address"] is None or (f["address"].startswith("0x") and f["address"] == f["address"].lower())
    runtime = [f for f in report["faults"] if f["source"] == "runtime" and f["gpu"] == "node-3"][0]
    kernel = [f for f in report["faults"] if f["source"] == "kernel-log" and f["address"] == "0x7f3a2c400000"][0]
    assert runtime["address"] == kernel["address"] and runtime["detail"]["group"] == kernel["detail"]["group"]
    assert kernel["detail"]["client_name"] == "TCP" and kernel["pid"] == 48213
    # the Python frame is a report point, never a candidate
    assert any("scheduler.py:987" in r["frame"] for r in report["report_points"])
    assert not any("scheduler" in c["kernel"] for c in v["candidates"])
    assert any("precise-memory" in s for s in report["next_steps"])
    kinds = {i["name"].rsplit("/", 1)[-1]: i["kinds"] for i in report["inputs"]}
    assert kinds["server.log"] == ["runtime-log"] and kinds["dmesg.txt"] == ["kernel-log"]
    assert kinds["48213_kernel_trace.csv"] == ["trace:dispatches"]


def test_sample_markdown_sections():
    md = run(SAMPLE)
    for heading in ("## Verdict", "## Fault facts", "## What the faults mean", "## Kernel-log faults, decoded",
                    "## Report points", "## Next steps"):
        assert heading in md
    assert "`_fwd_grouped_kernel_stage1`" in md and "a shader's vector memory access" in md


def test_html_is_self_contained_and_escaped(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("Memory Fault Error [GPU index: 0, faulting addr: 0x1000, kernel: void k<<script>alert(1)</script>>(int)]\n"
                   "Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x1000. Reason: Unknown.\n")
    out = tmp_path / "r.html"
    run(str(log), "--format", "html", "-o", str(out))
    page = out.read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.startswith("<!DOCTYPE html>") and "<link" not in page and "src=" not in page


def test_detects_kind_from_content_not_name(tmp_path):
    (tmp_path / "server.log").write_text("[ 1.0] amdgpu 0000:01:00.0: amdgpu: [gfxhub0] no-retry page fault "
                                         "(src_id:0 ring:24 vmid:8 pasid:32770, for process p pid 1 thread p pid 1)\n")
    (tmp_path / "dmesg.txt").write_text("HW Exception by GPU node-1 (Agent handle: 0x1) reason :GPU Hang\n")
    report = json.loads(run(str(tmp_path), "--format", "json"))
    kinds = {i["name"].rsplit("/", 1)[-1]: i["kinds"] for i in report["inputs"]}
    assert kinds == {"server.log": ["kernel-log"], "dmesg.txt": ["runtime-log"]}
    assert {f["kind"] for f in report["faults"]} == {"page-fault", "gpu-hang"}


def test_tarball_missing_path_and_non_utf8(tmp_path):
    src = TRACES / "sglang-tp2-mi300x"
    tar_path = tmp_path / "incident.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(src / "server.log", arcname="incident/server.log")
        tar.add(src / "dmesg.txt", arcname="incident/dmesg.txt")
    bad = tmp_path / "bad.log"
    bad.write_bytes(b"\xff\xfe\x00Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x2000. Reason: Unknown.\n")
    # A missing input: exit 1 (README, exit statuses), and the report covers everything else.
    result = CliRunner().invoke(main, ["triage", str(tar_path), str(bad), str(tmp_path / "missing.txt"), "--format", "json"])
    assert result.exit_code == 1 and "missing.txt: no such file" in result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"]["candidates"][0]["kernel"] == "_fwd_grouped_kernel_stage1"
    assert any(f["address"] == "0x2000" for f in report["faults"])
    problems = " ".join(report["problems"])
    assert "no such file" in problems and "UTF-8" in problems


def test_debug_agent_single_kernel_is_likely_not_certain(tmp_path):
    log = tmp_path / "agent.log"
    log.write_text("wave_0: pc=0x7ff734dcbf3c (kernel_code_entry=0x7ff736b8c040 <my_kernel>, kernargs=0x1) "
                   "(stopped, reason: MEMORY_VIOLATION)\n"
                   "Memory access fault by GPU node-4 (Agent handle: 0x1) on address 0x7ffb61f02000. Reason: Unknown.\n")
    v = json.loads(run(str(log), "--format", "json"))["verdict"]
    assert v["level"] == "likely" and v["kernel"] == "my_kernel" and "precise memory" in v["why"]


def test_copy_engine_fault_demotes_kernel_candidates(tmp_path):
    (tmp_path / "d.txt").write_text(
        "[1.0] amdgpu 0000:3d:00.0: amdgpu: [mmhub0] no-retry page fault (src_id:0 ring:160 vmid:3 pasid:32790)\n"
        "[1.0] amdgpu 0000:3d:00.0: amdgpu:   in page starting at address 0x0000709843600000 from IH client 0x12 (VMC)\n"
        "[1.0] amdgpu 0000:3d:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00360251\n")
    (tmp_path / "s.log").write_text("[aiter] LoadKernel: _ZN5aiter3fooE hsaco: /x.co\n")
    report = json.loads(run(str(tmp_path), "--format", "json"))
    c = report["verdict"]["candidates"][0]
    assert c["score"] < 0.3 and "copy engine" in c["why"]
    assert any("SDMA" in s for s in report["next_steps"])


def test_no_fault_inputs(tmp_path):
    (tmp_path / "ok.log").write_text("all good\n")
    report = json.loads(run(str(tmp_path / "ok.log"), "--format", "json"))
    assert report["verdict"]["level"] == "unknown" and report["faults"] == []


def test_html_verdict_is_a_coloured_badge_at_the_top(tmp_path):
    page = run(SAMPLE, "--format", "html")
    badge = page.index('<span class="level level-candidates">candidates</span>')
    assert badge < page.index("<h2>") and ".level-candidates{background:" in page


def test_next_steps_follow_the_evidence(tmp_path):
    from faultkit.bundle import InputFile, Inputs
    from faultkit.triage import build

    fault = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. "
             "Reason: Page not present or supervisor privilege.\n")
    plain = " ".join(build(Inputs(files=[InputFile("a.log", fault.encode())])).next_steps)
    assert "SGLang" not in plain and "trials run" in plain
    assert "HIP_LAUNCH_BLOCKING=1 is not the same" in plain and "host-side race" in plain
    sglang = " ".join(build(Inputs(files=[InputFile("a.log", ("[2026-11-20 10:17:42 TP1] sglang scheduler\n"
                                                                 + fault).encode())])).next_steps)
    assert "--disable-overlap-schedule" in sglang
