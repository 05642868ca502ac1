"""Trials get the GPU core a capture gets: run_one arms the runtimes' dumps through capture.coredump,
lets a core being written finish before it stops the tree, and collects the core into the trial.

The server is a `#!` stand-in for the CUDA driver's measured behaviour on the H200
(../shared/reference/gpu_coredumps.md): with CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 the faulting process
prints the driver's progress lines on stderr (`coredump: Starting GPU coredump generation`, the
exception, one line per SM, `Writing ELF file to <CUDA_COREDUMP_FILE>`, `All done`), writes the core to
the file the variable names (%h host, %p pid, %t time; a regular file: the FIFO `pipe.<host>.<pid>` is
the driver's input for user-triggered dumps, never its output) and aborts (exit 134). A SIGINT while it
writes ends it without a core, as it did in every crashed trial of the H200's amplify runs."""

import os
import socket
import sys
import textwrap
from pathlib import Path

from faultkit.trials.records import PlanEntry
from faultkit.trials.runner import Arm, run_one

DRIVER = textwrap.dedent("""\
    #!{python}
    import os, socket, sys, time
    def say(msg):
        sys.stderr.write(time.strftime("[%H:%M:%S.000000] ") + "coredump: " + msg + "\\n"); sys.stderr.flush()
    print("worker pid", os.getpid(), "ready", flush=True)
    time.sleep(0.3)
    if os.environ.get("CUDA_ENABLE_COREDUMP_ON_EXCEPTION") != "1":
        sys.exit(1)
    assert "skip_abort" not in os.environ.get("CUDA_COREDUMP_GENERATION_FLAGS", "")
    say("Starting GPU coredump generation")
    say("Detected an exception of type CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS (14)")
    say("  - Device: 0")
    for sm in range(1, 41):                    # 132 SMs took 4 s on the H200 under the trials' load
        time.sleep(0.05)
        say(f"SM {{sm}}/40 has finished state collection")
    path = (os.environ["CUDA_COREDUMP_FILE"].replace("%h", socket.gethostname())
            .replace("%p", str(os.getpid())).replace("%t", str(int(time.time()))))
    say("Writing ELF file to " + path)
    with open(path, "wb") as fh:
        fh.write(b"\\x7fELF" + bytes(4092))
    say("All done (took 02s)")
    os.abort()
""")


def test_a_trial_waits_for_the_gpu_core_and_collects_it(tmp_path):
    server = tmp_path / "driver.py"
    server.write_text(DRIVER.format(python=sys.executable))
    server.chmod(0o755)
    tdir = tmp_path / "trial-000-plain"
    r = run_one(tdir, PlanEntry(index=0, pair=0, position=0, arm="plain"), Arm("plain", str(server)), None, None,
                60.0, None, cores=True)
    log = (tdir / "server.log").read_text()
    assert "coredump: SM 40/40 has finished state collection" in log and "coredump: All done" in log
    assert r.crashed and r.exit_code == 134 and r.ended_by == "server-exit"
    pid = int(log.split("worker pid ", 1)[1].split()[0])
    assert len(r.cores) == 1, r.cores
    core = Path(r.cores[0]["path"])
    assert core.parent == tdir / "cores" and core.name.startswith(f"cuda.{socket.gethostname()}.{pid}.")
    assert core.read_bytes()[:4] == b"\x7fELF" and core.stat().st_size == 4096 == r.cores[0]["size"]
    assert r.cores[0]["pid"] == pid and r.cores[0]["how_found"] == "armed pattern"
    # the time to crash is the fault line's, not the end of the two-second dump
    assert r.time_to_crash_s < 1.5 < r.duration_s
    assert (os.stat(tdir / "cores").st_mode & 0o077) == 0


def test_without_cores_nothing_is_armed(tmp_path):
    server = tmp_path / "driver.py"
    server.write_text(DRIVER.format(python=sys.executable))
    server.chmod(0o755)
    tdir = tmp_path / "trial-000-plain"
    r = run_one(tdir, PlanEntry(index=0, pair=0, position=0, arm="plain"), Arm("plain", str(server)), None, None,
                60.0, None)
    assert r.exit_code == 1 and r.cores == [] and not (tdir / "cores").exists()
