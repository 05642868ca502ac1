"""Evidence as users paste it, through `triage` (not only the parsers): every shape keeps its fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultkit.bundle import InputFile, Inputs, collect
from faultkit.export.report import to_json
from faultkit.ingest.kernel_log import parse_kernel_log
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
        assert len(got) == len(parsed.faults) + len(parsed.xids), path.name
