"""`faultkit show incident.tar.gz` counts the files the archive holds and their bytes, as it does for the
bundle folder: a pack of an 11-file bundle was shown as "1 files, 3.3 KB" (the archive itself)."""

import json
import subprocess
import sys

from click.testing import CliRunner

from faultkit.cli import main


def test_show_of_a_pack_counts_its_members(tmp_path):
    b = tmp_path / "bundle"
    cap = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-q", "-o", str(b), "--", sys.executable,
                          "-c", "print('served ' * 400)"], capture_output=True, text=True, timeout=120)
    assert cap.returncode == 0, cap.stderr
    pack = tmp_path / "incident.tar.gz"
    assert CliRunner().invoke(main, ["pack", str(b), "-o", str(pack)]).exit_code == 0
    res = CliRunner().invoke(main, ["show", str(pack), "--format", "json"])
    assert res.exit_code == 0, res.output
    shown = json.loads(res.output)
    # the archive's regular members as tar(1) lists them (size is the third column)
    listed = subprocess.run(["tar", "-tvzf", str(pack)], capture_output=True, text=True, check=True).stdout
    files = [ln.split() for ln in listed.splitlines() if ln.startswith("-")]
    assert shown["files"] == len(files) >= 5
    assert shown["bytes"] == sum(int(f[2]) for f in files) > 2400       # server.log alone holds 2,801 bytes
