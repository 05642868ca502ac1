"""GPU core dumps: detection by content, arming, collection, opening in a debugger, the runtimes'
own lines, and the live H200 bundles (a fault and a hang) captured with the default options."""

from __future__ import annotations

import json
import lzma
import os
import resource
import socket
import stat
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.bundle import collect
from faultkit.capture import coredump
from faultkit.capture.launcher import Launch
from faultkit.cli import main
from faultkit.export.report import render_markdown, to_json
from faultkit.ingest.core_file import CUDA, HOST, ROCM_GPU, ROCM_UNIFIED, inspect_core
from faultkit.ingest.runtime_log import parse_runtime_log
from faultkit.triage import TriageOptions, build

DATA = Path(__file__).parent / "data"
LIVE = DATA / "live_h200_coredump"
FAULT_CORE = DATA / "cores" / "h200_fault.cuda.vm.518.1796071374.xz"
HANG_CORE = DATA / "cores" / "h200_hang.cuda.vm.753.1796071388.xz"


def unpack(xz: Path, dest: Path) -> Path:
    dest.write_bytes(lzma.decompress(xz.read_bytes()))
    return dest


# ---------------- cores by content ----------------

def elf_core(machine: int, notes: list[tuple[bytes, int, bytes]]) -> bytes:
    """A minimal ELF64 little-endian ET_CORE with one PT_NOTE segment holding `notes`."""
    blob = b""
    for name, ntype, desc in notes:
        n = name + b"\0"
        blob += struct.pack("<III", len(n), len(desc), ntype) + n.ljust((len(n) + 3) & ~3, b"\0") \
            + desc.ljust((len(desc) + 3) & ~3, b"\0")
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 4, machine, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
    phdr = struct.pack("<IIQQQQQQ", 4, 0, 64 + 56, 0, 0, len(blob), len(blob), 4)
    return ehdr + phdr + blob


def prpsinfo(pid: int, sid: int) -> bytes:
    """elf_prpsinfo (x86-64): state/sname/zomb/nice, pad, flag, uid, gid, pid, ppid, pgrp, sid, fname, args."""
    return struct.pack("<4b4xQIIiiii16s80s", 0, 0, 0, 0, 0, 0, 0, pid, 1, pid, sid, b"python3", b"python3 serve.py")


def test_real_cuda_core_is_recognised_by_content_whatever_its_name(tmp_path):
    core = inspect_core(unpack(FAULT_CORE, tmp_path / "mystery.bin"))
    assert (core.platform, core.pid, core.machine, core.problems) == (CUDA, None, 190, [])
    named = inspect_core(unpack(FAULT_CORE, tmp_path / "cuda.vm.518.1796071374"))
    assert named.pid == 518 and named.size == 2_066_404


def test_rocm_gpu_unified_and_host_cores(tmp_path):
    amd = tmp_path / "gpucore.4242"
    amd.write_bytes(elf_core(224, [(b"AMDGPU", 33, b"\1\0\0\0" + bytes(60))]))
    c = inspect_core(amd)
    assert (c.platform, c.pid, c.problems) == (ROCM_GPU, 4242, [])
    cut = tmp_path / "gpucore.7"
    cut.write_bytes(elf_core(224, []))
    assert inspect_core(cut).problems and "without its AMDGPU note" in inspect_core(cut).problems[0].message
    unified = tmp_path / "combined"
    unified.write_bytes(elf_core(62, [(b"CORE", 3, prpsinfo(4242, 4000)), (b"AMDGPU", 33, bytes(64))]))
    assert inspect_core(unified).platform == ROCM_UNIFIED
    host = tmp_path / "core"
    host.write_bytes(elf_core(62, [(b"CORE", 3, prpsinfo(4242, 4000))]))
    h = inspect_core(host)
    assert (h.platform, h.pid, h.session) == (HOST, 4242, 4000)
    assert inspect_core(sys.executable) is None            # an executable, not a core
    (tmp_path / "text").write_text("not an ELF")
    assert inspect_core(tmp_path / "text") is None


# ---------------- the runtimes' own lines ----------------

