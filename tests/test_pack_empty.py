"""`pack` of an empty folder is an error (the README's exit table: 1 when the bundle could not be used),
not an empty archive that looks like a shared incident. Seen by a new user: `faultkit pack emptydir -o
p.tar.gz` printed 'wrote p.tar.gz: 0 files' and exited 0. A folder of plain logs still packs."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pack(folder: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", "pack", str(folder), "-o", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_an_empty_folder_is_not_packed(tmp_path):
    (tmp_path / "empty").mkdir()
    p = _pack(tmp_path / "empty", tmp_path / "p.tar.gz")
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "nothing to pack" in p.stderr
    assert not (tmp_path / "p.tar.gz").exists()


def test_a_folder_of_logs_still_packs(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    p = _pack(logs, tmp_path / "p.tar.gz")
    assert p.returncode == 0, p.stderr
    with tarfile.open(tmp_path / "p.tar.gz") as tar:
        assert any(n.endswith("server.log") for n in tar.getnames())
