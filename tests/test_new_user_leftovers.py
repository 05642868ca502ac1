"""What a new user met (issue 36): the registry counted one sample twice (its report and its
folder) and a folder holding a bundle as several incidents (the bundle's kernel history read as
evidence); a ROCclr callback line cut before `code:` lost its `[pid:N]` and stamp. Through the CLI,
on the repository's real H200 bundle and a real ROCclr line of the corpus."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CORPUS

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "tests" / "data" / "live_h200_tp2_fault"


def cli(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=None)


def top(db: Path) -> dict:
    r = cli("registry", "top", "--db", db, "-f", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_sample_is_one_incident_however_it_is_added(tmp_path):
    pytest.importorskip("duckdb", reason="the fleet extra is not installed")
    manifest = json.loads((BUNDLE / "manifest.json").read_text())
    host = manifest["system"]["host"]
    away = tmp_path / "elsewhere"
    away.mkdir()
    rep = away / "rep.json"
    assert cli("triage", BUNDLE, "-o", rep).returncode == 0
    folder = tmp_path / "incident"                  # a user's folder: the bundle and the report of it
    shutil.copytree(BUNDLE, folder / "bundle")
    shutil.copy(rep, folder / "rep.json")
    db = tmp_path / "r.duckdb"
    for what, cwd in [(rep, ROOT), (BUNDLE, ROOT), (folder, ROOT), ("rep.json", away), (folder / "bundle", ROOT)]:
        r = cli("registry", "add", what, "--db", db, "-v", cwd=cwd)
        assert r.returncode == 0, r.stderr
        assert re.search(rf": {re.escape(host)} \S+ pid 1884: signature", r.stderr), r.stderr   # filed on its host
    t = top(db)
    assert t["incidents"] == 1, t
    assert t["signatures"][0]["nodes"] == 1 and t["signatures"][0]["first_seen"] == pytest.approx(
        manifest["start"]["wall"])


def test_a_folder_holding_a_bundle_reads_it_as_the_bundle(tmp_path):
    folder = tmp_path / "incident"
    shutil.copytree(BUNDLE, folder / "bundle")
    (folder / "notes.txt").write_text("the server died at 16:50, restarted by hand\n")
    whole = json.loads(cli("triage", BUNDLE, "-f", "json").stdout)
    got = json.loads(cli("triage", folder, "-f", "json").stdout)
    names = [i["name"] for i in got["inputs"]]
    assert not any(n.endswith(("kernel-before.log", "kernel-after.log")) for n in names), names
    assert len(got["faults"]) == len(whole["faults"]) and len(got["incidents"]) == len(whole["incidents"]) == 1
    assert got["capture"] is not None and got["capture"]["command"] == whole["capture"]["command"]


def test_a_cut_callback_line_keeps_its_pid_and_stamp(tmp_path):
    src = CORPUS / "runtime" / "hsa_0x1016_iree_issue_17872.txt"
    if not src.exists():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    line = next(ln for ln in src.read_text().splitlines() if "[pid:" in ln and "aborting with" in ln)
    pid = re.search(r"\[pid:(\d+) ", line).group(1)
    us = re.search(r": (\d+) us: ", line).group(1)
    cut = line[: line.index(" code: 0x")]           # a paste cut before `code:`: the fallback record
    log = tmp_path / "server.log"
    log.write_text(cut + "\n")
    r = cli("triage", log, "-f", "json")
    faults = json.loads(r.stdout)["faults"]
    assert len(faults) == 1, faults
    assert faults[0]["pid"] == int(pid) and faults[0]["time"] == f"{us} us", faults[0]
    assert faults[0]["detail"]["status"] == "HSA_STATUS_ERROR_EXCEPTION"
