"""A cut archive (a download or an upload stopped early) is an input that could not be read whole: the
README's exit table says 1 with the reason on stderr, and the report still covers the members before the
damage. Seen by a new user: `head -c 3000 incident.tar.gz > cut.tar.gz; faultkit triage cut.tar.gz` exited 0
with nothing on stderr."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIVE = ROOT / "tests" / "data" / "live_h200_sanitizer" / "memcheck_helper.txt"


def _cut_archive(tmp_path: Path) -> Path:
    whole = tmp_path / "incident.tar.gz"
    with tarfile.open(whole, "w:gz") as tar:
        tar.add(LIVE, arcname="memcheck_helper.txt")
        noise = os.urandom(256 << 10)          # incompressible: the cut lands inside this member
        info = tarfile.TarInfo("noise.bin")
        info.size = len(noise)
        tar.addfile(info, io.BytesIO(noise))
    cut = tmp_path / "cut.tar.gz"
    data = whole.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    return cut


def test_a_cut_archive_exits_1_with_the_reason_and_keeps_what_was_read(tmp_path):
    cut = _cut_archive(tmp_path)
    p = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(cut), "-f", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "archive cut or unreadable" in p.stderr and str(cut) in p.stderr
    rep = json.loads(p.stdout)
    # the member before the damage was read: its Device Frame line names the kernel
    # (`Device Frame: helper_oob_kernel(int *)+0x30 in sanitizer_formats.cu:40`)
    assert rep["verdict"]["kernel"] == "helper_oob_kernel(int *)"


def test_timeline_of_inputs_not_read_whole_exits_1_and_says_why(tmp_path):
    empty = tmp_path / "emptydir"
    empty.mkdir()
    for src in (empty, _cut_archive(tmp_path)):
        out = tmp_path / f"{src.name}.pftrace"
        p = subprocess.run([sys.executable, "-m", "faultkit.cli", "timeline", str(src), "-o", str(out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 1, (src, p.returncode, p.stderr)
        assert f"error: {src}:" in p.stderr
        assert out.exists()                    # the trace of what could be read is still written
