"""The plan's test is the report's test: the sidedness is chosen once (`trials run --alternative`,
default one-sided 'the arm named first crashes more often'), recorded in plan.json, and used by the
report; `trials plan` counts power and 'crashes needed against 0' by the same rule. p values are
checked against scipy.stats.fisher_exact, not against faultkit's own arithmetic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import fisher_exact

ROOT = Path(__file__).resolve().parent.parent
CRASHY = f"{sys.executable} {ROOT / 'scripts' / 'crashy_server.py'}"


def cli(*args):
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                         timeout=300)
    return res


def test_plan_says_4_of_15_decides_and_the_report_of_4_of_15_decides():
    plan = json.loads(cli("trials", "plan", "--rate", "base=0.4", "--rate", "fix=0", "-n", "15", "-f", "json").stdout)
    assert plan["alternative"] == "greater" and plan["crashes_needed_vs_zero"] == 4
    res = cli("trials", "report", "--counts", "base=4/15", "--counts", "fix=0/15", "-f", "json")
    assert res.returncode == 0, res.stderr
    c = json.loads(res.stdout)["comparisons"][0]
    p = fisher_exact([[4, 11], [0, 15]], alternative="greater").pvalue
    assert c["alternative"] == "greater" and c["p"] == pytest.approx(p, rel=1e-9) and p <= 0.05
    assert c["conclusion"].startswith("base crashes more often than fix (4/15 vs 0/15; Fisher one-sided")
    md = cli("trials", "report", "--counts", "base=4/15", "--counts", "fix=0/15").stdout
    assert "No difference shown" not in md and "base crashes more often than fix" in md
    # one fewer crash: the plan's rule says it does not decide, and so does the report
    three = json.loads(cli("trials", "report", "--counts", "base=3/15", "--counts", "fix=0/15", "-f", "json").stdout)
    assert fisher_exact([[3, 12], [0, 15]], alternative="greater").pvalue > 0.05
    assert three["comparisons"][0]["conclusion"].startswith("No difference shown: 3/15 vs 0/15 (Fisher one-sided")
    # chosen two-sided, 4/15 vs 0/15 does not decide (p = 0.0996), and the plan needs 5 crashes
    two = json.loads(cli("trials", "report", "--counts", "base=4/15", "--counts", "fix=0/15", "--alternative",
                         "two-sided", "-f", "json").stdout)["comparisons"][0]
    assert two["p"] == pytest.approx(fisher_exact([[4, 11], [0, 15]]).pvalue, rel=1e-9)
    assert two["conclusion"].startswith("No difference shown")
    plan2 = json.loads(cli("trials", "plan", "--rate", "base=0.4", "--rate", "fix=0", "-n", "15", "--alternative",
                           "two-sided", "-f", "json").stdout)
    assert plan2["alternative"] == "two-sided" and plan2["crashes_needed_vs_zero"] == 5


@pytest.mark.parametrize("alternative", [None, "two-sided"])
def test_the_sidedness_is_recorded_in_plan_json_and_used_by_the_report(tmp_path, alternative):
    out = tmp_path / "t"
    res = cli("trials", "run", "--arm", f"base={CRASHY} --rate 1 --after 0.1 --run-for 0.2",
              "--arm", f"fix={CRASHY} --rate 0 --run-for 0.2", "-n", "2", "--timeout", "30s", "-o", out,
              *(["--alternative", alternative] if alternative else []))
    assert res.returncode == 0, res.stderr
    spec = json.loads((out / "plan.json").read_text())["spec"]
    assert spec["alternative"] == (alternative or "greater")
    rep = json.loads(cli("trials", "report", out, "-f", "json").stdout)
    assert [(a["crashes"], a["trials"]) for a in rep["arms"]] == [(2, 2), (0, 2)]
    c = rep["comparisons"][0]
    assert c["alternative"] == spec["alternative"]
    assert c["p"] == pytest.approx(fisher_exact([[2, 0], [0, 2]], alternative=spec["alternative"]).pvalue, rel=1e-9)
    # the report of a folder takes its plan's test, never another
    assert cli("trials", "report", out, "--alternative", "two-sided").returncode == 2
    # resuming without saying it keeps the plan's choice; saying another is a different experiment
    again = cli("trials", "run", "--arm", f"base={CRASHY} --rate 1 --after 0.1 --run-for 0.2",
                "--arm", f"fix={CRASHY} --rate 0 --run-for 0.2", "-n", "2", "--timeout", "30s", "-o", out)
    assert again.returncode == 0, again.stderr
    other = "greater" if alternative == "two-sided" else "two-sided"
    clash = cli("trials", "run", "--arm", f"base={CRASHY} --rate 1 --after 0.1 --run-for 0.2",
                "--arm", f"fix={CRASHY} --rate 0 --run-for 0.2", "-n", "2", "--timeout", "30s", "-o", out,
                "--alternative", other)
    assert clash.returncode == 1 and "sidedness" in clash.stderr


def test_a_plan_written_before_the_choice_was_recorded_reports_two_sided(tmp_path):
    from faultkit.trials.records import PlanSpec
    spec = PlanSpec.from_json({"arms": [], "n": 1, "seed": 0, "client": None, "port": None, "trial_timeout_s": 1.0})
    assert spec.alternative == "two-sided"
