"""The real CLI, as a user runs it: exit statuses, folders created for outputs, one line for an
internal error."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "traces" / "sglang-tp2-mi300x"


@pytest.fixture(autouse=True)
def own_home(tmp_path, monkeypatch):
    """Each test's faultkit writes its cache (internal-error tracebacks, scratch) and data (the
    default registry) under the test's own folder, never the user's ~/.cache/faultkit."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    return home


def fk(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_capture_exits_like_a_shell(tmp_path):
    assert fk("capture", "-o", tmp_path / "a", "--", sys.executable, "-c", "import os; os.kill(os.getpid(), 11)"
              ).returncode == 128 + 11
    assert fk("capture", "-o", tmp_path / "b", "--", "no-such-command-xyz").returncode == 127
    assert fk("capture", "-o", tmp_path / "c", "--", "sh", "-c", "exit 3").returncode == 3
    ok = fk("capture", "-o", tmp_path / "d", "--", "true")
    assert ok.returncode == 0 and f"faultkit timeline {tmp_path / 'd'}" in ok.stderr


def test_ctrl_c_ends_the_capture_with_130(tmp_path):
    # a command no other run on this machine has (the stale-server guard looks machine-wide: a shared
    # `sleep 60` made this test end with 1 once)
    p = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-o", str(tmp_path / "b"), "--", "sleep",
                          f"60.{uuid.uuid4().int % 10**6:06d}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    end = time.monotonic() + 20
    while not (tmp_path / "b" / "server.times.tsv").exists() and time.monotonic() < end:
        time.sleep(0.1)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    status = p.wait(60)
    assert status == 130, p.stderr.read().decode(errors="replace")[-3000:]   # seen once as 1 in CI: say why
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["state"] == "finished"


def test_triage_statuses(tmp_path):
    missing = fk("triage", SAMPLE, tmp_path / "nope.log", "-o", tmp_path / "deep" / "er" / "r.json", "--format", "json")
    assert missing.returncode == 1 and "nope.log" in missing.stderr
    doc = json.loads((tmp_path / "deep" / "er" / "r.json").read_text())       # the rest is still reported
    assert doc["faults"] and any("no such file" in p for p in doc["problems"])
    assert fk("triage", SAMPLE).returncode == 0
    assert fk("triage", SAMPLE, "--fail-on", "any-fault").returncode == 4
    assert fk("triage", SAMPLE, "--fail-on", "certain").returncode == 0           # the sample is not certain


def test_writers_create_their_folders(tmp_path):
    t = fk("timeline", SAMPLE, "-o", tmp_path / "x" / "y" / "t.json")
    assert t.returncode == 0 and json.loads((tmp_path / "x" / "y" / "t.json").read_text())["traceEvents"]
    assert fk("timeline", tmp_path / "missing", "-o", tmp_path / "t.pftrace").returncode == 2


def test_internal_error_is_one_line_with_a_saved_traceback(tmp_path, monkeypatch, own_home):
    code = ("import faultkit.triage as t, faultkit.cli as c\n"
            "def boom(*a, **k): raise RuntimeError('planted')\n"
            "t.triage = boom\n"
            "import sys; sys.argv = ['faultkit', 'triage', sys.argv[1]]; c.run()\n")
    res = subprocess.run([sys.executable, "-c", code, str(SAMPLE)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 70 and "Traceback" not in res.stderr
    line = res.stderr.strip()
    assert line.startswith("faultkit: internal error: RuntimeError: planted; details in ")
    saved = Path(line.split("details in ")[1])
    assert "RuntimeError: planted" in saved.read_text()
    assert saved.parent == own_home / ".cache" / "faultkit"          # the test's own cache, not the user's


def test_capture_on_a_terminal_shows_output_and_a_status_line(tmp_path):
    import pexpect
    script = "import time\nfor i in range(4): print('tick', i, flush=True); time.sleep(0.8)"
    child = pexpect.spawn(sys.executable, ["-m", "faultkit.cli", "capture", "-o", str(tmp_path / "b"), "--",
                                           sys.executable, "-c", script], cwd=str(ROOT), timeout=60,
                          dimensions=(24, 160))
    child.expect(r"tick 0")
    child.expect(r"\[faultkit 0:00:0\d\] \d+ processes, 0 on a GPU, 0 debugger\(s\) attached, 0 kernel-log "
                 r"fault\(s\), 0 core\(s\)")
    child.expect(r"tick 3")
    child.expect(r"bundle: .*\(target-exit, exit 0\)")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_capture_quiet_shows_nothing_of_the_target(tmp_path):
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-q", "-o", str(tmp_path / "b"), "--",
                          sys.executable, "-c", "print('hello from the target')"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "hello" not in res.stdout + res.stderr and "bundle:" not in res.stderr
    assert "hello from the target" in (tmp_path / "b" / "server.log").read_text()


def test_capture_without_a_terminal_passes_the_output_through_without_a_status_line(tmp_path):
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-o", str(tmp_path / "b"), "--",
                          sys.executable, "-c", "print('hello from the target')"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert res.stdout == "hello from the target\n"
    assert "[faultkit" not in res.stderr and "bundle:" in res.stderr


def test_triage_verbose_says_what_each_input_was_read_as(tmp_path):
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", "-v", "traces/sglang-tp2-mi300x", "-f",
                          "json", "-o", str(tmp_path / "r.json")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert re.search(r"read \S+server\.log \([\d,]+ bytes\): runtime-log", res.stderr)
    assert re.search(r"read \S+48213_kernel_trace\.csv \([\d,]+ rows\): trace:dispatches", res.stderr)
