"""faultkit capture under a debugger, driven for real: GNU gdb on crashing C and multi-process
Python programs (launch and attach modes), and fake debuggers that hang or die."""

import json
import shutil
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from click.testing import CliRunner

from faultkit.triage import build
from faultkit.bundle import collect
from faultkit.cli import main
from faultkit.ingest.debugger import parse_debugger

from .conftest import own_processes

needs_gdb = pytest.mark.skipif(shutil.which("gdb") is None, reason="GNU gdb not installed (apt-get install gdb)")

THREAD_SEGV = r"""
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void *worker(void *arg) { volatile int *p = (int *)arg; usleep(200000); *p = 42; return 0; }
int main(void) {
    pthread_t t; printf("fk-segv starting worker\n"); fflush(stdout);
    pthread_create(&t, 0, worker, (void *)0x10); pthread_join(t, 0); return 0;
}
"""

MP_SERVER = """
import ctypes, multiprocessing as mp, os, sys, time
def worker(rank):
    print(f"fkdbg rank {rank} pid {os.getpid()}", flush=True)
    time.sleep(4)
    if rank == 0:       # the first spawned: attached first, since attaches go one at a time
        ctypes.string_at(0)
    time.sleep(60)
if __name__ == "__main__":
    mp.set_start_method("spawn")
    procs = [mp.Process(target=worker, args=(r,)) for r in range(2)]
    for p in procs: p.start()
    while all(p.exitcode is None for p in procs): time.sleep(0.05)
    for p in procs: p.kill()
    sys.exit(1)
"""


def run(*args):
    return CliRunner().invoke(main, ["capture", *args])


def manifest(out):
    return json.loads((out / "manifest.json").read_text())


def survivors(marker):
    return own_processes(marker)


