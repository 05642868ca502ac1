"""faultkit capture --with none/runtime-log on real processes: bundle content, environment record and
its redaction, the stale-server guard, timeout, Ctrl-C, and no process left behind."""

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from faultkit.cli import main

from .conftest import own_processes

ROOT = Path(__file__).resolve().parent.parent

# a server that spawns two workers with multiprocessing's spawn method; worker 1 segfaults via ctypes
MP_SERVER = """
import ctypes, multiprocessing as mp, os, sys, time
def worker(rank):
    print(f"rank {rank} pid {os.getpid()} AMD_SERIALIZE_KERNEL={os.environ.get('AMD_SERIALIZE_KERNEL')}", flush=True)
    time.sleep(0.5)
    if rank == 1:
        ctypes.string_at(0)
    time.sleep(30)
if __name__ == "__main__":
    mp.set_start_method("spawn")
    procs = [mp.Process(target=worker, args=(r,)) for r in range(2)]
    for p in procs: p.start()
    while all(p.exitcode is None for p in procs): time.sleep(0.05)
    print("exitcodes", [p.exitcode for p in procs], flush=True)
    for p in procs: p.kill()
    sys.exit(1)
"""


def capture(tmp_path, *args, env=None):
    res = CliRunner(env=env).invoke(main, ["capture", *args])
    return res


def no_survivors(marker: str) -> bool:
    return not own_processes(marker)


def test_multiprocess_server_crash_bundle(tmp_path):
    script = tmp_path / "mp_server_fk.py"
    script.write_text(MP_SERVER)
    out = tmp_path / "bundle"
    res = capture(tmp_path, "--env", "AMD_SERIALIZE_KERNEL=3", "--timeout", "60s", "-o", str(out), "--",
                  sys.executable, str(script), env={"MY_API_TOKEN": "s3cret"})
    assert_status(res)
    m = json.loads((out / "manifest.json").read_text())
    assert m["schema"] == "faultkit.bundle/1" and m["state"] == "finished"
    assert m["ended_by"] == "target-exit" and m["exit_code"] == 1
    assert {"wall", "monotonic_ns", "boottime_ns"} <= set(m["start"]) and m["end"]["wall"] >= m["start"]["wall"]
    log = (out / "server.log").read_text()
    assert "rank 0" in log and "rank 1" in log and "-11" in log
    times = [row.split("\t") for row in (out / "server.times.tsv").read_text().splitlines()]
    firsts = [int(r[0]) for r in times]       # one row per block of lines read together: they cover every line
    assert firsts[0] == 1 and firsts == sorted(set(firsts)) and firsts[-1] <= log.count("\n")
    assert all(len(r) == 4 for r in times)
    procs = json.loads((out / "environ.json").read_text())
    workers = [p for p in procs if any("multiprocessing" in a or "spawn_main" in a for a in p["cmdline"])]
    assert len(workers) >= 2, [p["cmdline"] for p in procs]
    assert all(p["env"].get("AMD_SERIALIZE_KERNEL") == "3" for p in workers)
    assert all(p["env"].get("MY_API_TOKEN") == "<redacted>" for p in procs if "MY_API_TOKEN" in p["env"])
    assert "s3cret" not in (out / "environ.json").read_text()
    assert m["env_check"]["ok"] and set(m["env_check"]["checked"]) >= {p["pid"] for p in workers}
    assert m["kernel_log"]["follow"] == "kernel.log" or "kmsg" in str(m["kernel_log"]["follow"])
    assert no_survivors("mp_server_fk.py")
    assert "verdict:" in res.output


def test_c_program_writing_through_bad_pointer(tmp_path):
    src = tmp_path / "badptr.c"
    src.write_text('#include <stdio.h>\nint main(void){ int *p = (int*)0x10; puts("start"); fflush(stdout); *p = 1; return 0; }\n')
    exe = tmp_path / "badptr_fk"
    subprocess.run(["cc", "-O0", "-o", str(exe), str(src)], check=True)
    out = tmp_path / "b"
    res = capture(tmp_path, "-o", str(out), "--", str(exe))
    assert_status(res)
    m = json.loads((out / "manifest.json").read_text())
    assert "SIGSEGV" in m["exit"]
    kl = out / "kernel.log"
    if kl.exists() and "badptr_fk" in kl.read_text():
        report = json.loads(CliRunner().invoke(main, ["triage", str(out), "--format", "json"]).output)
        seg = [e for e in report["kernel_events"] if e["kind"] == "host-segfault"]
        assert seg and seg[0]["fields"]["address"] == 0x10


def test_timeout_path_says_no_fault_reproduced(tmp_path):
    out = tmp_path / "b"
    res = capture(tmp_path, "--timeout", "1s", "-o", str(out), "--", sys.executable, "-c",
                  "import time; print('serving', flush=True); time.sleep(60)  # fk_timeout_marker")
    assert_status(res)
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "timeout" and "no fault reproduced" in m["note"] and m["stopped_with"][0] == "SIGINT"
    assert no_survivors("fk_timeout_marker")