ROCR_LINES = {
    "GPU core dump created: gpucore.574720": ("created", False, "gpucore.574720"),
    "Generating GPU core dump to: /b/cores/gpucore.91": ("writing", False, "/b/cores/gpucore.91"),
    "GPU core dump skipped because PC Sampling active": ("skipped-pc-sampling", True, None),
    "GPU coredump: Directory /ro not writable or does not exist": ("directory-unwritable", True, "/ro"),
    "Failed to create GPU coredump: File exists": ("file-exists", True, None),
    "GPU coredump: execvp failed: No such file or directory": ("pipe-handler-missing", True, None),
    "GPU coredump: handler exited with error (status: 1)": ("handler-error", True, None),
    "Falling back to file-based dump. Set HSA_COREDUMP_PATTERN to override.": ("fallback-file", False, None),
    "Failed to enable debug interface, debugger might be already attached.": ("debugger-conflict", True, None),
    "Core limit file reached. GPU core dump created: gpucore.12": ("truncated", False, "gpucore.12"),
    "GPU core dump failed": ("failed", True, None),
}


@pytest.mark.parametrize("line", sorted(ROCR_LINES))
def test_rocr_dump_lines_become_facts(line):
    notes = [n for n in parse_runtime_log(f"[pid 91] {line}\n").notes if n.kind == "gpu-core-dump"]
    assert [(n.fields["event"], n.fields["failed"], n.fields["file"]) for n in notes] == [ROCR_LINES[line]]


def test_failed_dump_lines_give_next_steps(tmp_path):
    (tmp_path / "server.log").write_text("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address "
                                         "0x7f0000001000. Reason: Page not present or supervisor privilege.\n"
                                         "GPU coredump: execvp failed: No such file or directory\n"
                                         "GPU coredump: handler exited with error (status: 1)\n")
    inc = build(collect([str(tmp_path)]))
    steps = " ".join(inc.next_steps)
    assert "HSA_COREDUMP_PATTERN to a writable file path" in steps and "pipe handler failed" in steps
    assert [c["event"] for c in to_json(inc)["core_dump_lines"]] == ["pipe-handler-missing", "handler-error"]


def test_cuda_progress_lines_name_the_kernel_certain():
    log = parse_runtime_log((LIVE / "fault" / "server.log").read_bytes(), "server.log")
    (d,) = log.driver_exceptions
    assert (d.exception, d.code, d.device, d.sm, d.warp, d.pc, d.kernel) == \
        ("CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS", 14, 0, 39, 10, 0x7fb35f7a3590, "gather_kernel")
    events = [n.fields["event"] for n in log.notes if n.kind == "gpu-core-dump"]
    assert events[:2] == ["writing", "done"]


def test_exited_warp_has_no_kernel():
    text = ("[00:40:46.611453] coredump: Detected an exception of type CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS (14)\n"
            "[00:40:46.611460] coredump:   - Device: 0\n[00:40:46.611461] coredump:   - SM: 124\n"
            "[00:40:46.611462] coredump:   - Warp: exception was detected after the warp has exited\n"
            "[00:40:46.611463] coredump:   - PC 0x7f31abb9f6d0\n[00:40:46.7] coredump: All done (took 00s)\n")
    (d,) = parse_runtime_log(text).driver_exceptions
    assert d.warp_exited and d.kernel is None and d.sm == 124 and d.pc == 0x7F31ABB9F6D0


# ---------------- the live H200 bundles (default capture) ----------------

