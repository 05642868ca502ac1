"""Targets that are scripts (issue 31 A2): a `#!` script, the pyenv shim this machine's `python3` is
(a bash script ending in `pyenv exec`), a console-script entry point (the venv's own `faultkit`).
`capture --with gdb` debugs the machine program behind each with the script's arguments, or refuses
with the reason; it never exits 0 for a target that did not run. The same resolution serves the
same-command guard and the environment check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import main

SHIM = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))) / "shims" / "python3"
needs_gdb = pytest.mark.skipif(shutil.which("gdb") is None, reason="GNU gdb is not installed")
needs_shim = pytest.mark.skipif(not (SHIM.is_file() and SHIM.read_text(errors="replace").startswith("#!")),
                                reason=f"no pyenv shim at {SHIM} on this machine")


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def capture(*args):
    return CliRunner().invoke(main, ["capture", "-q", "--no-agent", "--timeout", "120s", *args])


@needs_gdb
def test_gdb_runs_a_shebang_script_with_its_arguments_and_its_status(tmp_path):
    script = tmp_path / "serve.py"
    script.write_text(f"#!{sys.executable}\nimport sys\nprint('args', sys.argv[1:], flush=True)\nsys.exit(3)\n")
    script.chmod(0o755)
    out = tmp_path / "b"
    res = capture("--with", "gdb", "-o", str(out), "--", str(script), "a b", "c")
    m = manifest(out)
    assert "args ['a b', 'c']" in (out / "server.log").read_text(), (out / "debugger.txt").read_text()[-2000:]
    assert res.exit_code == 3 and m["exit_code"] == 3, m["exit"]
    assert f"Starting program: {sys.executable} {script} " in (out / "debugger.txt").read_text()
    assert f"{script} is a script run by {sys.executable}" in m["debuggers"][0]["program_resolved"]


@needs_gdb
@needs_shim
def test_gdb_runs_the_real_python_behind_the_pyenv_shim(tmp_path):
    real = subprocess.run([str(SHIM), "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                          timeout=60).stdout.strip()                  # what the shim runs, as the shim says
    out = tmp_path / "b"
    res = capture("--with", "gdb", "-o", str(out), "--", str(SHIM), "-c", "import sys; print('ran', sys.argv)")
    assert res.exit_code == 0, manifest(out)["exit"]
    assert "ran ['-c']" in (out / "server.log").read_text()
    assert f"Starting program: {real} -c " in (out / "debugger.txt").read_text()


@needs_gdb
def test_gdb_runs_a_console_script_entry_point(tmp_path):
    entry = Path(sys.executable).parent / "faultkit"        # the venv's own console script
    if not entry.is_file():
        pytest.skip(f"no console script {entry}")
    head = entry.read_text(errors="replace").splitlines()[0]
    assert head.startswith("#!")
    out = tmp_path / "b"
    res = capture("--with", "gdb", "-o", str(out), "--", str(entry), "capture", "--help")
    assert res.exit_code == 0, manifest(out)["exit"]
    assert "Usage: faultkit capture" in (out / "server.log").read_text()
    assert f"Starting program: {head[2:].strip()} {entry} capture --help" in (out / "debugger.txt").read_text()


@needs_gdb
def test_a_target_gdb_cannot_start_is_refused_or_fails_never_exit_0(tmp_path):
    plain = tmp_path / "no_shebang"
    plain.write_text("echo hi\n")
    plain.chmod(0o755)
    res = capture("--with", "gdb", "-o", str(tmp_path / "a"), "--", str(plain))
    assert res.exit_code == 126 and "neither a machine program nor a `#!` script" in res.output, res.output
    # a file that looks like a machine program and is none: gdb cannot start it
    fake = tmp_path / "fake_elf"
    fake.write_bytes(b"\x7fELF" + b"\0" * 60)
    fake.chmod(0o755)
    out = tmp_path / "b"
    res = capture("--with", "gdb", "-o", str(out), "--", str(fake))
    m = manifest(out)
    assert res.exit_code == 126 and m["exit"].startswith("never ran under the debugger"), m["exit"]


@needs_shim
def test_the_same_command_guard_knows_a_shim_runs_the_real_python(tmp_path, monkeypatch):
    real = subprocess.run([str(SHIM), "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                          timeout=60).stdout.strip()
    idle = tmp_path / "idle.py"
    idle.write_text("import time\ntime.sleep(60)\n")
    monkeypatch.chdir(tmp_path)
    running = subprocess.Popen([os.path.realpath(real), "idle.py"])     # `.../python3.11 idle.py`
    try:
        time.sleep(0.3)
        res = capture("-o", str(tmp_path / "b"), "--", str(SHIM), "idle.py")
        assert res.exit_code == 1 and f"pid {running.pid} already runs the same command" in res.output, res.output
    finally:
        running.kill()
        running.wait()


@needs_shim
def test_the_environment_check_lists_no_shim_helper_shell(tmp_path):
    out = tmp_path / "b"
    res = capture("--env", "FK_SHIM_CHECK=1", "-o", str(out), "--", str(SHIM), "-c",
                  "import time; time.sleep(2)")
    assert res.exit_code == 0
    m = manifest(out)
    records = {r["pid"]: r["cmdline"] for r in json.loads((out / "environ.json").read_text())}
    checked = m["env_check"]["checked"]
    assert checked and m["env_check"]["ok"]
    assert all(os.path.basename(records[p][0]) not in ("bash", "sh") for p in checked), \
        [records[p][:3] for p in checked]
    assert m["root_pid"] in checked                       # the python the shim became is what was verified


@needs_gdb
def test_a_gdb_attach_reports_the_stopped_threads_backtrace_once(tmp_path):
    """The capture asks `bt full` and then `thread apply all bt`: the report showed the stopped
    thread's frames twice (issue 31 B)."""
    prog = tmp_path / "crash_later.py"
    prog.write_text("import ctypes, time\nprint('up', flush=True)\ntime.sleep(2)\nctypes.string_at(0)\n")
    out = tmp_path / "b"
    res = capture("--with", "gdb", "--attach-match", "crash_later", "-o", str(out), "--", sys.executable, str(prog))
    assert res.exit_code == 139, manifest(out)["exit"]
    transcript = next(out.glob("debugger-*.txt")).read_text()
    assert "(gdb) bt full" in transcript and "(gdb) thread apply all bt" in transcript
    md = CliRunner().invoke(main, ["triage", str(out)]).output
    points = md.split("## Report points", 1)[1].split("\n## ", 1)[0]
    frames = [ln for ln in points.splitlines() if ln.startswith("#")]
    assert frames and frames[0].startswith("#0  ") and "string_at" in points
    assert sum(ln.startswith("#0 ") for ln in frames) == 1, frames
    levels = [int(ln[1:].split()[0]) for ln in frames]
    assert levels == list(range(len(levels))), levels


def test_the_same_command_guard_knows_a_running_shebang_script(tmp_path, monkeypatch):
    """`./serve.py` runs as `python ./serve.py`: the kernel hands the interpreter the script's path."""
    script = tmp_path / "serve.py"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    running = subprocess.Popen([str(script), "--port", "1"])
    try:
        time.sleep(0.3)
        assert Path(f"/proc/{running.pid}/cmdline").read_bytes().split(b"\0")[:2] == [sys.executable.encode(),
                                                                                          str(script).encode()]
        res = capture("-o", str(tmp_path / "b"), "--", "./serve.py", "--port", "1")
        assert res.exit_code == 1 and f"pid {running.pid} already runs the same command" in res.output, res.output
    finally:
        running.kill()
        running.wait()
