"""`pack` shares the capture's window of the kernel log by default, not the machine's whole kernel
history: a real crashed program captured here, its bundle packed through the real CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile

import pytest

PROGRAM = r"""
#include <stdio.h>
int main(void) { volatile int *p = 0; puts("about to crash"); fflush(stdout); *p = 42; return 0; }
"""


def cli(*args):
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def members(path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_pack_keeps_the_captures_window_of_the_kernel_log(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    (tmp_path / "crash.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-o", str(tmp_path / "crash"), str(tmp_path / "crash.c")], check=True)
    bundle = tmp_path / "b"
    res = cli("capture", "-q", "-o", bundle, "--", tmp_path / "crash")
    assert res.returncode == 139, res.stderr
    before = (bundle / "kernel-before.log").read_text()
    if not before.strip():
        pytest.skip("the kernel log is not readable here (dmesg_restrict): no history to leave out")
    # history, not this crash: a line of the start snapshot that the end snapshot still has (a busy
    # machine's ring buffer can roll the boot's first lines out during the capture)
    kept = set((bundle / "kernel-after.log").read_text().splitlines())
    history = next((ln for ln in reversed(before.splitlines()) if ln.strip() and ln in kept), None)
    if history is None:
        pytest.skip("the kernel ring buffer rolled over during the capture: no history line left to leave out")
    res = cli("pack", bundle, "-o", tmp_path / "i.tar.gz")
    assert res.returncode == 0, res.stderr
    got = members(tmp_path / "i.tar.gz")
    assert "kernel-before.log" not in got
    assert not any(history.encode() in data for name, data in got.items() if name.startswith("kernel"))
    listed = json.loads(got["pack-manifest.json"])
    why = {f["name"]: f["why"] for f in listed["left_out"]}
    assert "--with-kernel-history" in why["kernel-before.log"]
    after = got.get("kernel-after.log", b"").decode()
    # what the end snapshot adds over the start one: the window, as triage reads it
    new = [ln for ln in (bundle / "kernel-after.log").read_text().splitlines() if ln and ln not in set(before.splitlines())]
    assert [ln for ln in after.splitlines() if ln] == new
    res = cli("pack", bundle, "-o", tmp_path / "all.tar.gz", "--with-kernel-history")
    assert res.returncode == 0, res.stderr
    whole = members(tmp_path / "all.tar.gz")
    assert history.encode() in whole["kernel-before.log"] and history.encode() in whole["kernel-after.log"]