def test_live_fault_bundle_is_certain_with_its_faulting_instruction():
    inc = build(collect([str(LIVE / "fault")]))
    doc = to_json(inc)
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "gather_kernel")
    assert doc["verdict"]["why"].startswith("GPU core dump: the excepting warp")
    (stop,) = doc["debugger_stops"]
    assert stop["faulting_instruction"].endswith("@!P1 LDG.E R9,desc[UR4][R2.64]") and stop["pc"] == "0x7fb35f7a3590"
    # The operand's registers are the focused lane's: said as such, never called the faulting address.
    assert stop["focused_lane_address"] == "0x7fb35cd55400" and "only if this lane faulted" in \
        stop["focused_lane_address_basis"]
    assert all(f["address"] != "0x7fb35cd55400" for f in doc["faults"])
    (core,) = doc["cores"]
    assert core["platform"] == "cuda" and core["pid"] == 518 and core["transcript"].endswith(".cuda-gdb.txt")
    assert "exit 134" in render_markdown(inc)       # what arming changed is said
    assert {"xid-13", "xid-31", "cuda-exception"} <= {f["kind"] for f in doc["faults"]}


def test_live_hang_bundle_names_the_spinning_kernel():
    doc = to_json(build(collect([str(LIVE / "hang")])))
    assert doc["verdict"]["level"] == "candidates" and doc["verdict"]["candidates"][0]["kernel"] == "spin_kernel"
    assert "reached its --timeout" in doc["verdict"]["why"]
    assert [(r["pid"], r["kernel"]) for r in doc["running_at_dump"]] == [(753, "spin_kernel")]
    assert doc["running_at_dump"][0]["where"].endswith("gpu_fault_server.py:30")
    m = json.loads((LIVE / "hang" / "manifest.json").read_text())
    assert m["hang_dumps"] == {"752": "dumped to cuda.vm.752.1796071388", "753": "dumped to cuda.vm.753.1796071388"}


# ---------------- triage of cores made outside faultkit ----------------

def stand_in(path: Path, body: str) -> Path:
    path.write_text("#!" + sys.executable + "\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def test_loose_cuda_core_without_a_debugger_says_how_to_open_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    unpack(FAULT_CORE, tmp_path / "core_1764_host_518.nvcudmp")
    doc = to_json(build(collect([str(tmp_path)])))
    (core,) = doc["cores"]
    assert core["platform"] == "cuda" and core["pid"] == 518 and core["analysed_with"] is None
    assert "target cudacore" in core["open_with"] and "no GPU needed" in core["open_with"]
    assert doc["verdict"]["level"] == "unknown" and "no debugger opened them" in doc["verdict"]["why"]
    assert any("cuda-gdb -batch" in s for s in doc["next_steps"])


def test_loose_cuda_core_opened_by_cuda_gdb(tmp_path):
    """The stand-in checks the batch command and replays what the real cuda-gdb printed for this
    very core on the H200 (its saved transcript); the orchestration around it is what is tested."""
    core = unpack(FAULT_CORE, tmp_path / "incident" / "x.core") if (tmp_path / "incident").mkdir() is None else None
    recorded = next((LIVE / "fault" / "cores").glob("*.txt")).read_text().split("\n", 1)[1]
    (tmp_path / "recorded.txt").write_text(recorded)
    gdb = stand_in(tmp_path / "cuda-gdb", f"""
        import sys
        args = sys.argv[1:]
        assert args[:2] == ["-batch", "-nx"], args
        assert "target cudacore {core}" in args and "x/12i $errorpc-64" in args and "info registers" in args, args
        sys.stdout.write(open({str(tmp_path / 'recorded.txt')!r}).read())
    """)
    inc = build(collect([str(tmp_path / "incident")]), TriageOptions(debugger=str(gdb)))
    doc = to_json(inc)
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("certain", "gather_kernel")
    assert doc["cores"][0]["analysed_with"] == str(gdb) and doc["cores"][0]["transcript"].endswith("(cuda-gdb -batch)")
    assert not list((tmp_path / "incident").glob("*.txt"))      # the user's folder is not written to


ROCGDB_CORE = """\
[New LWP 4242]
Core was generated by `/usr/bin/python3 serve.py'.
Program terminated with signal SIGABRT, Aborted.
Thread 3 (AMDGPU Wave 1:1:1:1 (0,0,0)/0) stopped because of SIGSEGV.
#0  faulty_kernel () at pagefault-core.cpp:45
45      }
[Current thread is 3, lane 0 (AMDGPU Lane 1:1:1:1/0 (0,0,0)[0,0,0])]
"""


def test_rocm_gpu_core_is_merged_then_opened(tmp_path):
    """Stand-ins for roccoremerge and rocgdb (no AMD GPU here), following the ROCgdb manual's core
    example and the testsuite's argument order (`roccoremerge OUT HOSTCORE GPUCORE`)."""
    inc_dir = tmp_path / "incident"
    inc_dir.mkdir()
    (inc_dir / "gpucore.4242").write_bytes(elf_core(224, [(b"AMDGPU", 33, bytes(64))]))
    (inc_dir / "core.4242").write_bytes(elf_core(62, [(b"CORE", 3, prpsinfo(4242, 4000))]))
    tools = tmp_path / "rocm"
    tools.mkdir()
    stand_in(tools / "roccoremerge", """
        import sys
        out, host, gpu = sys.argv[1:]
        assert host.endswith("core.4242") and gpu.endswith("gpucore.4242"), sys.argv
        open(out, "wb").write(open(host, "rb").read() + open(gpu, "rb").read())
    """)
    rocgdb = stand_in(tools / "rocgdb", f"""
        import sys
        args = sys.argv[1:]
        core = args[args.index("-core") + 1]
        assert core.endswith("gpucore.4242.merged") and "info dispatches" in args, args
        sys.stdout.write({ROCGDB_CORE!r})
    """)
    doc = to_json(build(collect([str(inc_dir)]), TriageOptions(debugger=str(rocgdb))))
    # issue 22's entry-point rule: the stop frame alone (no 'info dispatches', backtrace or code object) may be a
    # device function, so the core makes the kernel likely, not certain
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "faulty_kernel")
    assert "the instruction is not" in doc["verdict"]["why"]
    by_platform = {c["platform"]: c for c in doc["cores"]}
    assert by_platform["rocm-gpu"]["analysed_with"] == str(rocgdb) and by_platform["host"]["pid"] == 4242


