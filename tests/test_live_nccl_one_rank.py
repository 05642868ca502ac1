"""One rank's real ProcessGroupNCCL watchdog timeout (torch 2.11 on the H200, tests/data/live_h200_nccl_one_gpu:
all_reduce #4 queued behind a spinning kernel, the watchdog's 15 s timeout, the process aborted): triage of the
rank's stderr alone gives the hang with who waits in what, from the lines torch printed. Expected values are
those lines':
  `[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=1048576,
   NumelOut=1048576, Timeout(ms)=15000) ran for 15093 milliseconds before timing out.`   (off/rank0.log:3)
  `... last enqueued work: 4, last completed work: 3`, and with the recorder off `Stack trace of the failed
   collective not found, potentially because FlightRecorder is disabled`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIVE = ROOT / "tests" / "data" / "live_h200_nccl_one_gpu"


def _triage(path: Path) -> dict:
    p = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(path), "-f", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("arm, ran_ms", [("off", 15093), ("on", 15080)])
def test_one_ranks_live_watchdog_timeout_is_a_hang_naming_the_wait(arm, ran_ms):
    doc = _triage(LIVE / arm / "rank0.log")
    assert doc["verdict"]["kernel"] is None                     # no kernel is named by a watchdog line
    assert doc["hang"]["state"] == "hung"
    (c,) = doc["hang"]["collectives"]
    w = c["waiting"]
    assert (w["rank"], w["collective"], w["seq"], w["numel_in"]) == (0, "allreduce", 4, 1048576)
    assert c["process_group"] == "default_pg"
    assert f"{ran_ms / 1000:g} s" in c["why"] and "(timeout 15 s)" in c["why"]
    assert "last enqueued work 4, last completed 3" in c["why"]
    if arm == "off":
        assert "no flight record was kept" in c["why"]
    else:        # the recorder's stack of the collective: the script's own all_reduce call
        assert "one_gpu.py:21" in c["why"]
