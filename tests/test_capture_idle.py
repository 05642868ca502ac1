"""Idle is not hung, through the real CLI, on the helpers real servers carry (issue 31 A1).

Every program here is real and started by the test: an HTTP server whose two workers multiprocessing
`spawn`ed (its resource tracker blocked in `read` for its whole life, its queue feeder threads, one
worker waiting on the queue's semaphore), an asyncio HTTP server, a pyzmq server, a gRPC server, a
tokenizers rayon pool, faulthandler's watchdog thread. None of them gets a request. And the hangs that must still be called hung:
two threads deadlocked on two locks, a parent that joins a worker waiting for a task nobody sends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.capture import stacks as collector
from faultkit.cli import main

SPAWN_SERVER = '''
import http.server, multiprocessing as mp

def worker(q, r):
    while True:
        item = q.get()
        if item is None:
            return
        r.put(item * 2)

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q, r = ctx.Queue(), ctx.Queue()
    for _ in range(2):
        ctx.Process(target=worker, args=(q, r), daemon=True).start()
    q.put(1); r.get()                      # the feeder threads run from here on
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print("listening", srv.server_address[1], flush=True)
    srv.serve_forever()
'''

# A parent that joins its spawned worker, which waits for a task the parent never sends.
FORGOTTEN_SENTINEL = '''
import multiprocessing as mp

def worker(q):
    while q.get() is not None:  # TASK
        pass

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=worker, args=(q,))
    p.start()
    q.put(1)
    print("started", flush=True)
    p.join()  # JOIN
'''

# Two threads, each holding one lock and waiting for the other's.
DEADLOCK = '''
import threading, time
a, b = threading.Lock(), threading.Lock()
def one():
    with a:
        time.sleep(0.2)
        b.acquire()  # ONE
def two():
    with b:
        time.sleep(0.2)
        a.acquire()  # TWO
for f in (one, two):
    threading.Thread(target=f, name=f.__name__).start()
print("locked", flush=True)
'''

HELPERS = '''
import asyncio, sys, time
kind = sys.argv[1]
if kind == "asyncio":
    import faulthandler
    faulthandler.dump_traceback_later(3600)    # a watchdog thread (native: only gdb shows it)
    async def handle(r, w):
        await r.readline(); w.write(b"HTTP/1.0 200 OK\\r\\n\\r\\nok"); await w.drain(); w.close()
    async def serve():
        s = await asyncio.start_server(handle, "127.0.0.1", 0)
        print("ready", flush=True)
        async with s:
            await s.serve_forever()
    asyncio.run(serve())
elif kind == "zmq":
    import zmq
    s = zmq.Context().socket(zmq.REP); s.bind("tcp://127.0.0.1:*")
    print("ready", flush=True)
    s.recv()
elif kind == "grpc":
    import grpc
    from concurrent import futures
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2)); srv.add_insecure_port("127.0.0.1:0"); srv.start()
    print("ready", flush=True)
    srv.wait_for_termination()
elif kind == "tokenizers":
    from tokenizers import Tokenizer, models, pre_tokenizers
    t = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.encode_batch(["a b"] * 1000)          # starts rayon's pool; its threads park from here on
    print("ready", flush=True)
    time.sleep(1000)
'''


def pyspy_or_skip():
    src = collector.PySpySource()
    if src.missing():
        pytest.skip(src.missing())
    probe = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE)
    try:
        probe.stdout.readline()
        raw = src.take(probe.pid, 20)
    finally:
        probe.kill(); probe.wait()
    if raw.problem:
        pytest.skip(f"py-spy cannot read processes here: {raw.problem}")


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def line_of(text: str, mark: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if ln.rstrip().endswith(mark))


def test_an_idle_spawn_server_is_let_run_to_its_timeout(tmp_path):
    """The shape of issue 31: `capture --hang-after` on an HTTP server with two spawned workers and
    no client said "hung (possible): ... MainThread waits in read" (the resource tracker) and stopped
    it; the JSON's capture.exit_code said -2 where the CLI exited 124."""
    pyspy_or_skip()
    prog = tmp_path / "server.py"
    prog.write_text(SPAWN_SERVER)
    out = tmp_path / "b"
    t0 = time.monotonic()
    # 15 s: room for a hang check after 2 s of silence before the timeout's own stacks (taken before it)
    res = CliRunner().invoke(main, ["capture", "--hang-after", "2s", "--timeout", "15s", "-q", "--allow-running",
                                    "--no-coredump", "-o", str(out), "--", sys.executable, str(prog)])
    m = manifest(out)
    assert m["ended_by"] == "timeout", m.get("hang_check")
    assert time.monotonic() - t0 >= 15
    checks = m["hang_check"]
    assert checks[0]["tag"] == "hang-1" and {c["state"] for c in checks} == {"idle"}, checks
    # the four processes: the server, its resource tracker, two workers
    doc = json.loads(CliRunner().invoke(main, ["triage", str(out), "--format", "json"]).output)
    kinds = {t["kind"] for p in doc["hang"]["processes"] for t in p["threads"]}
    assert {"resource-tracker", "queue-feeder", "queue"} <= kinds, kinds
    tracker = next(p for p in doc["hang"]["processes"] if "resource_tracker" in (p["command"] or ""))
    assert [t["background"] for t in tracker["threads"]] == [True]
    assert doc["hang"]["state"] == "idle"
    # the server's KeyboardInterrupt tracebacks are how faultkit's own SIGINT stop looked inside it
    log = (out / "server.log").read_text()
    assert log.count("KeyboardInterrupt") >= 1 and m["stopped_with"][0] == "SIGINT"
    assert not [r for r in doc["report_points"] if "KeyboardInterrupt" in (r["exception"] or "")], doc["report_points"]
    # an idle end's next step is about the hang, not a request for a crash log
    assert not any(s.startswith("No fault was found") for s in doc["next_steps"]), doc["next_steps"]
    assert any(s.startswith("The target was idle when the capture ended") for s in doc["next_steps"])
    # one exit status: what the CLI exited with is the JSON's
    assert res.exit_code == 124
    assert doc["capture"]["exit_code"] == 124 and doc["capture"]["target_exit_code"] == m["exit_code"]