def test_rocm_gpu_core_without_host_core_says_why(tmp_path):
    (tmp_path / "gpucore.77").write_bytes(elf_core(224, [(b"AMDGPU", 33, bytes(64))]))
    tools = tmp_path / "rocm"
    tools.mkdir()
    stand_in(tools / "roccoremerge", "raise SystemExit(3)\n")
    rocgdb = stand_in(tools / "rocgdb", "raise SystemExit('must not run without a merged core')\n")
    (core,) = to_json(build(collect([str(tmp_path / "gpucore.77")]), TriageOptions(debugger=str(rocgdb))))["cores"]
    assert any("no host core" in p for p in core["problems"]) and "roccoremerge" in core["open_with"]


# ---------------- arming ----------------

def test_default_arming_is_lightweight_and_never_skips_abort(tmp_path):
    a = coredump.arm(tmp_path / "b", amd=False)
    env = a.env
    assert env["CUDA_ENABLE_COREDUMP_ON_EXCEPTION"] == "1" and env["CUDA_COREDUMP_SHOW_PROGRESS"] == "1"
    assert env["CUDA_COREDUMP_FILE"] == str(tmp_path / "b" / "cores" / "cuda.%h.%p.%t")
    assert env["CUDA_COREDUMP_PIPE"].endswith("cores/pipe.%h.%p") and env["CUDA_ENABLE_USER_TRIGGERED_COREDUMP"] == "1"
    assert "skip_global_memory" in env["CUDA_COREDUMP_GENERATION_FLAGS"] and "skip_abort" not in \
        env["CUDA_COREDUMP_GENERATION_FLAGS"]
    assert env["HSA_COREDUMP_PATTERN"].endswith("cores/gpucore.%p") and env["HSA_ENABLE_LIGHTWEIGHT_COREDUMP"] == "1"
    assert env["HIP_SKIP_ABORT_ON_GPU_ERROR"] == "0"
    assert a.core_limit is None and any("core-size limit left" in n for n in a.notes)   # no ROCm here: not raised
    full = coredump.arm(tmp_path / "b", full=True, amd=True)
    assert "CUDA_COREDUMP_GENERATION_FLAGS" not in full.env and "HSA_ENABLE_LIGHTWEIGHT_COREDUMP" not in full.env
    assert any("size of the GPU memory in use" in w and "GB are free" in w for w in full.warnings)


