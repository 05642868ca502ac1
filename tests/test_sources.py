"""The evidence seam (faultkit/sources/): one registry of sources, and what is derived from it.

Every stop word of every source ends a live capture (the recorder's prefilter and line pattern
find it) and is kept by the parsers' prefilter of a big log; the two lines that drifted apart
before the seam (ROCr's memory error, NVIDIA Warp's CUDA error) end a real capture of a target
that prints them and then idles."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import main
from faultkit.fault_lines import FAULT_LINE, PREFILTER
from faultkit.ingest.prefilter import scan
from faultkit.ingest.runtime_log import parse_runtime_log
from faultkit.sources import REGISTRY, detect_kinds, stop_words


def _c(fmt: str, *args) -> str:
    """printf for the producers' format strings: %p as 0x%x, %u as %d."""
    py = re.sub(r"%([dusxp])", lambda m: "0x%x" if m[1] == "p" else "%d" if m[1] == "u" else "%" + m[1], fmt)
    return py % args


# ROCr runtime.cpp (rocm-systems 1b1610f), the hsa_amd_memory_error callback's line
MEMORY_CRITICAL = _c("Memory critical error by agent node-%u (Agent handle: %p) on address %p. Reason: Memory in use. ",
                     2, 0x55d1c0, 0x7f5c21000000)
# NVIDIA Warp, warp/native/warp.cu check_cuda_result: "Warp CUDA error %u: %s (%s:%d)"; 719 = cudaErrorLaunchFailure
WARP_719 = _c("Warp CUDA error %u: %s (%s:%d)", 719, "unspecified launch failure", "warp.cu", 223)


def test_the_registry_names_each_source_once():
    names = [s.name for s in REGISTRY]
    assert len(names) == len(set(names))
    assert {"runtime-log", "kernel-log", "debugger", "sanitizer", "traces", "cores", "stacks", "agent",
            "capture"} <= set(names)


# A stop word is a parser's anchor, or a part of one (the capture stops on more than the parser reads):
# each word, with the rest of the parser's anchor, is a line the parsers' prefilter keeps from a big log.
ANCHOR_OF = {"Fatal Python error": "Fatal Python error: ", "OFFLOAD ERROR": "OFFLOAD ERROR: memory access fault",
             "illegal memory access": "an illegal memory access was encountered"}
# The shell's report of a signal: nothing for the parser to read (the capture's exit status carries it).
UNREAD = {"Segmentation fault"}


@pytest.mark.parametrize("word", stop_words())
def test_every_stop_word_ends_a_capture_and_passes_the_parsers_prefilter(word):
    line = f"[rank0]: {ANCHOR_OF.get(word, word)} 0x7f0000001000 (more text)"
    assert FAULT_LINE.search(line)
    assert PREFILTER.hits(b"x" * 70000 + line.encode() + b"\n")[0]
    kept = scan(io.BytesIO(("INFO nothing\n" * 5000 + line + "\n" + "INFO nothing\n" * 5000).encode()), "x.log")
    assert (line.encode() in kept.data) != (word in UNREAD), f"{word!r}: the parsers' prefilter and the capture differ"


@pytest.mark.parametrize("line, text", [(MEMORY_CRITICAL, "Memory in use"), (WARP_719, "unspecified launch failure")])
def test_the_lines_that_drifted_are_faults_to_the_parser_and_to_the_capture(line, text):
    log = parse_runtime_log(line + "\n")
    assert any(text in (f.reason or "") for f in log.faults) or any(text in e.text for e in log.host_errors)
    assert FAULT_LINE.search(line) and PREFILTER.hits(line.encode())[0]
    assert "runtime-log" in detect_kinds(line)


@pytest.mark.parametrize("line", [MEMORY_CRITICAL, WARP_719])
def test_a_real_capture_ends_on_the_line(tmp_path, line):
    out = tmp_path / "b"
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["capture", "--timeout", "60s", "-o", str(out), "--", sys.executable, "-c",
                                    f"import time; print({line!r}, flush=True); time.sleep(60)"])
    assert res.exit_code != 2, res.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "fault", (m["ended_by"], res.output[-400:])
    assert line.strip() in m["fault_line"]
    assert time.monotonic() - t0 < 45


# ---------------- a new source as one file: compute-sanitizer's findings ----------------

SHAPES = Path(__file__).parent / "data" / "source_shapes"


def _triage_json(tmp_path, name: str) -> dict:
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["triage", str(SHAPES / name), "-o", str(out)])
    assert out.exists(), res.output
    return json.loads(out.read_text())


