"""The triage of two saved stack dumps of a hung process: its report-points section does not say "No host
stack was found" under a hang analysis that shows every thread's stack."""

import shutil
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from faultkit.cli import main

DEADLOCK = """import threading, time
a, b = threading.Lock(), threading.Lock()
def one():
    with a:
        time.sleep(0.3)
        with b:
            pass
def two():
    with b:
        time.sleep(0.3)
        with a:
            pass
ts = [threading.Thread(target=one), threading.Thread(target=two)]
[t.start() for t in ts]
print("started", flush=True)
[t.join() for t in ts]
"""


def test_dumps_of_a_deadlock_are_not_called_no_host_stack(tmp_path):
    pyspy = shutil.which("py-spy") or shutil.which("py-spy", path=str(__import__("pathlib").Path(sys.executable).parent))
    if not pyspy:
        pytest.skip("py-spy not installed")
    prog = tmp_path / "deadlock.py"
    prog.write_text(DEADLOCK)
    p = subprocess.Popen([sys.executable, str(prog)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "started\n"
        time.sleep(1.0)                                          # both threads now wait on the other's lock
        dumps = []
        for k in (1, 2):
            d = subprocess.run([pyspy, "dump", "--pid", str(p.pid)], capture_output=True, text=True, timeout=30)
            if d.returncode != 0:
                pytest.skip(f"py-spy cannot read the process here: {d.stderr.strip()[:200]}")
            f = tmp_path / f"d{k}.txt"
            f.write_text(d.stdout)
            dumps.append(str(f))
            time.sleep(1.0)
    finally:
        p.kill()
        p.wait()
    res = CliRunner().invoke(main, ["triage", *dumps])
    assert res.exit_code == 0, res.output
    assert "## Hang analysis" in res.output and "lock-wait deadlock" in res.output
    points = res.output.split("## Report points", 1)[1].split("\n## ", 1)[0]
    assert "No host stack was found" not in points
    assert "the hang analysis above holds every thread's stack" in points
