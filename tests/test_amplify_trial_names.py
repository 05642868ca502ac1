"""What `amplify run` prints about a trial names the trial's folder, as the verdict and the report do:
"trial 3: ... arm caching-off" beside a verdict naming trial-002-caching-off sent users to the wrong
folder (progress counts from 1, folders from 000)."""

import json
import re
import sys

from click.testing import CliRunner

from faultkit.cli import main


def test_progress_and_report_name_the_folders_that_exist(tmp_path):
    out = tmp_path / "amp"
    script = tmp_path / "idle.py"
    script.write_text("import time\ntime.sleep(0.5)\n")        # never imports torch: poison never reached
    res = CliRunner().invoke(main, ["amplify", "run", "--arm", "poison", "-n", "3", "--timeout", "30s",
                                    "-o", str(out), "--", sys.executable, str(script)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    started = re.findall(r"^trial \d+: round \d+, arm (\S+), in (trial-\d{3}-\S+) \.\.\.$", res.output, re.M)
    warned = re.findall(r"^warning: trial \d+ \((trial-\d{3}-\S+)\) NOT COUNTED", res.output, re.M)
    assert len(started) == 4 and {a for a, _ in started} == {"plain", "poison"}   # 2 rounds: poison stops
    for arm, folder in started:
        assert json.loads((out / folder / "result.json").read_text())["arm"] == arm
    assert warned and set(warned) == {f for a, f in started if a == "poison"}
    listed = re.findall(r"^- poison, (trial-\d{3}-poison): ", (out / "amplify-report.md").read_text(), re.M)
    assert sorted(listed) == sorted(warned)
