"""A host-only crash's report says what it has: a real Python process segfaulting under capture,
its black box (the in-process agent's faulthandler stacks) shown, so the report points never say
"No host stack was found" after them; and the CUDA core-dump paragraph (what the driver does after
writing a GPU core) only where CUDA was in play."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CUDA_LOG = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "cuda" / "h200_torch_plain.txt"
CUDA_PARAGRAPH = "With the CUDA core dump armed"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_a_python_segfault_has_its_stacks_and_no_cuda_paragraph(tmp_path):
    res = cli("capture", "-q", "-o", tmp_path / "b", "--", sys.executable, "-c", "import ctypes; ctypes.string_at(0)")
    assert res.returncode == 139, res.stderr
    md = cli("triage", tmp_path / "b").stdout
    assert "## Black box" in md and "string_at" in md       # faulthandler's frame of the crash
    assert "No host stack was found" not in md
    assert "the black box above holds every thread's stack" in md
    assert CUDA_PARAGRAPH not in md


def test_the_cuda_paragraph_stays_where_cuda_faulted(tmp_path):
    if not CUDA_LOG.exists():
        import pytest
        pytest.skip(f"shared corpus not found at {CUDA_LOG}")
    log = tmp_path / "cuda.txt"
    log.write_text("".join(ln for ln in CUDA_LOG.read_text().splitlines(True) if not ln.startswith("# ")))
    # a real capture whose target prints the H200 run's CUDA error output
    res = cli("capture", "-q", "-o", tmp_path / "b", "--", "cat", log)
    assert res.returncode == 0, res.stderr
    md = cli("triage", tmp_path / "b").stdout
    assert "CUDA error" in (tmp_path / "b" / "server.log").read_text()
    assert CUDA_PARAGRAPH in md


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def test_a_host_crash_is_named_and_no_debugger_is_blamed(tmp_path):
    # the tryout's command: crashy_server.py --rate 1 segfaults (ctypes.string_at(0)) with no tool attached
    res = cli("capture", "-q", "-o", tmp_path / "b", "--", sys.executable, SCRIPTS / "crashy_server.py", "--rate", "1")
    assert res.returncode == 139, res.stderr                    # 128 + SIGSEGV, like a shell
    import json
    note = json.loads((tmp_path / "b" / "manifest.json").read_text())["note"]
    assert note == "the target crashed on the host (killed by SIGSEGV), not on the GPU: no GPU fault in the evidence"
    md = cli("triage", tmp_path / "b").stdout
    assert "The target crashed on the host, not on the GPU (it was killed by SIGSEGV)." in md
    assert "debugger or tracer" not in md and "no fault reproduced" not in md


def test_a_clean_exit_with_nothing_attached_blames_no_debugger(tmp_path):
    res = cli("capture", "-q", "-o", tmp_path / "b", "--", "sleep", "0.2")
    assert res.returncode == 0, res.stderr
    import json
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["note"] == "no fault reproduced"
