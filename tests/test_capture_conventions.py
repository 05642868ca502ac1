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

from .conftest import live_processes, own_processes
from .test_capture import assert_status

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
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", py]
        if subprocess.run([*nobody, "-c", "import faultkit.cli"], cwd=work, env=env, capture_output=True).returncode:
            pytest.skip(f"uid 65534 cannot read this checkout ({ROOT}, e.g. a clone in a 0700 folder) or its packages")
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


# ---- #21 A6: mistakes are refused before anything is made ----

def test_unknown_option_is_a_usage_error_and_nothing_is_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = capture("--tiemout", "5", "-o", "x", "--", "true")
    assert res.exit_code == 2 and "No such option '--tiemout'" in res.output
    res = capture("-o", "x", "--", "--tiemout", "5", "true")
    assert res.exit_code == 2 and "No such option '--tiemout'" in res.output
    assert list(tmp_path.iterdir()) == []          # no bundle, not even in the working directory


def test_a_command_that_does_not_exist_is_refused_before_a_bundle(tmp_path):
    res = capture("-o", str(tmp_path / "b"), "--", "fk-no-such-program-7", "--flag")
    assert res.exit_code == 127
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == ["faultkit capture: fk-no-such-program-7: command not found"]
    plain = tmp_path / "notes.txt"
    plain.write_text("not a program\n")
    plain.chmod(0o644)
    res = capture("-o", str(tmp_path / "b"), "--", str(plain))
    assert res.exit_code == 126 and "not an executable file" in res.output
    assert not (tmp_path / "b").exists()


def test_a_bad_output_path_is_a_plain_error(tmp_path):
    res = capture("-o", "/proc/fk-no-bundle-here", "--", "true")
    assert res.exit_code == 1, res.output
    assert "-o /proc/fk-no-bundle-here" in res.output and "Traceback" not in res.output


# ---- #21 B: exit statuses and Ctrl-C like the tools users know ----

def test_timeout_exits_124_like_timeout1_and_none_means_no_limit(tmp_path):
    res = capture("--timeout", "1s", "-o", str(tmp_path / "a"), "--", sys.executable, "-c",
                  "import time; time.sleep(60)  # fk_124")
    assert res.exit_code == 124, res.output
    assert manifest(tmp_path / "a")["ended_by"] == "timeout"
    # nobody pressed Ctrl-C: the first press is the one that kills it now, not a second
    assert "stopping: SIGINT sent, SIGTERM in 5 s (Ctrl-C to kill it now)" in res.output
    assert "Ctrl-C again" not in res.output
    # Silence is a hang only where the stacks show one (an idle sleeper may be let run): either
    # ending of the capture's own limits is 124.
    res = capture("--hang-after", "1s", "--timeout", "5s", "-o", str(tmp_path / "h"), "--", sys.executable, "-c",
                  "import time; print('up', flush=True); time.sleep(60)  # fk_124h")
    assert res.exit_code == 124 and manifest(tmp_path / "h")["ended_by"] in ("hang", "timeout")
    assert "Ctrl-C again" not in res.output
    res = capture("--timeout", "0", "-o", str(tmp_path / "z"), "--", "true")
    assert res.exit_code == 2 and "'none' for no limit" in res.output and not (tmp_path / "z").exists()
    res = capture("--timeout", "none", "-o", str(tmp_path / "n"), "--", sys.executable, "-c",
                  "import time; time.sleep(1.5); raise SystemExit(5)")
    assert res.exit_code == 5 and manifest(tmp_path / "n")["ended_by"] == "target-exit"
    assert not own_processes("fk_124")


def test_ctrl_c_says_what_it_does_and_a_second_one_forces_the_stop(tmp_path):
    import signal
    import time
    out = tmp_path / "b"
    stubborn = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('stubborn up', flush=True)\n"
                "time.sleep(120)  # fk_two_ctrl_c\n")
    errors = tmp_path / "stderr.txt"
    with open(errors, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-o", str(out), "--", sys.executable,
                                 "-c", stubborn], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and "stubborn up" not in ((out / "server.log").read_text()
                                                           if (out / "server.log").exists() else ""):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    end = time.monotonic() + 30                    # what a stop collects first (stacks) comes before the steps
    while time.monotonic() < end and "stopping: SIGINT sent" not in errors.read_text():
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(60)
    stderr = errors.read_text()
    assert time.monotonic() - t0 < 4.0            # not the 5 s SIGTERM and 5 s SIGKILL deadlines
    assert proc.returncode == 130, stderr
    assert "stopping: SIGINT sent, SIGTERM in 5 s (Ctrl-C again to kill it now)" in stderr
    m = manifest(out)
    assert m["ended_by"] == "interrupted" and m["stopped_with"] == ["SIGINT", "SIGKILL"]
    assert m["exit_code"] == -9
    assert not own_processes("fk_two_ctrl_c")


