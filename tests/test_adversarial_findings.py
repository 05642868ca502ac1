"""What the adversarial pass of issue 36 (scripts/adversarial_pass.py, docs/adversarial-pass.md)
found, each through the real CLI: a test per defect that failed before its fix."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULT = ("[  100.000000] amdgpu 0000:03:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:0 vmid:1 "
         "pasid:32769, for process python3 pid 4242 thread python3 pid 4242)\n"
         "[  100.000001] amdgpu 0000:03:00.0: amdgpu:   in page starting at address 0x00007f0000001000 from client 27\n")


def cli(*args, env=None, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=cwd)


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_folders_made_above_an_output_are_0700(tmp_path):
    """`--spool new/deep/spool` and `capture -o new/deep/b` made `new` and `new/deep` 0755
    (mkdir(parents=True) gives the upper folders the umask's mode); only the last was 0700."""
    log = tmp_path / "kern.log"
    log.write_text(FAULT)
    res = cli("watch", "--mode", "npd", "--node", "n1", "--kernel-log", log, "--from-start",
              "--spool", tmp_path / "w" / "deep" / "spool", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.returncode in (0, 1), res.stderr
    for d in (tmp_path / "w", tmp_path / "w" / "deep", tmp_path / "w" / "deep" / "spool"):
        assert mode(d) == 0o700, (d, oct(mode(d)))
    res = cli("capture", "-q", "--timeout", "30s", "-o", tmp_path / "c" / "deep" / "b", "--", "true",
              env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    for d in (tmp_path / "c", tmp_path / "c" / "deep", tmp_path / "c" / "deep" / "b"):
        assert mode(d) == 0o700, (d, oct(mode(d)))
    assert json.loads((tmp_path / "c" / "deep" / "b" / "manifest.json").read_text())["state"] == "finished"
