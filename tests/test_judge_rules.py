"""The rules that keep certainty honest (issue 22, item 4), each on evidence shaped like the
producers' documented output (../shared/reference/debugger_output.md, runtime_messages.md and
NVIDIA's compute-sanitizer manual): entry point vs device function, the producer's version,
a report that contradicts itself, a fault that did not stop the program."""

from __future__ import annotations

import json

from faultkit.bundle import InputFile, Inputs, collect
from faultkit.export.report import to_json
from faultkit.judge.claims import LIKELY
from faultkit.judge import rules
from faultkit.triage import build


def triage_text(text: str, name: str = "pasted.txt") -> dict:
    return to_json(build(Inputs(files=[InputFile(name, text.encode())])))


# rocgdb with precise memory on; the wave stopped inside a device function the kernel called.
PRECISE_IN_HELPER = """\
(gdb) set amdgpu precise-memory on
(gdb) run
(gdb) show amdgpu precise-memory
AMDGPU precise memory access reporting is on (currently enabled).

Thread 7 "python3" received signal SIGSEGV, Segmentation fault.
[Switching to thread 7, lane 0 (AMDGPU Lane 1:3:12:4/0 (20,0,0)[0,0,0])]
0x00007ffff5e01a24 in store_one (p=0x0, i=3) at kernels.hip:5
5	    p[i] = i;
"""
BACKTRACE = """\
(gdb) bt
#0  0x00007ffff5e01a24 in store_one (p=0x0, i=3) at kernels.hip:5
#1  0x00007ffff5e01b10 in scatter_kernel (p=0x0, n=1024) at kernels.hip:12
"""


def test_a_device_function_in_the_stop_frame_is_not_certain():
    doc = triage_text(PRECISE_IN_HELPER, "gdb.txt")
    v = doc["verdict"]
    assert (v["level"], v["kernel"]) == ("likely", "store_one")
    assert "may be a device function" in v["why"]
    (claim,) = [c for c in v["claims"] if c["kernel"]]
    assert claim["ceiling"] == "certain" and claim["level"] == "likely" and claim["entry_point"] is None


def test_the_outermost_frame_of_the_waves_backtrace_is_the_kernel():
    doc = triage_text(PRECISE_IN_HELPER + BACKTRACE, "gdb.txt")
    v = doc["verdict"]
    assert (v["level"], v["kernel"]) == ("certain", "scatter_kernel")
    (stop,) = doc["debugger_stops"]
    assert stop["function"] == "store_one" and "device function it called" in stop["kernel_basis"]
    assert v["claims"][0]["entry_point"] is True