# A target ignoring SIGINT and SIGTERM gets SIGKILL: test_capture_conventions's
# test_a_target_killed_after_ignoring_sigint_and_sigterm_reports_137 (one such capture costs the 5 s + 5 s).


def test_ctrl_c_during_capture_keeps_bundle_and_leaves_nothing(tmp_path):
    out = tmp_path / "b"
    proc = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-o", str(out), "--", sys.executable,
                             "-c", "import time\nfor i in range(600): print('tick', i, flush=True); time.sleep(0.1)  # fk_ctrlc"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while time.time() < deadline and not ((out / "server.log").exists() and "tick 3" in (out / "server.log").read_text()):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0].decode()
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "interrupted" and m["state"] == "finished", output
    assert "tick 3" in (out / "server.log").read_text()
    assert no_survivors("fk_ctrlc")


def test_stale_server_guard(tmp_path):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = capture(tmp_path, "-o", str(tmp_path / "b"), "--", sys.executable, "-c", "print(1)", "--port", str(port))
        assert res.exit_code == 1 and "already listening" in res.output
        assert not (tmp_path / "b" / "manifest.json").exists()
        res = capture(tmp_path, "--allow-running", "-o", str(tmp_path / "c"), "--", sys.executable, "-c", "print(1)",
                      "--port", str(port))
        assert res.exit_code == 0


def test_same_command_already_running_is_refused(tmp_path):
    cmd = [sys.executable, "-c", "import time; time.sleep(30)  # fk_dup"]
    other = subprocess.Popen(cmd)
    try:
        time.sleep(0.3)
        res = capture(tmp_path, "-o", str(tmp_path / "b"), "--", *cmd)
        assert res.exit_code == 1 and "already runs the same command" in res.output
    finally:
        other.kill()
        other.wait()


def test_missing_tools_say_so(tmp_path):
    res = capture(tmp_path, "--with", "rocprofv3", "--debugger", "/nonexistent/rocprofv3", "-o", str(tmp_path / "b"),
                  "--", "true")
    assert res.exit_code == 1 and "not found" in res.output
    res = capture(tmp_path, "--with", "rocgdb", "--debugger", "/nonexistent/rocgdb", "-o", str(tmp_path / "c"), "--",
                  "true")
    assert res.exit_code == 1 and "not found" in res.output and not (tmp_path / "c").exists()


def test_runtime_log_backend_sets_amd_log_level(tmp_path):
    out = tmp_path / "b"
    res = capture(tmp_path, "--with", "runtime-log", "-o", str(out), "--", sys.executable, "-c",
                  "import os; print('LVL', os.environ.get('AMD_LOG_LEVEL'))")
    assert_status(res)
    assert "LVL 4" in (out / "server.log").read_text()
    assert json.loads((out / "manifest.json").read_text())["env_check"]["wanted"]["AMD_LOG_LEVEL"] == "4"


FAKE_ROCPROF = r'''#!{python}
import os, signal, subprocess, sys, time
if sys.argv[1:] == ["--version"]:
    print("rocprofv3 version: 0.6.0 (ROCm 6.4.1)")
    sys.exit(0)
args = sys.argv[1:]
d = args[args.index("-d") + 1]
cmd = args[args.index("--") + 1:]
os.makedirs(f"{d}/host/{os.getpid()}/.rocprofv3", exist_ok=True)
with open(f"{d}/host/{os.getpid()}/{os.getpid()}_kernel_trace.csv", "w") as fh:
    fh.write('"Kind","Agent_Id","Queue_Id","Kernel_Name","Start_Timestamp","End_Timestamp"\n'
             '"KERNEL_DISPATCH",1,1,"k1",100,200\n"KERNEL_DISPATCH",1,1,"k2",30')
with open(f"{d}/host/{os.getpid()}/.rocprofv3/1-2-kernel.dat", "wb") as fh:
    fh.write(b"\x00\x01")
with open(f"{d}/argv.txt", "w") as fh:
    fh.write(" ".join(args))
signal.signal(signal.SIGINT, lambda *a: time.sleep(3600))   # finalization that never ends
subprocess.call(cmd)
time.sleep(3600)
'''


