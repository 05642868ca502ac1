"""What the registry keys an incident by and where it puts it, through `registry add/top/show` on
corpus evidence: compute-sanitizer's finding, not the error 719 the host saw after it; the kernel
log's PCI address, not the runtime's process-local GPU number. And the sanitizer's thread, block and
host launch frame in the Markdown report, as in the JSON."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("duckdb", reason="the registry's extra is not installed: pip install 'faultkit[fleet]'")

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SANITIZER = CORPUS / "cuda" / "h200_oob_sanitizer.txt"
POLARIS = CORPUS / "runtime" / "vmfault_notpresent_polaris_dmesg_rocm_issue_993.txt"
needs_corpus = pytest.mark.skipif(not SANITIZER.exists(), reason=f"shared corpus not found at {CORPUS}")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def copy(src: Path, folder: Path) -> Path:
    out = folder / src.name
    out.write_text("".join(ln for ln in src.read_text().splitlines(True) if not ln.startswith("# ")))
    return out


@needs_corpus
def test_the_registry_keys_by_the_finding_and_names_the_pci_address(tmp_path):
    san, polaris, db = copy(SANITIZER, tmp_path), copy(POLARIS, tmp_path), tmp_path / "r.duckdb"
    res = cli("registry", "add", "--db", db, san, polaris)
    assert res.returncode == 0, res.stderr
    rows = json.loads(cli("registry", "top", "--db", db, "-f", "json").stdout)["signatures"]
    text = san.read_text()
    assert "Invalid __global__ write of size 4 bytes" in text and "(error 719)" in text
    by_kind = {r["fault_kind"]: r for r in rows}
    assert "invalid-global-write" in by_kind, rows           # the sanitizer's finding heads it
    assert by_kind["invalid-global-write"]["kernel_key"] == "scatter_oob_kernel"    # "at scatter_oob_kernel(...)"
    assert not any(r["fault_kind"] == "gpu-runtime-error" for r in rows)
    # the Polaris log: ROCr says "GPU node-1", the kernel "amdgpu 0000:01:00.0: GPU fault detected"
    pci = re.search(r"amdgpu (\S+): GPU fault detected", polaris.read_text()).group(1)
    sig = next(r["signature"] for r in rows if r["fault_kind"] != "invalid-global-write")
    shown = json.loads(cli("registry", "show", sig, "--db", db, "-f", "json").stdout)
    assert [g["gpu"] for g in shown["gpus_touched"]] == [pci]


@needs_corpus
def test_the_sanitizers_thread_block_and_launch_frame_are_in_the_markdown(tmp_path):
    san = copy(SANITIZER, tmp_path)
    text = san.read_text()
    thread, block = re.search(r"by thread (\(\S+\)) in block (\(\S+\))", text).groups()
    frame = re.search(r"at kernel launch time\n=+\s+Host Frame: (.+)", text).group(1).strip()
    md = cli("triage", san).stdout
    line = next(ln for ln in md.splitlines() if ln.startswith("- sanitizer"))
    assert f"thread {thread} in block {block}" in line and f"`{frame}`" in line
