"""No process of the capture outlives it: daemons that setsid, faultkit stopped by SIGTERM, SIGHUP
or killed outright. Each test looks only for the processes it started (a unique word in argv)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from .conftest import own_processes


def wait_gone(word: str, seconds: float = 10.0) -> list[int]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        left = own_processes(word, whole_arg=True)
        if not left:
            return []
        time.sleep(0.1)
    return own_processes(word, whole_arg=True)


def faultkit(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_setsid_daemon_does_not_survive(tmp_path):
    word = f"daemon-{uuid.uuid4().hex}"
    target = (f"import subprocess, sys, time; subprocess.Popen(['setsid', sys.executable, '-c', "
              f"'import time; time.sleep(300)', '{word}'], start_new_session=True); time.sleep(1.0); "
              f"print('spawned', flush=True)")
    p = faultkit("-o", str(tmp_path / "b"), "--", sys.executable, "-c", target)
    p.communicate(timeout=60)
    try:
        assert wait_gone(word) == []
        m = json.loads((tmp_path / "b" / "manifest.json").read_text())
        assert m["killed_leftovers"], m
    finally:
        for pid in own_processes(word, whole_arg=True):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_signals_to_faultkit_stop_the_tree_and_finish_the_manifest(tmp_path, sig):
    word = f"server-{uuid.uuid4().hex}"
    p = faultkit("-o", str(tmp_path / "b"), "--", sys.executable, "-c", "import time; time.sleep(300)", word)
    try:
        end = time.monotonic() + 20
        while not own_processes(word, p.pid, whole_arg=True) and time.monotonic() < end:
            time.sleep(0.1)
        time.sleep(0.5)
        p.send_signal(sig)
        p.communicate(timeout=60)
        assert wait_gone(word) == []
        m = json.loads((tmp_path / "b" / "manifest.json").read_text())
        assert (m["state"], m["ended_by"], m["interrupted_by"]) == ("finished", "interrupted", sig.name)
    finally:
        p.kill()
        for pid in own_processes(word, whole_arg=True):
            os.kill(pid, signal.SIGKILL)


def test_sigkill_of_faultkit_leaves_no_server_and_a_cut_bundle(tmp_path):
    word = f"server-{uuid.uuid4().hex}"
    child = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', "
             f"'{word}']); time.sleep(300)")
    p = faultkit("-o", str(tmp_path / "b"), "--", sys.executable, "-c", child, word)
    try:
        end = time.monotonic() + 20
        while len(own_processes(word, p.pid, whole_arg=True)) < 2 and time.monotonic() < end:
            time.sleep(0.1)
        assert len(own_processes(word, p.pid, whole_arg=True)) == 2
        p.kill()
        p.communicate(timeout=30)
        assert wait_gone(word) == []
        end = time.monotonic() + 10
        while json.loads((tmp_path / "b" / "manifest.json").read_text())["state"] == "running" \
                and time.monotonic() < end:
            time.sleep(0.1)
        m = json.loads((tmp_path / "b" / "manifest.json").read_text())
        assert m["state"] == "cut" and m["ended_by"] == "faultkit-killed" and len(m["killed_leftovers"]) >= 1
        out = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", str(tmp_path / "b")],
                             capture_output=True, text=True, timeout=60).stdout
        assert "was cut" in out
    finally:
        for pid in own_processes(word, whole_arg=True):
            os.kill(pid, signal.SIGKILL)
