"""`amplify run`'s "Fastest to reproduce: ARM ... iterate there" names an amplifier arm only where it
crashes more often than the plain server: an arm that changed nothing (every trial crashed in both) is
no better place to iterate than the plain server itself."""

import json
import sys

from click.testing import CliRunner

from faultkit.cli import main

from .conftest import ROOT


def test_an_arm_that_changes_nothing_is_not_the_fastest(tmp_path):
    out = tmp_path / "amp"
    server = [sys.executable, str(ROOT / "scripts" / "crashy_server.py"), "--rate", "1", "--after", "0.1"]
    res = CliRunner().invoke(main, ["amplify", "run", "-q", "--arm", "launch-blocking", "-n", "2", "--timeout", "30s",
                                    "-o", str(out), "--", *server], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    report = json.loads((out / "amplify-report.json").read_text())
    arms = {a["arm"]: (a["crashes"], a["trials"]) for a in report["arms"]}
    # the server segfaults every time; no outcome of 2 rounds could decide, so one round ran
    assert arms == {"plain": (1, 1), "launch-blocking": (1, 1)}
    assert report["verdict"]["fastest"] is None
    assert "Fastest to reproduce" not in report["verdict"]["text"]
    assert "launch-blocking: no change (1/1 vs 1/1)" in report["verdict"]["text"]
