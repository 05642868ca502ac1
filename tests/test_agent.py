"""The in-process agent on CPU: its injection into every Python process (spawned, forked, started as
a subprocess), chaining to the target's own sitecustomize, the stacks at abort() and on request, and
the ring file's format under abort(), SIGKILL, a file-size limit and torn records."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from faultkit.agent import files, ring
from faultkit.capture.agent import SITE_DIR, agent_env, ask_for_stacks, processes


def _env(tmp: Path, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(agent_env(tmp, False, extra or {}))
    return env


def _run(tmp: Path, code: str, extra_env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    script = tmp / "target.py"
    script.write_text(textwrap.dedent(code))
    env = _env(tmp)
    env.update(extra_env or {})
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60,
                          cwd=tmp, **kw)


def _headers(tmp: Path) -> dict[int, dict]:
    out = {}
    for p in (tmp / files.DIR).glob("*" + files.HEADER):
        h = json.loads(p.read_text())
        out[h["pid"]] = h
    return out


def test_agent_runs_in_every_process_and_the_output_is_unchanged(tmp_path):
    r = _run(tmp_path, """
        import multiprocessing as mp, os, subprocess, sys
        def child(q):
            q.put(os.getpid())
        if __name__ == "__main__":
            pids = {"main": os.getpid()}
            for method in ("spawn", "fork"):
                ctx = mp.get_context(method)
                q = ctx.Queue()
                p = ctx.Process(target=child, args=(q,))
                p.start()
                pids[method] = q.get(timeout=30)
                p.join()
            sub = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
            pids["subprocess"] = int(sub.stdout)
            print("PIDS", pids)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    pids = eval(r.stdout.split("PIDS", 1)[1])
    heads = _headers(tmp_path)
    for how, pid in pids.items():
        assert pid in heads, f"{how} worker {pid} did not run the agent ({sorted(heads)})"
        assert "faulthandler" in heads[pid]["armed"], heads[pid]
    assert heads[pids["fork"]]["ppid"] == pids["main"]
    assert heads[pids["subprocess"]]["ppid"] == pids["main"]
    assert heads[pids["main"]]["failures"] == []
    # the manifest's list of processes comes from the same header files
    listed = {row["pid"] for row in processes(tmp_path)}
    assert set(pids.values()) <= listed


