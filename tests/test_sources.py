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
