"""What new users met in a tryout (issue 36's follow-up), each through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def own_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.delenv("FAULTKIT_REGISTRY", raising=False)
    return home


def fk(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_a_registry_reader_never_creates_a_database(tmp_path):
    typo = tmp_path / "typo.duckdb"
    for verb in (["top"], ["show", "abc"], ["export", "-o", tmp_path / "x.json"]):
        res = fk("registry", *verb[:1], "--db", typo, *verb[1:])
        assert res.returncode == 1, (verb, res.stderr)
        assert f"{typo}: no registry there (nothing was created)" in res.stderr
        assert not typo.exists() and not (tmp_path / "typo.duckdb.wal").exists()


def test_capture_without_a_command_says_one_is_needed(tmp_path):
    res = fk("capture", "-o", tmp_path / "b")
    assert res.returncode == 2
    assert "a command is needed" in res.stderr and "not both" not in res.stderr
    both = fk("capture", "--pid", os.getpid(), "-o", tmp_path / "c", "--", "true")
    assert both.returncode == 2 and "not both" in both.stderr


def test_a_finished_bundle_has_no_lock_file_and_its_pack_folders_are_private(tmp_path):
    out = tmp_path / "b"
    # a worker that writes into the bundle's agent/ folder is what the tryout's pack showed 0755
    res = fk("capture", "-o", out, "--", sys.executable, "-c", "print('served')")
    assert res.returncode == 0, res.stderr
    names = {p.name for p in out.iterdir()}
    assert ".lock" not in names and ".reserve" not in names and "manifest.json" in names
    assert (out / "agent").is_dir()
    packed = tmp_path / "b.tar.gz"
    assert fk("pack", out, "-o", packed).returncode == 0
    with tarfile.open(packed) as tar:
        members = tar.getmembers()
    folders = {m.name: m.mode for m in members if m.isdir()}
    files = {m.name: m.mode for m in members if m.isfile()}
    assert folders.get("b") == 0o700 and folders.get("b/agent") == 0o700, folders
    assert files and set(files.values()) == {0o600}
    # extracted with the usual umask, the folders stay the owner's
    dest = tmp_path / "x"
    dest.mkdir()
    old = os.umask(0o022)
    try:
        subprocess.run(["tar", "-xzf", str(packed), "-C", str(dest)], check=True)
    finally:
        os.umask(old)
    assert (os.stat(dest / "b").st_mode & 0o777, os.stat(dest / "b" / "agent").st_mode & 0o777) == (0o700, 0o700)


def test_two_quick_ctrl_c_give_the_target_its_sigint_first(tmp_path):
    """The first Ctrl-C reaches the target at once; a second one within a second kills it (it
    was acted on after ~1.08 s, so two within a second killed the target without any SIGINT)."""
    import signal
    import time
    got = tmp_path / "got-sigint"
    target = ("import signal, sys, time\n"
              f"def on(s, f): open({str(got)!r}, 'w').write(repr(time.monotonic()))\n"
              "signal.signal(signal.SIGINT, on)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "print('up', flush=True)\nwhile True: time.sleep(0.05)  # fk_quick_ctrl_c\n")
    out = tmp_path / "b"
    proc = subprocess.Popen([sys.executable, "-m", "faultkit.cli", "capture", "-o", str(out), "--", sys.executable,
                             "-c", target], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 30
    while time.monotonic() < end and "up" not in ((out / "server.log").read_text()
                                                 if (out / "server.log").exists() else ""):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 130
    assert got.exists(), "the target never got the first Ctrl-C"
    assert float(got.read_text()) - t0 < 0.3           # before the second one (time.monotonic is system-wide)
    m = json.loads((out / "manifest.json").read_text())
    assert m["ended_by"] == "interrupted" and m["stopped_with"] == ["SIGINT", "SIGKILL"] and m["exit_code"] == -9


FAULT = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x{addr}. "
         "Reason: Page not present or supervisor privilege.")


def test_a_damaged_manifest_still_reads_the_bundle_as_a_bundle(tmp_path):
    out = tmp_path / "b"
    res = fk("capture", "-o", out, "--", sys.executable, "-c", f"print({FAULT.format(addr='7f0000001000')!r})")
    assert res.returncode == 0, res.stderr
    # the boot's history before the capture holds an older fault: never this capture's evidence
    (out / "kernel-before.log").write_text(FAULT.format(addr="7fdead000000") + "\n")
    good = json.loads(fk("triage", out, "--format", "json").stdout)
    assert [f["address"] for f in good["faults"]] == ["0x7f0000001000"]
    (out / "manifest.json").write_text((out / "manifest.json").read_text()[:100])     # cut: not JSON
    doc = json.loads(fk("triage", out, "--format", "json").stdout)
    assert [f["address"] for f in doc["faults"]] == ["0x7f0000001000"]
    assert any("the manifest is damaged: read as a capture bundle by its file names" in p for p in doc["problems"])


def test_capture_pid_says_a_pipe_cannot_be_followed(tmp_path):
    server = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: print('tick', flush=True); "
                               "time.sleep(0.2)"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        out = tmp_path / "b"
        res = fk("capture", "--pid", server.pid, "--timeout", "2s", "-o", out)
        pipe = os.readlink(f"/proc/{server.pid}/fd/1")          # pipe:[N], as the kernel names it
    finally:
        server.kill()
        server.wait()
    assert pipe.startswith("pipe:")
    said = f"--pid {server.pid}: its output cannot be followed (fd 1 is {pipe}: only a file can be followed"
    assert f"WARNING: {said}" in res.stderr and "the bundle has none of that output" in res.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert any(w.startswith(said) for w in m["warnings"])
    assert not (out / "server.log").read_text()


def test_format_against_the_suffix_is_warned_and_format_wins(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(FAULT.format(addr="7f0000001000") + "\n")
    res = fk("triage", log, "-o", tmp_path / "x.html", "--format", "json")
    assert res.returncode == 0
    assert f"warning: -o {tmp_path / 'x.html'} has the suffix of html, but is written as json (--format json)" \
        in res.stderr
    assert json.loads((tmp_path / "x.html").read_text())["faults"][0]["address"] == "0x7f0000001000"
    quiet = fk("triage", log, "-o", tmp_path / "y.json", "--format", "json")
    assert "warning" not in quiet.stderr                          # they agree: nothing to say
    assert fk("triage", log, "-o", tmp_path / "z.html").returncode == 0         # no --format: the suffix's
    assert "<html" in (tmp_path / "z.html").read_text()[:2000].lower()


def test_an_empty_input_is_said(tmp_path):
    empty = tmp_path / "server.log"
    empty.write_text("")
    doc = json.loads(fk("triage", empty, "--format", "json").stdout)
    assert f"{empty}: empty input (0 bytes): nothing in it to read" in doc["problems"]
    piped = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", "-", "--format", "json"], input="",
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "<stdin>: empty input (0 bytes): nothing in it to read" in json.loads(piped.stdout)["problems"]


GPU_TOOLS = ("rocgdb", "compute-sanitizer", "rocprofv3", "cuda-gdb", "debug agent")


def _steps(*inputs) -> list[str]:
    return json.loads(fk("triage", *inputs, "--format", "json").stdout)["next_steps"]


def test_next_steps_of_a_host_crash_fit_the_evidence(tmp_path):
    # a capture whose target segfaults on the CPU: no "reproduce under faultkit capture", no GPU tool
    out = tmp_path / "b"
    res = fk("capture", "-o", out, "--", sys.executable, "-c", "import ctypes; ctypes.string_at(0)")
    assert res.returncode == 128 + 11, res.stderr
    steps = _steps(out)
    assert any(s.startswith("The target crashed on the CPU (it was killed by SIGSEGV)") for s in steps), steps
    assert not any("reproduce under `faultkit capture`" in s or "pass the server log" in s for s in steps), steps
    assert not any(t in s for s in steps for t in GPU_TOOLS), steps
    # the kernel's segfault record of a host process, pasted (the line as the kernel prints it)
    dmesg = tmp_path / "dmesg.txt"
    dmesg.write_text("[   49.848369] python3[621]: segfault at 0 ip 0000000000000000 sp 00007ffd54e23e68 error 14 "
                     "likely on CPU 15 (core 15, socket 0)\n")
    steps = _steps(dmesg)
    assert any(s.startswith("The target crashed on the CPU (the kernel's segfault record: ") and "python3[621]" in s
               for s in steps), steps
    assert not any(t in s for s in steps for t in GPU_TOOLS), steps


def test_a_capture_without_a_fault_is_not_told_to_capture(tmp_path):
    out = tmp_path / "b"
    assert fk("capture", "-o", out, "--", sys.executable, "-c", "print('fine')").returncode == 0
    steps = _steps(out)
    assert any(s.startswith("No fault was found in this capture") for s in steps), steps
    assert not any("reproduce under `faultkit capture`" in s for s in steps), steps


def test_a_capture_pid_bundle_has_no_lock_file(tmp_path):
    # the tryout's `capture --pid` bundle kept .lock: a followed server (its output a file), ended by
    # --timeout, and one that exits while followed
    log = tmp_path / "server.out"
    for name, code, extra in (("t", "import time; time.sleep(30)", ("--timeout", "2s")),
                              ("x", "import time; time.sleep(3)", ())):
        with open(log, "w") as sink:
            server = subprocess.Popen([sys.executable, "-c", code], stdout=sink, stderr=subprocess.STDOUT)
        try:
            out = tmp_path / name
            res = fk("capture", "--pid", server.pid, *extra, "-o", out)
        finally:
            server.kill()
            server.wait()
        assert res.returncode in (0, 124), res.stderr
        names = {p.name for p in out.iterdir()}
        assert "manifest.json" in names and ".lock" not in names and ".reserve" not in names, (name, names)


CMSSW_HANG = ROOT.parent / "shared" / "corpus" / "runtime" / "hang_analysis_kernel_name_cmssw_issue_50607.txt"


def test_a_kernel_object_handle_is_never_ranked_as_a_kernel(tmp_path):
    if not CMSSW_HANG.exists():
        pytest.skip(f"shared corpus not found at {CMSSW_HANG}")
    text = CMSSW_HANG.read_text()
    # the evidence: two blocks print kernel_obj=0x1512f5489a80, the second with its Kernel Name line
    assert text.count("kernel_obj=0x1512f5489a80") == 2
    mangled = next(ln.split("Kernel Name: ")[1].split()[0] for ln in text.splitlines() if " Kernel Name: _Z" in ln)
    res = fk("triage", "-f", "json", CMSSW_HANG)
    assert res.returncode == 0, res.stderr
    cands = [c["kernel"] for c in json.loads(res.stdout)["verdict"]["candidates"]]
    assert cands == [mangled]
    md = fk("triage", CMSSW_HANG).stdout
    assert "`kernel_obj=0x1512f5489a80`" not in md


def test_a_py_spy_dump_file_is_listed_as_a_stack_dump(tmp_path):
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.access(spy, os.X_OK):
        pytest.skip("py-spy not installed")
    server = subprocess.Popen([sys.executable, "-c", "import time\ndef serve_forever():\n    time.sleep(60)\n"
                               "print('up', flush=True)\nserve_forever()\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline() == "up\n"
        dumps = {}
        for name, args in (("dump.txt", ()), ("dump.json", ("--json",))):
            got = subprocess.run([spy, "dump", *args, "--pid", str(server.pid)], capture_output=True, text=True,
                                 timeout=60)
            assert got.returncode == 0, got.stderr
            dumps[name] = tmp_path / name
            dumps[name].write_text(got.stdout)
    finally:
        server.kill()
        server.wait()
    assert dumps["dump.txt"].read_text().startswith(f"Process {server.pid}: ")
    res = fk("triage", "-f", "json", *dumps.values())
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert {i["name"]: i["kinds"] for i in doc["inputs"]} == {str(p): ["stack-dump"] for p in dumps.values()}
    md = fk("triage", dumps["dump.txt"]).stdout
    assert f"- {dumps['dump.txt']}: stack-dump" in md and "serve_forever" in md


def test_another_programs_segfault_in_the_capture_window_is_not_the_targets(tmp_path):
    """A capture's kernel log is the machine's: a segfault record of a process the capture never
    recorded is not "the target crashed on the CPU"; the same record of a recorded process is (seen
    in the suite: a deadlock capture was told to open a core because another test's python segfaulted).
    The kernel rate-limits these records, so the line is put into the real bundle's kernel log window
    as the kernel prints it, once with a pid the capture did not record and once with the target's."""
    out = tmp_path / "b"
    assert fk("capture", "-q", "-o", out, "--", sys.executable, "-c", "import time; time.sleep(1)").returncode == 0
    pids = {p["pid"] for p in json.loads((out / "environ.json").read_text())}
    stranger = max(pids) + 100_000
    record = ("[99999.000001] python[{pid}]: segfault at 0 ip 00007f3600185ad8 sp 00007ffd54e23e68 error 4 in "
              "libc.so.6[167ad8,7f3600044000+156000] likely on CPU 1 (core 1, socket 0)\n")
    for name in ("kernel.log", "kernel-after.log"):
        with open(out / name, "a") as fh:
            fh.write(record.format(pid=stranger))
    steps = _steps(out)
    assert not any(s.startswith("The target crashed on the CPU") for s in steps), steps
    for name in ("kernel.log", "kernel-after.log"):
        with open(out / name, "a") as fh:
            fh.write(record.format(pid=min(pids)))
    steps = _steps(out)
    assert any(s.startswith("The target crashed on the CPU (the kernel's segfault record: ") and f"[{min(pids)}]" in s
               for s in steps), steps
