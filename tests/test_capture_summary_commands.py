"""capture's closing summary prints the commands that open the bundle: they must run as printed
(copy-paste), also for an -o written with a trailing slash or holding a space."""

import os
import shlex
import subprocess
import sys

from .conftest import ROOT


def test_summary_commands_run_as_printed(tmp_path):
    out = tmp_path / "my bundle"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cap = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-o", f"{out}/", "--",
                          sys.executable, "-c", "print('served'); raise SystemExit(3)"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert cap.returncode == 3, cap.stderr
    line = next(x for x in cap.stderr.splitlines() if x.startswith("report: "))
    report, timeline = line[len("report: "):].split("    timeline: ")
    assert "//" not in line
    for printed in (report, timeline):
        argv = shlex.split(printed)
        assert argv[0] == "faultkit"
        ran = subprocess.run([sys.executable, "-m", "faultkit.cli", *argv[1:]], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, (printed, ran.stderr)
    assert (out / "timeline.pftrace").stat().st_size > 0       # where the printed command said
