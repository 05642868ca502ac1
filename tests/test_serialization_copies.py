"""The serialization check with AMD_SERIALIZE_KERNEL=3 alone does not call a copy beside a kernel a
failure: copies are serialized only by AMD_SERIALIZE_COPY. Through `triage --env` on rocprofv3
traces in the ROCm 7.0 formats (their headers as the corpus's samples write them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "rocprofv3"
KERNELS, COPIES = CORPUS / "sdk-docs-rocm7.0_kernel_trace.csv", CORPUS / "sdk-docs-rocm7.0_memory_copy_trace.csv"


def header(path: Path) -> str:
    return path.read_text().splitlines()[0]


@pytest.fixture
def trace(tmp_path):
    if not KERNELS.exists():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    d = tmp_path / "t"
    d.mkdir()
    # one kernel on Agent 1, and a host-to-device copy into Agent 1 while it runs
    (d / "4242_kernel_trace.csv").write_text(
        header(KERNELS) + "\n" + '"KERNEL_DISPATCH","Agent 1",1,1,4242,1,7,"consumer",1,1000000,3000000,'
        '0,0,8,0,16,64,1,1,1024,1,1\n')
    (d / "4242_memory_copy_trace.csv").write_text(
        header(COPIES) + "\n" + '"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",1,"Agent 0","Agent 1",2,1500000,2500000\n')
    return d


def triage(d, *env):
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(d), *[a for e in env for a in ("--env", e)]],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_a_copy_beside_a_kernel_is_not_a_kernel_serialization_failure(trace):
    md = triage(trace, "AMD_SERIALIZE_KERNEL=3")
    assert "1 copy-kernel overlap(s)" in md
    assert "did not take effect" not in md
    assert "copy-kernel overlap(s) not checked: copies are serialized only by AMD\\_SERIALIZE\\_COPY" in md or \
        "copy-kernel overlap(s) not checked: copies are serialized only by AMD_SERIALIZE_COPY" in md
    both = triage(trace, "AMD_SERIALIZE_KERNEL=3", "AMD_SERIALIZE_COPY=3")
    assert "1 overlap(s) remain although AMD" in both.replace("\\_", "_") and "did not take effect" in both
