"""Plain `py-spy dump` (no --native) of a real two-thread lock deadlock, taken twice, given to the
real CLI: py-spy shows a thread blocked in `with lock:` as its own line and nothing below it
(idle: the GIL released), so the wait is read from the source line, or, where the source cannot
be read, named as a call Python does not show. A thread sleeping in its own loop stays idle."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from faultkit.capture import stacks as collector
from faultkit.cli import main

DEADLOCK = r'''
import threading, time
a, b = threading.Lock(), threading.Lock()
def t1():
    with a:
        time.sleep(0.3)
        with b:                     # T1-BLOCKED
            pass
def t2():
    with b:
        time.sleep(0.3)
        with a:                     # T2-BLOCKED
            pass
x = threading.Thread(target=t1, name="t1"); y = threading.Thread(target=t2, name="t2")
x.start(); y.start()
time.sleep(0.6)
print("ready", flush=True)
x.join(); y.join()
'''

SLEEPERS = r'''
import threading, time
def tick():
    while True:
        time.sleep(30)              # SLEEP
x = threading.Thread(target=tick, name="t1"); y = threading.Thread(target=tick, name="t2")
x.start(); y.start()
print("ready", flush=True)
x.join()
'''


def line_of(program: str, mark: str) -> int:
    return next(i for i, ln in enumerate(program.splitlines(), 1) if ln.rstrip().endswith(mark))


def start(tmp_path, program: str):
    src = tmp_path / "dl.py"
    src.write_text(program)
    p = subprocess.Popen([sys.executable, str(src)], stdout=subprocess.PIPE, start_new_session=True)
    assert p.stdout.readline().strip() == b"ready"
    return p, src


def two_plain_dumps(pid: int, tmp_path) -> list[str]:
    binary = collector.PySpySource().binary
    if not binary:
        pytest.skip("py-spy is not installed")
    files = []
    for k in (1, 2):
        r = subprocess.run([binary, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60)
        if r.returncode != 0 and ("ermission" in r.stderr or "ptrace" in r.stderr):
            pytest.skip(f"py-spy cannot read processes here: {r.stderr.strip()[:200]}")
        assert r.returncode == 0 and "--native" not in r.stdout, r.stderr
        f = tmp_path / f"s{k}.txt"
        f.write_text(r.stdout)
        files.append(str(f))
        if k == 1:
            time.sleep(1.5)
    return files


@pytest.fixture
def proc(tmp_path, request):
    p, src = start(tmp_path, request.param)
    yield p, src
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def triage(files: list[str]) -> dict:
    res = CliRunner().invoke(main, ["triage", *files, "-f", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def threads(doc: dict) -> dict:
    (p,) = doc["hang"]["processes"]
    return {t["name"]: t for t in p["threads"]}


@pytest.mark.parametrize("proc", [DEADLOCK], indirect=True)
def test_two_plain_dumps_of_a_lock_deadlock_are_a_lock_wait_hang(proc, tmp_path, monkeypatch):
    p, src = proc
    monkeypatch.chdir(tmp_path.parent)          # the source is found by the dump's command line, not the cwd
    files = two_plain_dumps(p.pid, tmp_path)
    doc = triage(files)
    h = doc["hang"]
    assert (h["state"], h["sign"], h["level"]) == ("hung", "blocked", "candidates"), h["summary"]
    t = threads(doc)
    for name, mark in (("t1", "T1-BLOCKED"), ("t2", "T2-BLOCKED")):
        assert (t[name]["kind"], t[name]["unchanged"]) == ("lock", True)
        assert t[name]["where"] == f"dl.py:{line_of(DEADLOCK, mark)} {name}"
    assert "lock-wait deadlock" in h["summary"] and "'with b:'" in h["summary"] and "'with a:'" in h["summary"]
    assert "no GPU fault was found" not in doc["verdict"]["why"]
    out = CliRunner().invoke(main, ["dump", "--read", files[0], "--read", files[1]])
    assert out.exit_code == 0 and "blocked" in out.output.splitlines()[1], out.output


@pytest.mark.parametrize("proc", [DEADLOCK], indirect=True)
def test_unreadable_source_says_blocked_in_a_call_and_how_to_see_which(proc, tmp_path, monkeypatch):
    p, src = proc
    src.unlink()                                  # the user's copy of the dumps, away from the program
    monkeypatch.chdir(tmp_path.parent)
    doc = triage(two_plain_dumps(p.pid, tmp_path))
    h = doc["hang"]
    assert (h["state"], h["sign"]) == ("hung", "blocked"), h["summary"]
    assert {threads(doc)[n]["kind"] for n in ("t1", "t2")} == {"blocked-call"}
    assert f"blocked in a call at dl.py:{line_of(DEADLOCK, 'T1-BLOCKED')} (run py-spy with --native" in h["summary"]
    assert f"blocked in a call at dl.py:{line_of(DEADLOCK, 'T2-BLOCKED')} (run py-spy with --native" in h["summary"]
    assert "joins them" in h["summary"]


@pytest.mark.parametrize("proc", [SLEEPERS], indirect=True)
def test_threads_sleeping_in_their_own_loop_are_idle_not_hung(proc, tmp_path, monkeypatch):
    p, _ = proc
    monkeypatch.chdir(tmp_path.parent)
    doc = triage(two_plain_dumps(p.pid, tmp_path))
    assert doc["hang"]["state"] == "idle", doc["hang"]["summary"]
    t = threads(doc)
    assert t["t1"]["kind"] == "sleep" and t["t1"]["where"] == f"dl.py:{line_of(SLEEPERS, 'SLEEP')} tick"