def test_the_targets_own_sitecustomize_still_runs(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nMARK = 'theirs'\nos.environ['CHAINED'] = '1'\n")
    env = _env(tmp_path, {"PYTHONPATH": str(own)})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(SITE_DIR), str(own)]
    r = subprocess.run([sys.executable, "-c", "import os, sitecustomize; print(sitecustomize.MARK, os.environ.get('CHAINED'))"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["theirs", "1"], r.stderr
    assert len(_headers(tmp_path)) == 1


def test_a_broken_sitecustomize_of_the_target_is_reported_as_python_would(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("raise ValueError('boom')\n")
    bare = subprocess.run([sys.executable, "-c", "print('ran')"], env={**os.environ, "PYTHONPATH": str(own)},
                          capture_output=True, text=True, timeout=30)
    with_agent = subprocess.run([sys.executable, "-c", "print('ran')"], env=_env(tmp_path, {"PYTHONPATH": str(own)}),
                                capture_output=True, text=True, timeout=30)
    assert with_agent.stdout == bare.stdout == "ran\n"
    assert with_agent.stderr == bare.stderr and "ValueError: boom" in bare.stderr


def test_without_the_agents_variable_nothing_is_written(tmp_path):
    env = _env(tmp_path)
    env.pop(files.ENV_DIR)
    r = subprocess.run([sys.executable, "-c", "print('x')"], env=env, capture_output=True, text=True, timeout=30)
    assert r.stdout == "x\n" and not (tmp_path / files.DIR).exists()


def test_every_threads_stack_is_written_at_abort(tmp_path):
    r = _run(tmp_path, """
        import os, threading, time
        def scheduler_loop():
            while True:
                time.sleep(0.01)
        def wait_for_result():
            time.sleep(0.2)
            os.abort()
        threading.Thread(target=scheduler_loop, name="scheduler", daemon=True).start()
        wait_for_result()
    """)
    assert r.returncode == -signal.SIGABRT
    (stacks,) = (tmp_path / files.DIR).glob("*" + files.STACKS)
    text = stacks.read_text()
    assert "Fatal Python error: Aborted" in text
    assert "in scheduler_loop" in text and "in wait_for_result" in text


def test_a_live_process_gives_its_stacks_when_asked_and_runs_on(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("import time, sys\ndef serving_forever():\n    print('up', flush=True)\n"
                      "    while True:\n        time.sleep(0.05)\nserving_forever()\n")
    p = subprocess.Popen([sys.executable, str(script)], env=_env(tmp_path), stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "up\n"
        asked = ask_for_stacks(tmp_path, [p.pid], wait_s=0.5)
        assert asked[str(p.pid)].startswith("asked at")
        assert p.poll() is None                        # SIGUSR2 did not end it
        text = (tmp_path / files.DIR / files.name(p.pid, files.STACKS)).read_text()
        assert "in serving_forever" in text and "Fatal Python error" not in text
    finally:
        p.kill()
        p.wait()


def test_a_process_that_took_the_signal_for_itself_is_not_asked(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("import signal, time\nsignal.signal(signal.SIGUSR2, signal.SIG_DFL)\n"
                      "print('up', flush=True)\ntime.sleep(30)\n")
    p = subprocess.Popen([sys.executable, str(script)], env=_env(tmp_path), stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "up\n"
        asked = ask_for_stacks(tmp_path, [p.pid], wait_s=0.1)
        assert asked[str(p.pid)].startswith("not asked") and p.poll() is None
    finally:
        p.kill()
        p.wait()


# ---------------- the ring ----------------

def test_ring_round_trip_and_oldest_overwritten(tmp_path):
    w = ring.Writer(str(tmp_path / "r"), ring.HEADER_BYTES + 16 * ring.RECORD_BYTES, "test")
    assert w.capacity == 16
    for i in range(40):
        w.write(ring.ALLOC, addr=0x1000 + i, size=i, stream=7, site=3)
    data = (tmp_path / "r").read_bytes()
    head, problem = ring.read_header(data)
    assert problem is None and head["capacity"] == 16 and head["pid"] == os.getpid() and head["producer"] == "test"
    recs, torn = ring.read_records(data, 16)
    assert torn == 0
    assert [r[0] for r in recs] == list(range(25, 41))
    assert recs[-1][5] == 0x1000 + 39 and recs[-1][6] == 39 and recs[-1][7] == 7


def test_a_torn_record_is_dropped_never_misread(tmp_path):
    w = ring.Writer(str(tmp_path / "r"), 1 << 16, "test")
    for i in range(5):
        w.write(ring.ALLOC, addr=0xAAAA0000 + i, size=256)
    data = bytearray((tmp_path / "r").read_bytes())
    at = ring.HEADER_BYTES + 4 * ring.RECORD_BYTES + 30        # one byte of the fifth record's size
    data[at] ^= 0x40
    recs, torn = ring.read_records(bytes(data), w.capacity)
    assert torn == 1 and [r[0] for r in recs] == [1, 2, 3, 4]


def _child_writer(tmp: Path, tail: str) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        import os, sys, time, signal
        sys.path.insert(0, {str(Path(ring.__file__).parent)!r})
        import ring
        w = ring.Writer({str(tmp / 'r')!r}, 1 << 20, "child")
        for i in range(1, 20001):
            w.write(ring.ALLOC, addr=i * 4096, size=i)
        print("wrote", flush=True)
    """) + textwrap.dedent(tail)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_a_child_that_aborts_mid_write_leaves_every_whole_record(tmp_path):
    # The last record is cut in the middle (half its bytes stored), then abort(): it must be dropped.
    p = _child_writer(tmp_path, """
        seq = 20001
        rec = ring.RECORD.pack(seq, 0, ring.ALLOC, -1, time.monotonic_ns(), seq * 4096, seq, 0, 0, 0, 0)
        at = ring.HEADER_BYTES + ((seq - 1) % w.capacity) * ring.RECORD_BYTES
        w.map[at:at + 40] = rec[:40]
        os.abort()
    """)
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGABRT
    data = (tmp_path / "r").read_bytes()
    head, _ = ring.read_header(data)
    recs, torn = ring.read_records(data, head["capacity"])
    assert torn == 1
    seqs = [r[0] for r in recs]
    assert seqs[-1] == 20000 and seqs == list(range(seqs[0], 20001))
    assert all(r[5] == r[0] * 4096 and r[6] == r[0] for r in recs)


def test_a_child_killed_while_writing_leaves_a_readable_ring(tmp_path):
    p = _child_writer(tmp_path, """
        i = 20001
        while True:
            w.write(ring.FREE_REQUESTED, addr=i * 4096, size=i)
            i += 1
    """)
    assert p.stdout.readline() == "wrote\n"
    time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    data = (tmp_path / "r").read_bytes()
    head, _ = ring.read_header(data)
    recs, torn = ring.read_records(data, head["capacity"])
    assert torn <= 1
    seqs = [r[0] for r in recs]
    assert seqs[-1] > 20000 and seqs == list(range(seqs[0], seqs[-1] + 1))
    assert all(r[5] == r[0] * 4096 for r in recs)


def test_a_file_size_limit_shrinks_the_ring_and_the_target_runs_on(tmp_path):
    limit = 200_000
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        sys.path.insert(0, {str(Path(ring.__file__).parent)!r})
        import ring
        w = ring.Writer({str(tmp_path / 'r')!r}, 64 << 20, "limited")
        for i in range(3 * w.capacity):
            w.write(ring.SEGMENT_ALLOC, addr=i, size=i)
        print(w.capacity)
        try:
            ring.create({str(tmp_path / 'r2')!r}, 2 << 20, "none")
        except OSError as exc:
            print("refused", exc.errno)
    """)
    env = {**os.environ, "PYTHONPATH": ""}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    cap = int(r.stdout.split()[0])
    assert ring.HEADER_BYTES + cap * ring.RECORD_BYTES <= limit and cap >= 16
    data = (tmp_path / "r").read_bytes()
    recs, torn = ring.read_records(data, ring.read_header(data)[0]["capacity"])
    assert torn == 0 and len(recs) == cap and recs[-1][0] == 3 * cap


def test_the_agent_under_a_tiny_file_size_limit_changes_nothing(tmp_path):
    bare = subprocess.run([sys.executable, "-c", "print(sum(range(10)))"], capture_output=True, text=True, timeout=30)
    code = ("import resource, subprocess, sys, os\nresource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))\n"
            "r = subprocess.run([sys.executable, '-c', 'print(sum(range(10)))'])\nsys.exit(r.returncode)\n")
    r = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout == bare.stdout and r.stderr == ""


def test_the_ring_header_is_checked():
    assert ring.read_header(b"short")[1].startswith("5 bytes")
    assert "bad magic" in ring.read_header(b"x" * 200)[1]
    good = ring._header(16, "p")
    bad = bytearray(good)
    bad[40] ^= 1
    assert "checksum" in ring.read_header(bytes(bad))[1]
    assert ring.read_header(good)[1] is None
    assert struct.unpack_from("<Q", good, ring.HEAD_AT)[0] == 0


# ---------------- the C++ tracker, against a stand-in for torch's allocator header ----------------

FAKE_C10 = Path(__file__).parent / "data" / "fake_c10"


def _tracker(tmp: Path) -> str:
    import shutil
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler here: the tracker cannot be built")
    out = str(tmp / "tracker.so")
    src = Path(ring.__file__).parent / "tracker.cpp"
    r = subprocess.run([cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-I", str(FAKE_C10), str(src), "-o", out],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def test_the_tracker_writes_records_with_python_sites_read_without_the_gil(tmp_path):
    lib_path = _tracker(tmp_path)
    code = textwrap.dedent(f"""
        import ctypes, sys, time, importlib.util
        spec = importlib.util.spec_from_file_location("rt", {str(Path(ring.__file__).parent / "runtime.py")!r})
        rt = importlib.util.module_from_spec(spec); spec.loader.exec_module(rt)
        ring = rt._load("ring")
        rt._state["header"] = {{"failures": []}}
        lib = ctypes.CDLL({lib_path!r})          # CDLL: the GIL is released in calls, as torch's ops do
        rt._declare(lib)
        lib.fake_event.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t]
        cap = ring.create({str(tmp_path / 'a.ring')!r}, 1 << 16, "test")
        assert lib.fk_attach({str(tmp_path / 'a.ring').encode()!r}, cap, int(sys.argv[1])) == 0
        print("SITES", rt.start_sites({lib_path!r}, lib, {str(tmp_path / 's.tsv')!r}, "/nonexistent/"))
        def make_kv_pool():
            lib.fake_event(3, 0x7f0000000000, 1 << 30, 0)   # SEGMENT_ALLOC
        def alloc_block():
            lib.fake_event(0, 0x7f0000200000, 4096, 7)       # ALLOC (kept only with blocks)
        for _ in range(2):
            make_kv_pool()
            alloc_block()
        time.sleep(0.3)
    """)
    for blocks in (0, 1):
        r = subprocess.run([sys.executable, "-c", code, str(blocks)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "SITES None" in r.stdout, r.stdout
        data = (tmp_path / "a.ring").read_bytes()
        recs, torn = ring.read_records(data, ring.read_header(data)[0]["capacity"])
        assert torn == 0
        kinds = [ring.KIND_NAMES[x[2]] for x in recs]
        assert kinds == (["segment_alloc", "alloc"] * 2 if blocks else ["segment_alloc"] * 2)
        assert recs[0][5] == 0x7f0000000000 and recs[0][6] == 1 << 30
        assert recs[0][8] != 0 and recs[0][8] == recs[1 + blocks][8]     # the same stack, interned once
        sites = {int(l.split("\t")[0]): l.split("\t")[1:] for l in (tmp_path / "s.tsv").read_text().splitlines()}
        line = next(i + 1 for i, t in enumerate(code.splitlines()) if "lib.fake_event(3" in t)
        assert sites[recs[0][8]][0] == f"<string>:{line} make_kv_pool"
        if blocks:
            assert sites[recs[1][8]][0].endswith(" alloc_block") and recs[1][7] == 7
