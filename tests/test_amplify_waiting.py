"""The report says how long the user waited against what plain trials alone would have needed for the same
result (issue 34): the decided arm's crashes, seen with the same error rate from plain trials at the plain
rate (its estimate, or its exact upper bound after 0/n), at the plain trials' measured mean length.
Checked against an independent computation (binomial sums by enumeration; scipy's beta quantile for the
0/n bound) and through the real CLI on the H200's recorded ten-against-ten run."""

import json
import math
import shutil
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner
from scipy import stats

from faultkit.amplify.sequential import plain_trials_for_crashes
from faultkit.cli import main

TEN = Path(__file__).parent / "data" / "live_h200_amplify" / "ten"


def by_enumeration(crashes: int, q: float, alpha: float) -> int:
    """The smallest N with P(Binomial(N, q) >= crashes) >= 1 - alpha, summing the binomial's terms."""
    n = crashes
    while True:
        at_least = sum(math.comb(n, k) * q ** k * (1 - q) ** (n - k) for k in range(crashes, n + 1))
        if at_least >= 1 - alpha - 1e-12:
            return n
        n += 1


@pytest.mark.parametrize("crashes,plain,alpha", [(10, (2, 10), 0.05), (4, (1, 7), 0.05), (6, (3, 6), 0.01),
                                                  (1, (1, 20), 0.05), (10, (0, 10), 0.05), (4, (0, 4), 0.05),
                                                  (3, (0, 30), 0.1)])
def test_against_enumeration(crashes, plain, alpha):
    got = plain_trials_for_crashes(crashes, plain, alpha)
    cp, n = plain
    q = cp / n if cp else stats.beta.ppf(1 - alpha, 1, n)      # Clopper-Pearson's one-sided bound for 0/n
    assert got["rate"] == pytest.approx(q, rel=1e-9)
    assert got["at_least"] == (cp == 0)
    assert got["trials"] == by_enumeration(crashes, q, alpha)


def test_the_h200_ten_run_through_the_cli(tmp_path):
    folder = tmp_path / "ten"
    shutil.copytree(TEN, folder)
    res = CliRunner().invoke(main, ["amplify", "report", str(folder), "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output[res.output.index("{"):])
    w = rep["waiting"]
    results = [json.loads(p.read_text()) for p in sorted(folder.glob("trial-*/result.json"))]
    plain = [r for r in results if r["arm"] == "plain"]
    assert (w["plain_crashes"], w["plain_trials"]) == (2, 10) == (sum(r["crashed"] for r in plain), len(plain))
    mean_plain = statistics.fmean(r["duration_s"] for r in plain)
    arm = w["arms"][0]
    assert arm["arm"] == "release" and arm["after_rounds"] == 10
    alone = arm["plain_alone"]
    n = by_enumeration(10, 0.2, 0.05)
    assert n == 76
    assert alone == {"trials": n, "rate": 0.2, "basis": "the plain rate's estimate 2/10", "at_least": False,
                     "crashes": 10, "seconds": round(n * mean_plain, 1)}
    res = CliRunner().invoke(main, ["amplify", "report", str(folder)], catch_exceptions=False)
    assert ("plain trials alone would need 76 to give its 10 crash(es) with a 95% chance (the plain rate's estimate "
            "2/10), 8 min at their mean length, against the 133 s waited here") in res.output
