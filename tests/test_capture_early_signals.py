"""A signal at any moment of `faultkit capture` (issue 36): while faultkit itself imports, before
the target is launched, while it runs: a finished bundle that says it was interrupted, by which
signal, with the shell's status. Real signals to the real CLI, sent once faultkit catches SIGTERM
(its caught-signal mask in /proc says when: before faultkit's first line no program can hold one)."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faultkit import layout

from .conftest import own_processes

ROOT = Path(__file__).resolve().parent.parent


def _caught(pid: int) -> int:
    """The process's caught-signals mask (SigCgt in /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def _wait_catching(pid: int, sig: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not _caught(pid) & (1 << (sig - 1)):
        assert time.monotonic() < deadline, "faultkit never caught the signal"
        time.sleep(0.002)


def _capture(out: Path, marker: str, seconds: float = 20, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-q", "--no-agent", "-o", str(out),
                             "--", sys.executable, "-c",
                             f"import time; print('up', flush=True); time.sleep({seconds})  # {marker}"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _running(out: Path) -> bool:
    try:
        return "up" in (out / "server.log").read_text()
    except OSError:
        return False


def _when(proc: subprocess.Popen, out: Path, moment: str) -> None:
    """Wait for a moment of the capture: `held` faultkit holds SIGTERM while its bundle folder is
    not made yet (it is still importing: only the command line's hold can be in place), `held+S`
    S seconds after that, `running` the target's first line in server.log."""
    if moment.startswith("held"):
        _wait_catching(proc.pid, signal.SIGTERM)
        assert not out.exists(), "SIGTERM was caught only once the bundle folder was made: no early hold"
        time.sleep(float(moment[5:] or 0))
    else:
        deadline = time.monotonic() + 30
        while not _running(out):
            assert time.monotonic() < deadline, "the target never started"
            time.sleep(0.01)


MOMENTS = ["held", "held+0.1", "held+0.25", "held+0.5", "held+0.9", "running"]
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


def test_a_signal_at_any_moment_leaves_a_finished_interrupted_bundle(tmp_path):
    launched = {}
    for i, moment in enumerate(MOMENTS):
        for sig in SIGNALS if moment in ("held", "running") else SIGNALS[i % 3:i % 3 + 1]:
            out = tmp_path / f"b{i}-{sig.name}"
            marker = f"fk_early_{i}_{sig.name}"
            proc = _capture(out, marker)
            _when(proc, out, moment)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
            where = f"{sig.name} at {moment}: {err.decode()[-400:]}"
            assert (out / "manifest.json").exists(), where
            m = json.loads((out / "manifest.json").read_text())
            assert m["state"] == "finished" and m["ended_by"] == "interrupted", where
            assert m["interrupted_by"] == sig.name, where
            assert proc.returncode == 128 + sig, where               # like a shell: 143, 130, 129
            assert "Traceback" not in err.decode(), where
            assert not own_processes(marker), where
            launched[moment] = m["exit"] != "never started"
            if m["exit"] == "never started":
                assert "never launched" in m["note"] and not (out / "server.log").exists(), where
            assert not (out / layout.LOCK).exists() and not (out / layout.RESERVE).exists(), where
    assert launched["running"] and not launched["held"], launched


def test_nohup_keeps_a_capture_through_sighup(tmp_path):
    """`nohup faultkit capture ...`: SIGHUP ignored by the caller stays ignored (the terminal that
    closes does not end the capture); SIGTERM still does."""
    out = tmp_path / "b"
    proc = _capture(out, "fk_nohup", seconds=1.5,
                    preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    _wait_catching(proc.pid, signal.SIGTERM)
    for _ in range(3):
        time.sleep(0.2)
        proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "target-exit" and m["exit_code"] == 0, err.decode()[-400:]
    assert proc.returncode == 0 and m.get("interrupted_by") is None


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_the_hold_is_capture_only(tmp_path, sig):
    """Any other verb still ends at once on a signal (nothing of it to finish)."""
    proc = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "triage", "-"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode == -sig