@pytest.mark.parametrize("kind, module", [("asyncio", None), ("zmq", "zmq"), ("grpc", "grpc"),
                                          ("tokenizers", "tokenizers")])
def test_idle_helpers_of_real_servers_are_idle_to_pyspy_and_to_gdb(tmp_path, kind, module):
    """`faultkit dump` on the live server (py-spy), and on two gdb transcripts of it: gdb alone shows
    the native pool threads py-spy does not (rayon's, gRPC's: parked in a futex `syscall`), which
    were called a lock held forever."""
    if module:
        pytest.importorskip(module)
    pyspy_or_skip()
    prog = tmp_path / "helpers.py"
    prog.write_text(HELPERS)
    p = subprocess.Popen([sys.executable, str(prog), kind], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        assert p.stdout.readline().strip() == b"ready"
        time.sleep(0.5)
        res = CliRunner().invoke(main, ["dump", "--pid", str(p.pid), "--interval", "1s", "--format", "json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["verdict"]["state"] == "idle", res.output
        gdb = collector.GdbSource()
        if gdb.missing():
            return
        files = []
        for k in (1, 2):
            raw = gdb.take(p.pid, 60)
            if raw.problem:
                pytest.skip(f"gdb cannot read processes here: {raw.problem}")
            (tmp_path / f"g{k}.txt").write_text(raw.text)
            files += ["--read", str(tmp_path / f"g{k}.txt")]
            time.sleep(1)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    res = CliRunner().invoke(main, ["dump", *files, "--format", "json"])
    d = json.loads(res.output)["verdict"]
    assert d["state"] == "idle", d["summary"]
    helpers = {t["kind"] for t in d["processes"][0]["threads"] if t["background"]}
    # the native pools and watchdogs were there, and are known as helpers
    assert helpers >= {"asyncio": {"watchdog"}, "zmq": set(), "grpc": {"helper-thread"},
                       "tokenizers": {"rayon-pool"}}[kind], d["processes"][0]["threads"]


def test_a_parent_joining_a_worker_that_waits_for_a_task_nobody_sends_is_hung(tmp_path):
    pyspy_or_skip()
    prog = tmp_path / "job.py"
    prog.write_text(FORGOTTEN_SENTINEL)
    out = tmp_path / "b"
    res = CliRunner().invoke(main, ["capture", "--hang-after", "2s", "--timeout", "40s", "-q", "--allow-running",
                                    "--no-coredump", "-o", str(out), "--", sys.executable, str(prog)])
    m = manifest(out)
    assert m["ended_by"] == "hang" and res.exit_code == 124, m.get("hang_check")
    h = m["hang_check"][0]
    assert (h["state"], h["level"]) == ("hung", "candidates")      # the judge's vocabulary: one explanation
    assert "nothing outside it can start work" in h["summary"], h["summary"]
    assert f"job.py:{line_of(FORGOTTEN_SENTINEL, '# JOIN')}" in h["summary"]          # the parent's join
    assert f"job.py:{line_of(FORGOTTEN_SENTINEL, '# TASK')} worker" in h["summary"]   # what its child waits in
    doc = json.loads(CliRunner().invoke(main, ["triage", str(out), "--format", "json"]).output)
    assert doc["next_steps"][0].startswith("Every process waits on another of its tree"), doc["next_steps"]
    assert not any(s.startswith("No fault was found") for s in doc["next_steps"])


def test_two_threads_deadlocked_on_two_locks_are_hung(tmp_path):
    pyspy_or_skip()
    prog = tmp_path / "dead.py"
    prog.write_text(DEADLOCK)
    out = tmp_path / "b"
    res = CliRunner().invoke(main, ["capture", "--hang-after", "2s", "--timeout", "40s", "-q", "--allow-running",
                                    "--no-coredump", "-o", str(out), "--", sys.executable, str(prog)])
    m = manifest(out)
    assert m["ended_by"] == "hang" and res.exit_code == 124, m.get("hang_check")
    h = m["hang_check"][0]
    assert (h["state"], h["level"]) == ("hung", "candidates") and "blocked on the host" in h["summary"]
    assert any(f"dead.py:{line_of(DEADLOCK, mark)}" in h["summary"] for mark in ("# ONE", "# TWO")), h["summary"]
    doc = json.loads(CliRunner().invoke(main, ["triage", str(out), "--format", "json"]).output)
    assert doc["next_steps"][0].startswith("A thread waits on a lock that is not released"), doc["next_steps"]