SANITIZER_DEVICE_FRAMES = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at store_one(float *, int)+0x30 in kernels.cu:5
=========     by thread (0,0,0) in block (4096,0,0)
=========     Address 0x7f8e2aa00000 is out of bounds
=========     and is 8,192 bytes after the nearest allocation at 0x7f8e2a9fe000 of size 0 bytes
=========     Device Frame:scatter_kernel(float *, int)+0x120 in kernels.cu:12
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: main in kernels.cu:30 [0x8eae] in app
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaDeviceSynchronize.
========= Target application returned an error
========= ERROR SUMMARY: 2 errors
"""


def test_sanitizer_names_the_outermost_device_frame_as_the_kernel():
    doc = triage_text(SANITIZER_DEVICE_FRAMES, "sanitizer.txt")
    v = doc["verdict"]
    assert (v["level"], v["kernel"]) == ("certain", "scatter_kernel(float *, int)")
    assert "in its device function store_one(float *, int)" in v["why"]


MEMORY_FAULT_ERROR = (":0:rocdevice.cpp            :3781: 1322868210220 us:  Memory Fault Error [host: node17, GPU index: 0, "
                      "faulting addr: 0x7f3a2c400000, kernel: gemm_kernel]\n")


def test_rocclr_names_a_candidate_in_every_known_runtime_version(tmp_path):
    b = tmp_path / "bundle"
    b.mkdir()
    (b / "manifest.json").write_text(json.dumps({"schema": "faultkit.bundle/1", "command": "x",
                                                 "system": {"rocm_version": "7.2.1-81"}}))
    (b / "server.log").write_text(MEMORY_FAULT_ERROR)
    doc = to_json(build(collect([str(b)])))
    v = doc["verdict"]
    assert v["level"] == "candidates" and v["candidates"][0]["kernel"] == "gemm_kernel"
    claim = v["claims"][0]
    assert claim["basis"] == {"kind": "rocclr-memory-fault", "producer": "ROCclr", "version": "7.2.1-81"}
    assert any("this runtime is 7.2.1-81" in limit and "PR 4705" in limit for limit in claim["limits"])
    # unknown version: the old ceiling, said so
    doc = triage_text(MEMORY_FAULT_ERROR, "server.log")
    assert any("version is unknown" in limit for limit in doc["verdict"]["claims"][0]["limits"])


def test_a_producer_version_that_ships_the_fix_raises_the_ceiling(monkeypatch):
    # The mechanism, with the first fixed release stated: 7.2 is old, 7.3.0 and later are queue-accurate.
    ceiling, since, why = rules.VERSION_CEILINGS["rocclr-memory-fault"]
    monkeypatch.setitem(rules.VERSION_CEILINGS, "rocclr-memory-fault", (ceiling, (7, 3), why))
    assert rules.version_ceiling("rocclr-memory-fault", "7.2.1-81") == (None, why + "; this runtime is 7.2.1-81")
    assert rules.version_ceiling("rocclr-memory-fault", "7.3.0") == (LIKELY, None)
    doc = triage_text(MEMORY_FAULT_ERROR, "server.log")
    assert doc["verdict"]["level"] == "candidates"          # no version in a pasted log: still the old ceiling


SANITIZER_INSIDE = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 128 bytes
=========     at tail_copy(unsigned char *, int)+0xf0
=========     by thread (0,0,0) in block (0,0,0)
=========     Access to 0x7f5510ffff80 is out of bounds
=========     and is inside the nearest allocation at 0x7f550e000000 of size 52428800 bytes
========= Target application returned an error
========= ERROR SUMMARY: 1 error
"""


def test_a_report_that_contradicts_itself_keeps_a_candidate():
    v = triage_text(SANITIZER_INSIDE, "sanitizer.txt")["verdict"]
    assert v["level"] == "candidates" and v["candidates"][0]["kernel"] == "tail_copy(unsigned char *, int)"
    assert "contradicts itself" in v["why"] and "inside the allocation at 0x7f550e000000" in v["why"]


# racecheck/memcheck findings in a run that carried on: no API error, no 'Target application returned an
# error' (compute-sanitizer prints it for a non-zero exit), the program's own success line.
SANITIZER_WENT_ON = """\
========= COMPUTE-SANITIZER
========= Invalid __shared__ read of size 4 bytes
=========     at reduce_kernel(float *, int)+0x1b0 in reduce.cu:21
=========     by thread (31,0,0) in block (0,0,0)
=========     Address 0x100 is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: main in reduce.cu:40 [0x8eae] in reduce
=========
result: 523776 (PASSED)
========= ERROR SUMMARY: 1 error
"""


def test_a_fault_that_did_not_stop_the_program_is_a_finding_to_check():
    v = triage_text(SANITIZER_WENT_ON, "sanitizer.txt")["verdict"]
    assert v["level"] == "candidates" and v["candidates"][0]["kernel"] == "reduce_kernel(float *, int)"
    assert "went on" in v["why"] and "finding to check" in v["why"]
    stopped = SANITIZER_WENT_ON.replace("result: 523776 (PASSED)\n", "").replace(
        "========= ERROR SUMMARY", "========= Target application returned an error\n========= ERROR SUMMARY")
    assert triage_text(stopped, "sanitizer.txt")["verdict"]["level"] == "certain"


