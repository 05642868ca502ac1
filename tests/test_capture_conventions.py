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


# ---- #21 A5: the live status line counts only the captured tree's kernel-log faults ----

def test_status_line_counts_only_the_captured_trees_faults(tmp_path, monkeypatch):
    """Kernel records arrive one per read, as from /dev/kmsg (a SEQPACKET socket keeps them apart):
    two GPU faults of another process (pid 1) and one Xid of the target; the status line counts 1."""
    import socket
    import threading
    import time
    from faultkit.capture import console as console_mod

    reader, writer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    reader.setblocking(False)
    monkeypatch.setattr(kmsg, "_open_kmsg", lambda: os.dup(reader.fileno()))
    monkeypatch.setattr(console_mod, "isatty", lambda stream: True)
    out = tmp_path / "b"
    go = tmp_path / "records-sent"

    def inject():
        log = out / "server.log"
        end = time.monotonic() + 30
        while time.monotonic() < end:
            text = log.read_text() if log.exists() else ""
            if "fk-status-pid " in text:
                pid = int(text.split("fk-status-pid ")[1].split()[0])
                break
            time.sleep(0.05)
        else:
            return
        for i, msg in enumerate([
                "amdgpu 0000:83:00.0: amdgpu: [gfxhub0] retry page fault (src_id:0 ring:24 vmid:8 pasid:32770, "
                "for process other pid 1 thread other pid 1)",
                "amdgpu 0000:83:00.0: amdgpu: [gfxhub0] retry page fault (src_id:0 ring:24 vmid:8 pasid:32770, "
                "for process other pid 1 thread other pid 1)",
                f"NVRM: Xid (PCI:0000:01:00): 31, pid={pid}, name=python3, channel 0x00000010, intr 00000000. "
                "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_00000000. Fault is of type FAULT_PDE "
                "ACCESS_TYPE_VIRT_READ"]):
            writer.send(f"3,{100 + i},{(5 + i) * 1_000_000},-;{msg}".encode())
        go.touch()

    t = threading.Thread(target=inject, daemon=True)
    t.start()
    script = (f"import os, time\nprint('fk-status-pid', os.getpid(), flush=True)\n"
              f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\ntime.sleep(2.5)\n")
    res = capture("-o", str(out), "--", sys.executable, "-c", script)
    t.join(5)
    reader.close()
    writer.close()
    assert res.exit_code == 0, res.output
    statuses = [s for s in res.output.replace("\r", "\n").split("\n") if s.replace("\x1b[K", "").startswith("[faultkit ")]
    assert statuses, repr(res.output[-1500:])
    last = statuses[-1]
    assert "1 kernel-log fault(s)" in last, statuses
    assert "Xid" in (out / "kernel.log").read_text()          # every record is kept; only the count is the tree's
    kl = manifest(out)["kernel_log"]
    assert (kl["faults_of_capture"], kl["faults_elsewhere"]) == (1, 2)
