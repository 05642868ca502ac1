"""`faultkit amplify report FOLDER -o FILE` writes the format -o's extension names, as triage, trials report,
show and doctor do: `-o r.json` was Markdown in a .json file."""

import json
import sys

from click.testing import CliRunner

from faultkit.cli import main

from .conftest import ROOT


def test_report_format_follows_the_output_extension(tmp_path):
    out = tmp_path / "amp"
    server = [sys.executable, str(ROOT / "scripts" / "crashy_server.py"), "--rate", "1", "--after", "0.1"]
    res = CliRunner().invoke(main, ["amplify", "run", "-q", "--arm", "launch-blocking", "-n", "1", "--timeout", "30s",
                                    "-o", str(out), "--", *server], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    as_json, as_md = tmp_path / "r.json", tmp_path / "r.md"
    for f in (as_json, as_md):
        res = CliRunner().invoke(main, ["amplify", "report", str(out), "-o", str(f)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
    doc = json.loads(as_json.read_text())
    assert doc["schema"] == "faultkit.amplify.report/1"
    assert {a["arm"]: (a["crashes"], a["trials"]) for a in doc["arms"]} == {"plain": (1, 1), "launch-blocking": (1, 1)}
    assert as_md.read_text().startswith("# faultkit amplify report")
    res = CliRunner().invoke(main, ["amplify", "report", str(out), "-f", "json"], catch_exceptions=False)
    assert json.loads(res.output)["schema"] == "faultkit.amplify.report/1"      # -f still decides without -o