def test_every_real_report_lists_the_claims_behind_its_verdict(corpus, tmp_path):
    """Every corpus file and bundled sample: each incident's verdict carries its claims, every
    candidate points at its own, and a certain or likely verdict has a claim of that level for
    its kernel whose basis and origin say why."""
    from faultkit.judge.names import same_kernel
    from faultkit.triage import triage

    from .conftest import ROOT, corpus_copy
    from .corpus_digest import corpus_text_files

    paths = [str(corpus_copy(corpus / n, tmp_path / str(i))) for i, n in enumerate(corpus_text_files(corpus))]
    paths += [str(ROOT / "traces/sglang-tp2-mi300x"), str(ROOT / "tests/data/live_h200_coredump/fault")]
    sure = 0
    for p in paths:
        doc = to_json(triage([p]))
        for v in [doc["verdict"]] + [i["verdict"] for i in doc["incidents"]]:
            assert "claims" in v, p
            by_id = {c["id"]: c for c in v["claims"]}
            assert len(by_id) == len(v["claims"]), p          # one id per claim
            for c in v["candidates"]:
                assert c["claims"] and all(same_kernel(by_id[i]["kernel"], c["kernel"]) or
                                           not by_id[i]["named"] for i in c["claims"]), (p, c)
            if v["level"] in ("certain", "likely"):
                sure += 1
                behind = [c for c in v["claims"] if c["kernel"] and same_kernel(c["kernel"], v["kernel"])
                          and c["level"] == v["level"]]
                assert behind, (p, v["level"], v["kernel"])
                assert all(c["basis"]["kind"] and c["basis"]["producer"] and c["origin"] for c in behind), p
    assert sure >= 20          # the walk saw the corpus's sure verdicts, not an empty list


HOST_CRASH = """\
(gdb) run
Program received signal SIGSEGV, Segmentation fault.
0x0000555555555161 in parse_header (buf=0x0) at server.c:12
12	  return buf[0];
(gdb) bt
#0  0x0000555555555161 in parse_header (buf=0x0) at server.c:12
#1  0x00005555555551a2 in handle (fd=3) at server.c:30
#2  0x00005555555551e0 in main () at server.c:44
"""


def test_a_host_crash_under_a_debugger_shows_its_backtrace():
    from faultkit.export.report import render_markdown

    inc = build(Inputs(files=[InputFile("gdb.txt", HOST_CRASH.encode())]))
    assert inc.verdict.level == "unknown" and "a CPU crash, not a GPU fault" in inc.verdict.why
    md = render_markdown(inc)
    points = md.split("## Report points")[1].split("## ")[0]
    assert "No host stack was found" not in points
    assert "#1  0x00005555555551a2 in handle (fd=3) at server.c:30" in points and "stopped on SIGSEGV" in points


def test_the_unnamed_launch_and_the_kernel_its_thread_always_ran_next_are_tied():
    # the sample's thread 48291 ran rotary_embedding_kernel 12 times; the 11 earlier ones were each
    # followed by _fwd_grouped_kernel_stage1, the kernel ROCclr names
    from .conftest import TRACES
    from faultkit.triage import triage

    v = to_json(triage([str(TRACES / "sglang-tp2-mi300x")]))["verdict"]
    first, second = v["candidates"][:2]
    assert first["kernel"].startswith("kernel launched by thread 48291") and \
        second["kernel"] == "_fwd_grouped_kernel_stage1"
    assert "each of the 11 earlier dispatches of rotary_embedding_kernel was followed by " \
           "_fwd_grouped_kernel_stage1" in first["why"]
    assert "probably the same launch as candidate 2 (_fwd_grouped_kernel_stage1)" in first["why"]
    assert "probably the same launch as candidate 1" in second["why"]
