"""Kernels a debugger lists as launched away from any fault line (#33 item 2, basis `launched`):
a candidate, never more. The transcript is cuda-gdb's own `info cuda kernels` (the corpus's)."""

from __future__ import annotations

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.triage import build

from .conftest import CORPUS, corpus_bytes

FILE = "gdb/cuda_gdb_info_cuda_kernels_old.txt"


def test_info_cuda_kernels_row_is_a_launched_candidate(corpus):
    doc = to_json(build(Inputs(files=[InputFile(FILE, corpus_bytes(CORPUS / FILE))])))
    v = doc["verdict"]
    assert v["level"] == "candidates" and v.get("kernel") is None
    (c,) = [c for c in v["claims"] if c["basis"]["kind"] == "launched"]
    # the row: `*  5  -  0  6 Active 0x00000002 (4801,1,1) (64,1,1) render(nthreads=307200, ...)`
    assert c["kernel"] == "render"
    assert (c["ceiling"], c["level"]) == ("candidates", "candidates")
    assert "kernel 5, grid 6, device 0, Active" in c["why"]


def test_the_manuals_invocation_without_parentheses_gives_the_name(corpus):
    name = "gdb/doc_examples/doc_cuda_gdb_info_cuda_kernels.txt"
    doc = to_json(build(Inputs(files=[InputFile(name, corpus_bytes(CORPUS / name))])))
    # the row: `* 1 - 0 2 Active 0x00ffffff (240,1,1) (128,1,1) acos_main parms=...`
    (c,) = [c for c in doc["verdict"]["claims"] if c["basis"]["kind"] == "launched"]
    assert c["kernel"] == "acos_main"