def test_rocprofv3_backend_flags_watchdog_and_outputs(tmp_path, monkeypatch):
    import faultkit.capture.rocprof as rocprof
    monkeypatch.setattr(rocprof, "STOP_DEADLINES", (1.0, 3.0, 3.0))
    fake = tmp_path / "rocprofv3"
    fake.write_text(FAKE_ROCPROF.replace("{python}", sys.executable))
    fake.chmod(0o755)
    out = tmp_path / "b"
    res = capture(tmp_path, "--with", "rocprofv3", "--debugger", str(fake), "--timeout", "60s", "-o", str(out),
                  "--rocprof-args", "--kernel-include-regex 'gemm|attn'", "--",
                  sys.executable, "-c", "import time; print('Memory access fault by GPU node-2 (Agent handle: 0x1) "
                  "on address 0x7f0000001000. Reason: Page not present or supervisor privilege.', flush=True); "
                  "time.sleep(60)")
    assert_status(res)
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "fault" and m["stopped_with"][:2] == ["SIGINT", "SIGTERM"]
    argv = (out / "rocprofv3" / "argv.txt").read_text()
    assert "--memory-allocation-trace" in argv and "--output-format csv" in argv and "%hostname%/%pid%" in argv
    assert "--kernel-include-regex gemm|attn --" in argv       # the user's flags, after faultkit's
    r = m["rocprofv3"]
    assert r["rocm_version"] == "6.4" and not r["complete"]
    states = {Path(o["file"]).suffix: o["state"] for o in r["outputs"]}
    assert states[".csv"] == "cut mid-row" and states[".dat"].startswith("buffer residue")
    assert no_survivors(str(fake))
    from faultkit.triage import build
    from faultkit.bundle import collect
    inputs = collect([str(out)])
    assert len(inputs.traces) == 3 and all("rocprofv3" in t for t in inputs.traces)
    assert build(inputs).faults[0].address == 0x7F0000001000


def test_rocprofv3_flags_by_version(tmp_path):
    from faultkit.capture.rocprof import command_prefix
    assert "--memory-allocation-trace" not in command_prefix("r", tmp_path, (6, 2))
    assert "-o" not in command_prefix("r", tmp_path, (6, 2))
    seven = command_prefix("r", tmp_path, (7, 1))
    assert seven[seven.index("--output-format") + 1] == "rocpd" and seven[-1] == "--"


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


FOLLOWED = """
import os, sys, time
for i in range(600):
    print("serving", i, flush=True)
    time.sleep(0.1)
    if os.path.exists(sys.argv[1]):         # the test says when: after the capture is following
        print("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. "
              "Reason: Page not present or supervisor privilege.", flush=True)
        os.unlink(sys.argv[1])
"""


def test_capture_pid_follows_a_running_server_and_leaves_it_running(tmp_path):
    script = tmp_path / "followed_fk.py"
    script.write_text(FOLLOWED)
    go = tmp_path / "go"
    with open(tmp_path / "server.out", "wb") as log:
        server = subprocess.Popen([sys.executable, str(script), str(go)], stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(0.5)
        out = tmp_path / "b"
        fk = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "--pid", str(server.pid), "--timeout",
                               "60s", "-o", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        end = time.monotonic() + 30
        while time.monotonic() < end and not ((out / "server.log").exists() and (out / "server.log").stat().st_size):
            time.sleep(0.1)
        go.touch()
        output = fk.communicate(timeout=60)[0].decode()
        assert fk.returncode == 0, output
        m = json.loads((out / "manifest.json").read_text())
        assert m["attached_to_pid"] == server.pid and m["ended_by"] == "fault", (m.get("fault_line"), (out / "server.log").read_text()[-300:])
        assert m["followed"]["files"] == [str(tmp_path / "server.out")] and m["followed"]["unreadable"] == []
        assert m["coredump"]["armed"] is False and "already running" in m["coredump"]["notes"][0]
        assert m["exit"].startswith("exit status unknown")
        log = (out / "server.log").read_text()
        assert "serving 0\n" not in log                    # followed from where it was, not re-read
        assert "Memory access fault by GPU node-2" in log
        assert server.poll() is None                        # never stopped: not faultkit's server
        from faultkit.triage import triage
        assert triage([str(out)]).faults[0].address == 0x7F0000001000
    finally:
        server.kill()
        server.wait()


def test_capture_pid_says_what_it_cannot_do(tmp_path):
    piped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        res = capture(tmp_path, "--pid", str(piped.pid), "--timeout", "1s", "-o", str(tmp_path / "b"))
        assert_status(res)
        m = json.loads((tmp_path / "b" / "manifest.json").read_text())
        assert m["ended_by"] == "timeout" and any("pipe:" in u for u in m["followed"]["unreadable"])
        assert piped.poll() is None
        refused = capture(tmp_path, "--pid", str(piped.pid), "--env", "A=1", "-o", str(tmp_path / "c"))
        assert refused.exit_code == 1 and "cannot reach a server that already runs" in refused.output
        both = capture(tmp_path, "--pid", str(piped.pid), "-o", str(tmp_path / "d"), "--", "true")
        assert both.exit_code == 2
        gone = capture(tmp_path, "--pid", "999999999", "-o", str(tmp_path / "e"))
        assert gone.exit_code != 0 and ("no such process" in gone.output or "999999999" in gone.output)
    finally:
        piped.kill()
        piped.wait()