def test_old_rocm_gets_a_capped_core_limit(tmp_path):
    a = coredump.arm(tmp_path, rocm="6.4.1-120", amd=True)
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    assert a.core_limit is not None and 0 < a.core_limit <= coredump.DEFAULT_CAP
    assert hard == resource.RLIM_INFINITY or a.core_limit <= hard
    assert any("ROCm 6.4 cannot write lightweight GPU cores" in n for n in a.notes)


def test_debug_agent_or_rocgdb_leave_rocm_dumps_unarmed(tmp_path):
    a = coredump.arm(tmp_path, rocm="7.1.0", target_env={"HSA_TOOLS_LIB": "librocm-debug-agent.so.2"}, amd=True)
    assert not a.rocm and "HSA_COREDUMP_PATTERN" not in a.env and any("kept the debug agent" in n for n in a.notes)
    b = coredump.arm(tmp_path, debugger="rocgdb", amd=True)
    assert not b.rocm and any("rocgdb is attached" in n for n in b.notes)
    assert b.cuda and a.cuda


def test_hard_core_limit_zero_is_said(tmp_path):
    code = ("import resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); from pathlib import Path; "
            "from faultkit.capture.coredump import arm; import sys; "
            "print('\\n'.join(arm(Path(sys.argv[1]), amd=True).warnings))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert "hard core-size limit is 0" in out.stdout


def test_core_limit_reaches_a_real_child(tmp_path):
    launch = Launch(f"{sys.executable} -c 'import resource; print(\"LIMIT\", resource.getrlimit(resource.RLIMIT_CORE)[0])'",
                    tmp_path, core_limit=12345678)
    launch.start()
    launch.proc.wait(timeout=30)
    launch.stop()
    assert "LIMIT 12345678" in (tmp_path / "server.log").read_text()


def test_host_core_of_a_real_crash_is_found_and_moved_into_the_bundle(tmp_path):
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    if pattern.startswith("|") or "/" in pattern:
        pytest.skip(f"core_pattern is {pattern!r}: host cores do not land in the working directory here")
    work = tmp_path / "work"
    work.mkdir()
    bundle = tmp_path / "b"
    (bundle / "cores").mkdir(parents=True)
    since = time.time()
    launch = Launch(f"cd {work} && exec {sys.executable} -c 'import os; os.abort()'", bundle, core_limit=1 << 30)
    launch.start()
    launch.proc.wait(timeout=60)
    launch.stop()
    found = coredump.find_cores(bundle, [], str(work), since, session=launch.proc.pid)
    if not found:
        pytest.skip("the kernel wrote no core here (sandboxed kernels may not)")
    (c,) = found
    assert c.path.startswith(str(bundle / "cores" / "host.")) and "moved into the bundle" in c.how
    assert not list(work.iterdir())                     # nothing left in the user's folder
    assert inspect_core(c.path).platform == HOST and inspect_core(c.path).session == launch.proc.pid


def test_trigger_writes_to_each_process_pipe(tmp_path):
    """The user-triggered dump is asked for through the pipe the CUDA driver opens per process."""
    cores = tmp_path / "cores"
    cores.mkdir()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    pipe = cores / f"pipe.{socket.gethostname()}.{child.pid}"
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(pipe, "rb").read(1)))
    reader.start()
    time.sleep(0.2)
    try:
        result = coredump.trigger_dumps(tmp_path, [child.pid, 999999999], wait_s=1.0, echo=lambda m: None)
    finally:
        child.kill()
        child.wait()
    reader.join(5)
    assert got == [b"1"] and result == {child.pid: "no core within 1 s"}
    assert stat.S_ISFIFO(pipe.stat().st_mode)


# ---------------- capture with the defaults ----------------

