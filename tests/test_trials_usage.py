"""A trials experiment of one arm is a usage error (exit 2, as the README's exit-status table says
for wrong arguments), refused before any folder is made; seen by a new user as exit 1."""

import subprocess
import sys


def test_one_arm_is_a_usage_error(tmp_path):
    out = tmp_path / "t"
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "trials", "run", "--arm", "base=python3 -c pass",
                          "-n", "1", "-o", str(out)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "give at least two arms" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()
    # two arms with one name are one arm
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "trials", "run", "--arm", "a=python3 -c pass",
                          "--arm", "a=python3 -c pass", "-n", "1", "-o", str(out)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and not out.exists()
