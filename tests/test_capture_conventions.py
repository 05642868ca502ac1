"""faultkit capture as a new user meets it (#21, #28): what it says when evidence cannot be had,
how it refuses mistakes, the exit statuses it promises, and that it never outlives or blocks its
target. Every test goes through the CLI; process checks look only at this test run's own tree."""

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.capture import kmsg
from faultkit.cli import main

from .conftest import own_processes

ROOT = Path(__file__).resolve().parent.parent


def capture(*args, env=None):
    return CliRunner(env=env).invoke(main, ["capture", *args])


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


# ---- #21 A4: an unreadable kernel log is said, at the start, in the summary and in the manifest ----

def _eperm():
    raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), kmsg.KMSG)


def test_unreadable_kernel_log_is_warned_and_recorded(tmp_path, monkeypatch):
    # What an unprivileged user gets under kernel.dmesg_restrict=1: the open of /dev/kmsg fails
    # with EPERM, and dmesg fails the same way (its message as util-linux prints it).
    monkeypatch.setattr(kmsg, "_open_kmsg", _eperm)
    monkeypatch.setattr(kmsg, "_privileged", lambda: False)
    monkeypatch.setattr(kmsg, "DMESG_RESTRICT", str(tmp_path / "restrict"))
    (tmp_path / "restrict").write_text("1\n")
    fail = [sys.executable, "-c", "import sys; sys.exit('dmesg: read kernel buffer failed: Operation not permitted')"]
    monkeypatch.setattr(kmsg, "SNAPSHOT_COMMANDS", (fail,))
    out = tmp_path / "b"
    res = capture("-o", str(out), "--", sys.executable, "-c", "print('fk-kmsg-target')")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    warn = [i for i, ln in enumerate(lines) if ln.startswith("WARNING: the kernel log is not readable")]
    target = lines.index("fk-kmsg-target")
    assert warn and warn[0] < target                      # said before the target runs
    assert "/dev/kmsg: Operation not permitted" in lines[warn[0]]
    assert "sysctl kernel.dmesg_restrict=0" in lines[warn[0]] and "CAP_SYSLOG" in lines[warn[0]]
    summary = [ln for ln in lines[target:] if ln.startswith("kernel log: missing")]
    assert summary and "sudo" in summary[0]
    kl = manifest(out)["kernel_log"]
    assert kl["readable"] is False and "dmesg_restrict" in kl["problem"]


def test_readable_kernel_log_is_recorded_as_readable(tmp_path):
    if not os.access(kmsg.KMSG, os.R_OK):
        pytest.skip("/dev/kmsg is not readable here")
    out = tmp_path / "b"
    res = capture("-o", str(out), "--", "true")
    assert res.exit_code == 0 and "kernel log" not in res.output
    kl = manifest(out)["kernel_log"]
    assert kl["readable"] is True and kl["problem"] is None and kl["follow"] == "kernel.log"


def _restricted() -> bool:
    try:
        return Path(kmsg.DMESG_RESTRICT).read_text().strip() == "1"
    except OSError:
        return False


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None or not _restricted()
                    or not Path("/usr/bin/python3").exists(),
                    reason="needs root, setpriv and kernel.dmesg_restrict=1 to run a capture as nobody")
def test_unprivileged_user_is_told_for_real(tmp_path):
    """As uid 65534 on this machine (dmesg_restrict=1, left as it is): the real EPERM."""
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", f"import sys; sys.exit(sys.version_info[:2] != {tuple(sys.version_info[:2])})"]
                      ).returncode:
        pytest.skip("the system python is another version than the test's: the packages would not load")
    site = [p for p in sys.path if p.endswith("site-packages")]
    work = Path(tempfile.mkdtemp(prefix="fk-nobody-"))
    try:
        os.chmod(work, 0o777)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *site]), "HOME": str(work)}
        res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", py, "-m", "faultkit.cli",
                              "capture", "-o", str(work / "b"), "--", "true"], cwd=work, env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "WARNING: the kernel log is not readable (/dev/kmsg: Operation not permitted" in res.stderr
        assert "kernel log: missing" in res.stderr
        assert manifest(work / "b")["kernel_log"]["readable"] is False
    finally:
        shutil.rmtree(work, ignore_errors=True)
