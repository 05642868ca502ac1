"""`amplify report` of a folder whose trial records are nested past the JSON parser (the fourth
adversarial pass, issue 36): the trial's process records and agent headers are read as none, never
an internal error. The repository's real H200 amplify folder, the real CLI."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "tests" / "data" / "live_h200_amplify" / "ten"


def test_records_nested_past_the_parser_are_no_records(tmp_path):
    folder = tmp_path / "ten"
    shutil.copytree(FOLDER, folder)
    trials = sorted(p for p in folder.iterdir() if p.name.startswith("trial-"))
    for t in trials:
        (t / "environ.json").write_text("[" * 100_000)
        (t / "agent").mkdir(exist_ok=True)
        (t / "agent" / "1234.header.json").write_text("[" * 100_000)
    r = subprocess.run([sys.executable, "-m", "faultkit.cli", "amplify", "report", str(folder)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 70 and "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0, r.stderr[-2000:]