def test_capture_arms_by_default_and_no_coredump_opts_out(tmp_path):
    show = (f"{sys.executable} -c \"import os; print('ARMED', os.environ.get('CUDA_ENABLE_COREDUMP_ON_EXCEPTION'), "
            f"os.environ.get('HSA_COREDUMP_PATTERN'))\"")
    runner = CliRunner()
    res = runner.invoke(main, ["capture", "-o", str(tmp_path / "a"), "--", "sh", "-c", show])
    assert res.exit_code == 0, res.output
    assert f"ARMED 1 {tmp_path / 'a' / 'cores' / 'gpucore.%p'}" in (tmp_path / "a" / "server.log").read_text()
    m = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert m["coredump"]["cuda"] and m["cores"] == [] and (tmp_path / "a" / "cores").is_dir()
    res = runner.invoke(main, ["capture", "--no-coredump", "-o", str(tmp_path / "b"), "--", "sh", "-c", show])
    assert "ARMED None None" in (tmp_path / "b" / "server.log").read_text()
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["coredump"]["armed"] is False
    res = runner.invoke(main, ["capture", "--with", "coredump", "-o", str(tmp_path / "c"), "--", "sh", "-c", show])
    assert res.exit_code == 0 and "ARMED 1" in (tmp_path / "c" / "server.log").read_text()


@pytest.mark.skipif(not __import__("shutil").which("gdb"), reason="GNU gdb not installed (apt-get install gdb)")
def test_rocm_hang_snapshot_attaches_and_detaches_leaving_the_process_running(tmp_path):
    """rocgdb's part is run against GNU gdb (no AMD GPU here): it answers the AMD commands with
    `Undefined info command`; the attach, the commands in order and the detach are real."""
    import shutil as sh

    (tmp_path / "cores").mkdir()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)
        result = coredump.rocm_hang_snapshot(tmp_path, [child.pid], sh.which("gdb"), 30.0, echo=lambda m: None)
        assert child.poll() is None                              # detached: still running
        text = (tmp_path / "cores" / f"hang-{child.pid}.gdb.txt").read_text()
    finally:
        child.kill()
        child.wait()
    assert result == {child.pid: f"snapshot in hang-{child.pid}.gdb.txt"}
    if "ptrace" in text and "Operation not permitted" in text:
        pytest.skip("ptrace attach is not permitted here")
    order = [text.index(c) for c in ("attach", "info agents", "info queues", "info dispatches", "thread apply all bt",
                                     "detach")]
    assert order == sorted(order) and 'Undefined info command: "agents"' in text


def test_live_hang_after_silence_makes_the_spinning_kernel_likely():
    """H200, `capture --hang-after 20s -- gpu_fault_server.py --inline --hang`: the silence ended the
    capture, the user-triggered dump showed one kernel running: `likely`."""
    doc = to_json(build(collect([str(LIVE / "hang_after")])))
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "spin_kernel")
    assert "printed nothing for the --hang-after time" in doc["verdict"]["why"]
    m = json.loads((LIVE / "hang_after" / "manifest.json").read_text())
    assert m["ended_by"] == "hang" and m["hang_dumps"] == {"473": "dumped to cuda.vm.473.1796077208"}


def test_the_status_line_counts_cores_not_the_drivers_pipes(tmp_path):
    """Seen live on the H200: the CUDA driver makes a user-triggered FIFO per GPU process at start,
    and the status line counted them as cores before anything faulted."""
    from types import SimpleNamespace
    from faultkit.capture.session import _status
    cores = tmp_path / "cores"
    cores.mkdir()
    for pid in (475, 476):
        os.mkfifo(cores / f"pipe.vm.{pid}")
    (cores / "cuda.vm.476.txt").write_text("transcript")
    line = _status(3.0, SimpleNamespace(records=lambda: []), SimpleNamespace(debuggers=0),
                   SimpleNamespace(faults=0), tmp_path)
    assert "0 core(s)" in line
    (cores / "cuda.vm.476.1796092043").write_bytes(b"\x7fELF")
    assert "1 core(s)" in _status(3.0, SimpleNamespace(records=lambda: []), SimpleNamespace(debuggers=0),
                                  SimpleNamespace(faults=0), tmp_path)