def test_a_racecheck_report_alone_is_a_gpu_fault_of_its_kind(tmp_path):
    # racecheck_current_template_kernel.txt:2 `Error: Race reported between Write access at
    # tbl::io::detail::delta_decoder::decode_block(...)+0xa3f0 in delta_decode.cuh:288`, then two `and Read
    # access` lines [8 hazards] [24 hazards]; :6 a second race in next_block(bool) at delta_decode.cuh:190 [4 hazards]
    d = _triage_json(tmp_path, "racecheck_current_template_kernel.txt")
    decode = ("tbl::io::detail::delta_decoder::decode_block(unsigned int, const cooperative_groups::__v1::"
              "thread_block_tile<(unsigned int)32, cooperative_groups::__v1::thread_block> &)")
    assert [f["kind"] for f in d["faults"]] == ["racecheck-race", "racecheck-race"]
    assert d["faults"][0]["detail"]["source"] == "delta_decode.cuh:288" and d["faults"][0]["detail"]["offset"] == "0xa3f0"
    assert (d["verdict"]["level"], d["verdict"]["kernel"]) == ("likely", decode)
    first = d["sanitizer_findings"][0]
    assert (first["accesses"], first["hazards"]) == (["Write", "Read", "Read"], 32)
    assert d["sanitizer_findings"][1]["kernel"] == "tbl::io::detail::delta_decoder::next_block(bool)"
    # a finding names the function of the access, which may be a device function: never certain
    claim = d["verdict"]["claims"][0]
    assert claim["basis"]["kind"] == "sanitizer-finding" and claim["entry_point"] is None


@pytest.mark.parametrize("name, kind, kernel, where", [
    # initcheck_2021_file_line_func.txt:2-3 `Uninitialized __global__ memory read of size 4 bytes`,
    # `at 0x5d0 in /work/demo/blur.cu:37:blur(float const*, int, int, float*)`
    ("initcheck_2021_file_line_func.txt", "initcheck-uninitialized-read", "blur(float const*, int, int, float*)",
     "/work/demo/blur.cu:37"),
    # synccheck_2019_device_frame.txt: `Barrier error detected. Divergent thread(s) in warp`, `at 0x3a10 in
    # .../synchronization.jl:12:ptxcall_reduceKernel_7`
    ("synccheck_2019_device_frame.txt", "synccheck-barrier-error", "ptxcall_reduceKernel_7",
     "/home/u/.julia/packages/GPUKern/Qx3r1/src/device/intrinsics/synchronization.jl:12"),
])
def test_initcheck_and_synccheck_findings_name_their_kernel(tmp_path, name, kind, kernel, where):
    d = _triage_json(tmp_path, name)
    assert [f["kind"] for f in d["faults"]] == [kind]
    assert d["faults"][0]["detail"]["source"] == where
    assert (d["verdict"]["level"], d["verdict"]["kernel"]) == ("likely", kernel)


def test_the_findings_have_a_report_section(tmp_path):
    out = tmp_path / "r.md"
    CliRunner().invoke(main, ["triage", str(SHAPES / "racecheck_hazard_warn_cuda_memcheck.txt"), "-o", str(out)])
    md = out.read_text()
    assert "## compute-sanitizer findings" in md and "RAW-hazard" in md and "warp_prefix.cuh:88" in md


def test_no_source_meets_an_internal_error_on_any_corpus_file(corpus):
    """Every corpus file through every source that reads it: a caught reader bug is a failure here
    (an AttributeError in the kernel log's cut-block handling was silently a problem line on
    dmesg/gfx1102_vmid0_kernel_cpc_fault_rocm_issue_2766.txt until this test)."""
    from faultkit.triage import TriageOptions, triage

    from .conftest import no_internal_errors
    files = [p for p in sorted(corpus.rglob("*")) if p.is_file()]
    assert len(files) > 100
    for f in files:
        no_internal_errors(triage([str(f)], TriageOptions(open_cores=False)).problems)


def test_each_json_key_has_one_source_and_the_report_writes_it():
    """A source names the report's JSON keys it owns; no key has two owners, and the report of a
    bundle with every kind of record (the live agent bundle: server log, kernel log, core transcript,
    black box) writes each of them."""
    from faultkit.export.report import to_json
    from faultkit.triage import TriageOptions, triage
    owned = [k for s in REGISTRY for k in s.json_keys]
    assert len(owned) == len(set(owned))
    doc = to_json(triage([str(Path(__file__).parent / "data" / "live_h200_agent" / "uaf")], TriageOptions(open_cores=False)))
    assert set(owned) <= set(doc), set(owned) - set(doc)
    assert doc["black_box"]["owners"][0]["verdict"] == "freed"      # rendered by sources/agent.py