@pytest.fixture(scope="module")
def segv_program(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    d = tmp_path_factory.mktemp("c")
    (d / "fk_segv.c").write_text(THREAD_SEGV)
    subprocess.run(["gcc", "-g", "-O0", "-pthread", str(d / "fk_segv.c"), "-o", str(d / "fk_segv")], check=True)
    return d / "fk_segv"


@needs_gdb
def test_launch_mode_stops_a_crashing_thread_and_harvests(tmp_path, segv_program):
    out = tmp_path / "b"
    res = run("--with", "gdb", "--timeout", "60s", "-o", str(out), "--", str(segv_program))
    assert_status(res)
    m = manifest(out)
    assert m["ended_by"] == "debugger-stop" and m["debuggers"][0]["state"] == "closed"
    assert "unsupported" in m["debuggers"][0]["precise_memory"]       # GNU gdb: no AMD support, recorded
    assert "show amdgpu precise-memory" in m["debuggers"][0]["unavailable_commands"]
    assert "fk-segv starting worker" in (out / "server.log").read_text()   # the program's own pty, stamped
    assert (out / "server.times.tsv").read_text().count("\t") >= 3
    log = parse_debugger((out / "debugger.txt").read_bytes(), "debugger.txt")
    st = [s for s in log.stops if s.signal == "SIGSEGV"][0]
    assert st.kind == "catchpoint" and st.gpu is None and st.frame.function == "worker" and st.frame.line == 5
    assert len(log.threads) == 2 and any(f.function == "worker" for f in log.backtrace)
    assert any(b for b in log.disassembly)
    inc = build(collect([str(out)]))
    assert inc.verdict.level == "unknown" and "not a GPU fault" in inc.verdict.why
    assert not survivors(str(segv_program))


@needs_gdb
def test_launch_mode_follows_spawned_workers(tmp_path):
    script = tmp_path / "fkdbg_mp.py"
    script.write_text(MP_SERVER)
    out = tmp_path / "b"
    res = run("--with", "gdb", "--timeout", "90s", "-o", str(out), "--", sys.executable, str(script))
    assert_status(res)
    assert manifest(out)["ended_by"] == "debugger-stop"
    log = parse_debugger((out / "debugger.txt").read_bytes())
    st = [s for s in log.stops if s.signal == "SIGSEGV"][0]
    assert "." in st.thread and not st.thread.startswith("1.")   # stopped in a worker inferior, not the launcher
    assert sum(e.kind == "exec" for e in log.events) >= 2
    assert not survivors("fkdbg_mp.py")


@needs_gdb
def test_attach_mode_attaches_one_debugger_per_worker(tmp_path):
    script = tmp_path / "fkdbg_mp2.py"
    script.write_text(MP_SERVER)
    out = tmp_path / "b"
    res = run("--with", "gdb", "--attach-match", "spawn_main", "--timeout", "60s", "-o", str(out), "--",
              sys.executable, str(script))
    assert_status(res)
    m = manifest(out)
    assert m["ended_by"] == "debugger-stop", json.dumps([(d["pid"], d["outcome"], d["commands"][-3:])
                                                         for d in m["debuggers"]]) + (out / "server.log").read_text()
    assert len(m["debuggers"]) == 2 and {d["state"] for d in m["debuggers"]} == {"closed"}
    faulted = [d for d in m["debuggers"] if d["outcome"].startswith("fault stop")]
    assert len(faulted) == 1
    log = parse_debugger((out / f"debugger-{faulted[0]['pid']}.txt").read_bytes())
    assert any(s.signal == "SIGSEGV" for s in log.stops)
    assert "rank 1" in (out / "server.log").read_text()
    inc = build(collect([str(out)]))
    assert any(f.source == "debugger" and f.kind == "host-signal" for f in inc.faults)
    assert not survivors("fkdbg_mp2.py")


@needs_gdb
def test_no_fault_within_timeout(tmp_path):
    out = tmp_path / "b"
    res = run("--with", "gdb", "--timeout", "3s", "-o", str(out), "--", sys.executable, "-c",
              "import time; print('fk-idle', flush=True); time.sleep(60)")
    assert_status(res)
    m = manifest(out)
    assert m["ended_by"] == "timeout" and "no fault reproduced" in m["note"]
    assert m["debuggers"][0]["state"] == "closed"
    assert not survivors("fk-idle")


FAKE = """#!{python}
import sys, time, signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
mode = {mode!r}
sys.stdout.write("(gdb) "); sys.stdout.flush()
for line in sys.stdin:
    if line.startswith("run") or line.startswith("continue"):
        if mode == "hang":
            time.sleep(3600)
        sys.stdout.write("../../gdb/progspace.c:205: internal-error: remove_objfile: Assertion failed.\\n"
                         "A problem internal to GDB has been detected,\\n")
        sys.stdout.flush()
        sys.exit(134)
    sys.stdout.write("(gdb) "); sys.stdout.flush()
"""


@pytest.mark.parametrize("mode, ended, state", [("hang", "timeout", "hung"), ("die", "debugger-died", "died")])
def test_a_debugger_that_hangs_or_dies_is_recorded_and_killed(tmp_path, mode, ended, state):
    fake = tmp_path / "fakegdb"
    fake.write_text(textwrap.dedent(FAKE.format(python=sys.executable, mode=mode)))
    fake.chmod(0o755)
    out = tmp_path / "b"
    # a command no other test run on this machine runs (the stale-server guard looks machine-wide)
    res = run("--with", "gdb", "--debugger", str(fake), "--timeout", "3s", "--command-deadline", "2s",
              "-o", str(out), "--", "sleep", f"30.{uuid.uuid4().int % 10**6:06d}")
    assert_status(res)
    m = manifest(out)
    assert m["ended_by"] == ended and m["state"] == "finished"
    d = m["debuggers"][0]
    assert d["state"] == state and d["problem"]
    assert any("debugger " + state in w for w in m["warnings"])
    assert not survivors(str(fake))
    if mode == "die":
        log = parse_debugger((out / "debugger.txt").read_bytes())
        assert any(e.kind == "debugger-internal-error" for e in log.events)


HELPER_SERVER = MP_SERVER.replace(
    '    time.sleep(4)\n',
    '    time.sleep(4)\n'
    '    import subprocess\n'
    '    subprocess.Popen([sys.executable, "-c", "import time  # spawn_main helper\\ntime.sleep(20)"])\n'
    '    time.sleep(1.0)\n')


@needs_gdb
def test_attach_mode_leaves_helpers_of_attached_workers_alone(tmp_path):
    """A debugger's backend process runs under the worker it debugs (the CUDA one opens the GPU
    too); attaching to it as if it were another worker stalled everything on the H200."""
    script = tmp_path / "fkdbg_mp3.py"
    script.write_text(HELPER_SERVER)
    out = tmp_path / "b"
    res = run("--with", "gdb", "--attach-match", "spawn_main", "--timeout", "60s", "-o", str(out), "--",
              sys.executable, str(script))
    assert_status(res)
    m = manifest(out)
    assert m["ended_by"] == "debugger-stop" and len(m["debuggers"]) == 2
    assert any("has a debugger attached" in s["why"] for s in m["not_attached"])
    assert not survivors("fkdbg_mp3.py") and not survivors("spawn_main helper")


def test_live_h200_attach_bundle_names_the_kernel_and_instruction():
    """A real bundle from `scripts/live_capture_nvidia.sh` on the H200 (docs/live-h200.md):
    cuda-gdb attached to each spawned worker; rank 1's gather_kernel read out of bounds."""
    from .conftest import ROOT
    inc = build(collect([str(ROOT / "tests/data/live_h200_attach")]))
    assert (inc.verdict.level, inc.verdict.kernel) == ("certain", "gather_kernel")
    f = inc.stops[0]
    assert f.file.endswith("debugger-493.txt") and f.pc == 0x7F92F77A3590
    assert f.faulting.offset == 656 and f.faulting.instruction.startswith("@!P1 LDG.E")   # a load: the bad read
    assert f.coordinates.startswith("block (341,0,0), thread (64,0,0)")
    xids = sorted({x.kind for x in inc.faults if x.source == "kernel-log"})
    assert xids == ["xid-13", "xid-31"]
    m = json.loads((ROOT / "tests/data/live_h200_attach/manifest.json").read_text())
    assert m["ended_by"] == "debugger-stop" and m["not_attached"][0]["why"].startswith("runs under pid 492")


def assert_status(res):
    """capture exits like a shell: the target's status, 128+N for a signal (README, exit statuses)."""
    import re as _re
    from faultkit.cli import capture_status
    m = _re.search(r"^bundle: (.+?) \(", res.output, _re.M)
    assert m, res.output
    from faultkit.ingest.schema import read_manifest
    manifest, problems = read_manifest(__import__("pathlib").Path(m.group(1)) / "manifest.json")
    assert problems == [], problems
    assert res.exit_code == capture_status(manifest), res.output


@needs_gdb
def test_capture_pid_attaches_a_debugger_to_a_running_server(tmp_path):
    """--pid with --with gdb: the running process (here the root itself, chosen by --attach-match)
    gets a debugger, which stops it at its segfault; the server was not started by faultkit."""
    script = tmp_path / "fkdbg_running.py"
    script.write_text("import ctypes, time\nprint('serving', flush=True)\ntime.sleep(4)\n"
                      "print('about to crash', flush=True)\nctypes.string_at(0)\n")
    with open(tmp_path / "server.out", "wb") as log:
        server = subprocess.Popen([sys.executable, str(script)], stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(0.5)
        out = tmp_path / "b"
        res = run("--pid", str(server.pid), "--with", "gdb", "--attach-match", "fkdbg_running", "--timeout", "60s",
                  "-o", str(out))
        assert_status(res)
        m = manifest(out)
        assert m["attached_to_pid"] == server.pid and m["ended_by"] == "debugger-stop", m.get("debuggers")
        (d,) = m["debuggers"]
        assert d["pid"] == server.pid and d["outcome"].startswith("fault stop")
        log = parse_debugger((out / f"debugger-{server.pid}.txt").read_bytes())
        assert any(s.signal == "SIGSEGV" for s in log.stops)
    finally:
        server.kill()
        server.wait()


ENDINGS = {"abort": ("#include <stdlib.h>\nint main(void){ abort(); }\n", 134, -6),
           "segv": ("int main(void){ *(volatile int *)0x10 = 1; return 0; }\n", 139, -11),
           "exit3": ("int main(void){ return 3; }\n", 3, 3)}


@needs_gdb
@pytest.mark.parametrize("name", sorted(ENDINGS))
def test_launch_mode_exits_with_the_targets_status(tmp_path, name):
    """#21 A2: under gdb a crash exits 128+N for the signal the debugger stopped on (the same abort
    without gdb gives 134), and a normal end the program's own code; the manifest says it too."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    src, status, code = ENDINGS[name]
    (tmp_path / "p.c").write_text(src)
    exe = tmp_path / f"fk_end_{name}"
    subprocess.run(["gcc", "-O0", "-o", str(exe), str(tmp_path / "p.c")], check=True)
    bare = subprocess.run([str(exe)]).returncode
    assert (128 - bare if bare < 0 else bare) == status          # what the program does without faultkit
    out = tmp_path / "b"
    res = run("--with", "gdb", "--timeout", "60s", "-o", str(out), "--", str(exe))
    assert res.exit_code == status, res.output
    m = manifest(out)
    assert m["exit_code"] == code
    assert m["ended_by"] == ("target-exit" if code >= 0 else "debugger-stop")
    if code < 0:
        assert ("SIGABRT" if name == "abort" else "SIGSEGV") in m["exit"]
