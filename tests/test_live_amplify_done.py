"""Issue 34's Done-when as it ran on the H200 (session 9, `scripts/live_amplify_nvidia.sh $OUT done`, 22:05-22:10 UTC,
torch 2.11.0+cu130): plain 0/10, poison 10/10, kept in tests/data/live_h200_amplify/done. `faultkit amplify report`
is replayed on it through the real CLI and its figures are checked against an independent computation from the
trials' own records: scipy's Fisher exact test on the 2x2 table, the plain-alone bound from its formula
(Clopper-Pearson's one-sided upper bound after 0/n is 1 - alpha^(1/n); the plain trials needed are the smallest
N with P(Binomial(N, q) >= crashes) >= 1 - alpha, summed term by term), the rounds' wall times and the median
time to crash. The block naming needs the rings and cores, which the device machine could not bring back (files
over 4 MiB): the replay says so, and the recorded report's naming is checked as recorded."""

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
DONE = Path(__file__).parent / "data" / "live_h200_amplify" / "done"
ALPHA = 0.05


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def trials() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(DONE.glob("trial-*/result.json"))]


def plain_needed(crashes: int, q: float, alpha: float) -> int:
    n = crashes
    while sum(math.comb(n, k) * q ** k * (1 - q) ** (n - k) for k in range(crashes, n + 1)) < 1 - alpha - 1e-12:
        n += 1
    return n


def test_the_kept_run_is_the_done_when():
    rs = trials()
    by_arm = {a: [r for r in rs if r["arm"] == a] for a in ("plain", "poison")}
    assert len(rs) == 20 and {a: (sum(r["outcome"] == "crash" for r in x), len(x)) for a, x in by_arm.items()} == \
        {"plain": (0, 10), "poison": (10, 10)}
    # every trial counted: its arm's variables verified in /proc of the GPU process
    assert all(r["env"]["ok"] and r["env"]["scope"] == "gpu-processes" for r in rs)
    assert all(r["env"]["wanted"] == {"FAULTKIT_AMPLIFY_POISON": "0x7f"} for r in by_arm["poison"])
    # the agent armed the poison in each poison trial's worker (its header), and nowhere in plain
    for t in sorted(DONE.glob("trial-*")):
        armed = [a for h in (t / "agent").glob("*.json") for a in json.loads(h.read_text()).get("armed", [])]
        assert ("amplify-poison" in armed) == t.name.endswith("-poison"), t.name


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("replay") / "done"
    shutil.copytree(DONE, folder)
    r = cli("amplify", "report", str(folder), "-f", "json")
    assert r.returncode == 0, r.stderr
    return folder, json.loads(r.stdout)


def test_amplify_report_replayed_through_the_cli_against_scipy_and_the_formulas(replayed):
    folder, rep = replayed
    rs = trials()
    plain = [x for x in rs if x["arm"] == "plain"]
    poison = [x for x in rs if x["arm"] == "poison"]
    arms = {a["arm"]: a for a in rep["arms"]}
    assert (arms["plain"]["crashes"], arms["plain"]["trials"], arms["poison"]["crashes"], arms["poison"]["trials"]) \
        == (0, 10, 10, 10)
    p = stats.fisher_exact([[10, 0], [0, 10]], alternative="two-sided").pvalue
    assert math.isclose(p, 1.0825088224469e-05, rel_tol=1e-9)          # 2 / C(20, 10)
    assert math.isclose(arms["poison"]["p_vs_plain"], p, rel_tol=1e-9)
    assert arms["poison"]["state"] == "decided" and arms["poison"]["stopped_after_round"] == 10
    assert arms["poison"]["median_time_to_crash_s"] == statistics.median(x["time_to_crash_s"] for x in poison)
    assert round(arms["poison"]["median_time_to_crash_s"], 2) == 5.75
    w = rep["waiting"]
    rounds = json.loads((DONE / "rounds.json").read_text())
    assert w["waited_s"] == round(sum(x["wall_s"] for x in rounds.values()), 1) == 167.7
    q = 1 - ALPHA ** (1 / 10)
    assert math.isclose(q, stats.beta.ppf(1 - ALPHA, 1, 10), rel_tol=1e-9)
    n = plain_needed(10, q, ALPHA)
    mean_plain = statistics.fmean(x["duration_s"] for x in plain)
    alone = w["arms"][0]["plain_alone"]
    assert n == 58 and alone["trials"] == n and alone["at_least"] is True and alone["crashes"] == 10
    assert math.isclose(alone["rate"], q, rel_tol=1e-12)
    assert alone["seconds"] == round(n * mean_plain, 1) == 363.5
    assert rep["verdict"]["classes"] == ["memory-reuse"]
    # the recorded report (written on the H200) has the same figures
    recorded = json.loads((DONE / "amplify-report.json").read_text())
    assert recorded["waiting"] == w
    keep = ("crashes", "trials", "p_vs_plain", "median_time_to_crash_s", "state", "stopped_after_round", "not_counted")
    assert [{k: a[k] for k in keep} for a in recorded["arms"]] == [{k: a[k] for k in keep} for a in rep["arms"]]
    md = cli("amplify", "report", str(folder))
    assert md.returncode == 0, md.stderr
    assert ("plain trials alone would need at least 58 to give its 10 crash(es) with a 95% chance (the plain rate's "
            "one-sided 95% upper bound after 0/10), 6 min at their mean length, against the 168 s waited here") in md.stdout
    assert "poisoning freed blocks raised the crash rate from 0/10 to 10/10 (Fisher p = 1.1e-05)" in md.stdout


def test_the_block_named_on_the_h200_and_why_the_replay_cannot(replayed):
    """On the H200 the report named the freed table in 3 of 3 crashed trials looked at (the rings and cores were
    there); the kept folders have neither, and the replay says that rather than naming anything."""
    recorded = json.loads((DONE / "amplify-report.json").read_text())
    bb = next(a for a in recorded["arms"] if a["arm"] == "poison")["black_box"]
    assert bb[0] == ("name the block: the 67,108,864-byte block allocated at /work/main/scripts/uaf_server.py:180 "
                     "table, freed before the fault, in 3 of 3 crashed trial(s) looked at (trial-001-poison, "
                     "trial-003-poison, trial-004-poison)")
    # the table's site as the worker's own site table names it
    sites = (DONE / "trial-001-poison" / "agent" / "627.sites.tsv").read_text().splitlines()
    assert "3\t/work/main/scripts/uaf_server.py:180 table\t/work/main/scripts/uaf_server.py:180 table" in sites
    got = next(a for a in replayed[1]["arms"] if a["arm"] == "poison")["black_box"]
    assert got == ["name no block (" + "; ".join(
        f"{t}: no fault address in the evidence (no GPU core in the trial, and no trusted kernel-log address)"
        for t in ("trial-001-poison", "trial-003-poison", "trial-004-poison")) + ")"]