def test_pid_reports_how_the_followed_server_ended(tmp_path):
    import time
    script = ("import os, sys, time\nprint('serving', flush=True)\n"
              "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\nos.abort()\n")
    go = tmp_path / "go"
    with open(tmp_path / "server.out", "wb") as log:
        server = subprocess.Popen([sys.executable, "-c", script, str(go)], stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(0.5)
        out = tmp_path / "b"
        fk = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-q", "--pid", str(server.pid),
                               "-o", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        end = time.monotonic() + 30
        while time.monotonic() < end and not (out / "manifest.json").exists():
            time.sleep(0.1)
        time.sleep(0.5)
        go.touch()                  # the server aborts; this test, its parent, reaps it only later
        output = fk.communicate(timeout=60)[0].decode()
        assert fk.returncode == 134, output          # as a shell shows an abort, not 0
        m = manifest(out)
        assert m["exit_code"] == -6 and m["exit"] == "killed by SIGABRT"
    finally:
        server.kill()
        server.wait()


def test_same_command_guard_compares_resolved_programs(tmp_path):
    import time
    real = os.path.realpath(sys.executable)
    if real == sys.executable:
        pytest.skip("the test's python is not reached through a link here")
    args = ["-c", "import time; time.sleep(30)  # fk_dup_resolved"]
    other = subprocess.Popen([real, *args])
    try:
        time.sleep(0.3)
        res = capture("-o", str(tmp_path / "b"), "--", sys.executable, *args)   # another spelling, one program
        assert res.exit_code == 1 and "already runs the same command" in res.output
    finally:
        other.kill()
        other.wait()


# ---- #28: the target's own status, nothing outlives a capture, never in the target's way ----

def test_a_target_killed_after_ignoring_sigint_and_sigterm_reports_137(tmp_path):
    out = tmp_path / "b"
    res = capture("--timeout", "1s", "-o", str(out), "--", sys.executable, "-c",
                  "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                  "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)  # fk_137")
    assert_status(res)                                                    # a valid manifest; exits as it says
    m = manifest(out)
    assert m["stopped_with"] == ["SIGINT", "SIGTERM", "SIGKILL"]
    assert m["exit_code"] == -9 and m["exit"] == "killed by SIGKILL"      # its own end, no wrapper shell's 143
    assert m["started_as"].startswith(sys.executable)                     # exec'd as given, no /bin/sh -c
    assert res.exit_code == 124                                           # the capture's timeout ended it
    assert not own_processes("fk_137")


DAEMON = """
import os, sys, time
tag, ready = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:                     # the daemon: no longer a descendant, no environment at all
        code = f"open({ready!r}, 'w').close(); import time; time.sleep(120)  # {tag}"
        os.execve(sys.executable, [sys.executable, "-c", code], {})
    os._exit(0)
while not os.path.exists(ready):
    time.sleep(0.02)
print("daemon started", flush=True)
"""


def _alive_with(tag: str) -> list[int]:
    """This test's daemon, found by its own unique tag (it has no environment to carry the test's)."""
    return [pid for pid, _ in live_processes(lambda pid, argv, env: any(a.endswith(f"# {tag}".encode())
                                                                          for a in argv[1:]))]


@pytest.mark.parametrize("held_by", ["cgroup", "subreaper"])
def test_a_double_forked_daemon_with_no_environment_is_found_and_stopped(tmp_path, monkeypatch, held_by):
    import uuid
    from faultkit.capture import cgroup
    if held_by == "subreaper":
        monkeypatch.setattr(cgroup.OwnCgroup, "create", classmethod(lambda cls, token: (None, "test: no cgroup")))
    tag = f"fk_daemon_{uuid.uuid4().hex}"
    script = tmp_path / "daemonize.py"
    script.write_text(DAEMON)
    out = tmp_path / "b"
    res = capture("--timeout", "60s", "-o", str(out), "--", sys.executable, str(script), tag, str(tmp_path / "ready"))
    assert res.exit_code == 0, res.output
    m = manifest(out)
    if held_by == "cgroup" and not m["tree_held_by"]["cgroup"]:
        pytest.skip(f"no cgroup of its own here: {m['tree_held_by']['cgroup_problem']}")
    procs = json.loads((out / "environ.json").read_text())
    daemon = [p for p in procs if p["cmdline"] and p["cmdline"][-1].endswith(f"# {tag}")]
    assert len(daemon) == 1 and daemon[0]["env"] == {}        # recorded, with the empty environment it had
    assert daemon[0]["pid"] in m["killed_leftovers"]
    assert not _alive_with(tag)


def test_a_sigkilled_capture_leaves_no_daemon_and_a_private_bundle(tmp_path):
    import signal
    import time
    import uuid
    tag = f"fk_daemon_{uuid.uuid4().hex}"
    script = tmp_path / "daemonize.py"
    script.write_text(DAEMON + "time.sleep(120)\n")
    out = tmp_path / "b"
    fk = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-q", "-o", str(out), "--", sys.executable,
                           str(script), tag, str(tmp_path / "ready")], cwd=ROOT)
    end = time.monotonic() + 30
    while time.monotonic() < end and not (tmp_path / "ready").exists():
        time.sleep(0.05)
    time.sleep(0.3)
    fk.send_signal(signal.SIGKILL)
    fk.wait()
    end = time.monotonic() + 15
    while time.monotonic() < end and manifest(out).get("state") != "cut":
        time.sleep(0.1)
    assert manifest(out)["state"] == "cut"

    def modes():
        found = {}
        for dirpath, dirs, files in os.walk(out):
            found.update({os.path.join(dirpath, d): 0o700 for d in dirs})
            found.update({os.path.join(dirpath, f): 0o600 for f in files})
        return {p: (os.stat(p).st_mode & 0o777, want) for p, want in found.items() if os.path.exists(p)}
    while time.monotonic() < end and any(have != want for have, want in modes().values()):
        time.sleep(0.1)
    wrong = {p: oct(have) for p, (have, want) in modes().items() if have != want}
    assert not wrong and len(modes()) >= 3
    held = manifest(out)["tree_held_by"]
    if held["cgroup"]:
        while time.monotonic() < end and _alive_with(tag):
            time.sleep(0.1)
        assert not _alive_with(tag)            # its cgroup held it when faultkit itself was killed
    else:
        for pid in _alive_with(tag):
            os.kill(pid, signal.SIGKILL)


def test_a_stuck_viewer_never_blocks_the_target(tmp_path):
    """faultkit's stdout is a pipe nobody reads (a paused `less`): the target's 50 MB still go
    through at once, the bundle has every byte, and what was not shown is counted and said."""
    import time
    out = tmp_path / "b"
    writer = ("import os, sys, time\nt = time.monotonic()\nblock = b'x' * 1023 + b'\\n'\n"
              "for _ in range(50 * 1024): sys.stdout.buffer.write(block)\nsys.stdout.flush()\n"
              "sys.stderr.write(f'fk-wrote-in {time.monotonic() - t:.2f}\\n')\n")
    t0 = time.monotonic()
    fk = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-o", str(out), "--", sys.executable, "-c",
                           writer], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    m = None
    end = time.monotonic() + 60
    while time.monotonic() < end:                     # stdout not read: the pipe stays full
        if (out / "manifest.json").exists() and manifest(out).get("state") == "finished":
            m = manifest(out)
            break
        time.sleep(0.1)
    took = time.monotonic() - t0
    _, err = fk.communicate(timeout=60)
    assert m is not None
    assert took < 30, took                            # the 50 MB behind a stuck pipe took 19.8 s before
    assert (out / "server.log").stat().st_size >= 50 * 1024 * 1024
    wrote = float((out / "server.log").read_bytes().rsplit(b"fk-wrote-in ", 1)[1].split()[0])
    assert wrote < 10, wrote
    assert m["live_output_dropped_bytes"] > 0
    assert b"bytes not shown" in err
