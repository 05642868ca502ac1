"""`show`, `doctor`, `pack`, shell completion and the shared -q/-v, through the real command line
(#21 C), on real bundles of real crashing commands."""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import click
import pytest

from faultkit.cli import main

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-plantedOpenAIKey1234567890abcdef"
HF = "hf_PlantedPackToken1234567890abcd"
CRASH = "import ctypes; print('about to crash', flush=True); ctypes.string_at(0)"


def faultkit(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env={**os.environ, **(env or {})}, **kw)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A real capture of a real segfault, made with --no-redact so that secrets are in the bundle."""
    out = tmp_path_factory.mktemp("verbs") / "b"
    res = faultkit("capture", "-q", "--no-redact", "--env", f"HF_TOKEN={HF}", "-o", str(out), "--",
                   sys.executable, "-c", CRASH, "--api-key", SECRET)
    assert res.returncode == 139, res.stderr
    assert HF in (out / "environ.json").read_text()          # the premise: the bundle itself holds the secret
    return out


# ---------------- show ----------------

def test_show_says_how_the_capture_ended(bundle):
    res = faultkit("show", str(bundle))
    assert res.returncode == 0, res.stderr
    lines = {ln.split(":", 1)[0]: ln for ln in res.stdout.splitlines()}
    # the capture itself exited 139 (the fixture checked it): show reports that same status
    assert "target-exit" in lines["ended"] and "faultkit capture exited 139" in lines["ended"]
    assert lines["env"].startswith("env:      verified in ")              # HF_TOKEN was checked by fingerprint
    assert "cores:    none (GPU core dumps were armed)" in res.stdout
    assert lines["kernel"].startswith("kernel:   followed: kernel.log")
    assert f"next:     faultkit triage {bundle}" in res.stdout
    assert len(res.stdout.splitlines()) <= 12                             # a few lines
    doc = json.loads(faultkit("show", str(bundle), "--format", "json").stdout)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert doc["schema"] == "faultkit.show/1" and doc["exit_status"] == 139 and doc["env_ok"] is True
    assert doc["ended_by"] == manifest["ended_by"] and doc["kernel_log_readable"] is True
    assert doc["processes"] == len(json.loads((bundle / "environ.json").read_text()))


def test_show_reads_an_archive_like_the_folder(bundle, tmp_path):
    tgz = tmp_path / "b.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(bundle, arcname="b")
    folder = json.loads(faultkit("show", str(bundle), "-f", "json").stdout)
    archive = json.loads(faultkit("show", str(tgz), "-f", "json").stdout)
    for key in ("ended_by", "exit", "exit_status", "env_check", "kernel_log", "cores", "processes", "command"):
        assert archive[key] == folder[key], key


def test_show_of_cut_unreadable_and_odd_bundles(tmp_path, bundle):
    plain = tmp_path / "logs"
    plain.mkdir()
    (plain / "server.log").write_text("hello\n")
    res = faultkit("show", str(plain))
    assert res.returncode == 1 and "not a faultkit capture bundle" in res.stdout
    cut = tmp_path / "cut"
    shutil.copytree(bundle, cut)
    m = json.loads((cut / "manifest.json").read_text())
    for k in ("end", "ended_by", "exit_code", "exit"):
        m.pop(k)
    m["state"] = "running"
    m["kernel_log"] = {"before": "kernel-before.log", "follow": "/dev/kmsg: Operation not permitted",
                       "after": "dmesg: exit 1: dmesg: read kernel buffer failed: Operation not permitted"}
    (cut / "manifest.json").write_text(json.dumps(m))
    res = faultkit("show", str(cut))
    assert res.returncode == 0 and "the capture never finished" in res.stdout
    assert "kernel:   not followed (/dev/kmsg: Operation not permitted); no snapshot either" in res.stdout
    # fields of the wrong type: what can be said is said, never a traceback
    for k, v in (("cores", 5), ("files", "big"), ("kernel_log", [1]), ("env_check", "x"), ("start", {"wall": 1e300}),
                 ("system", {"tools": 3}), ("exit_code", "1"), ("interrupted_by", {}), ("warnings", [1, "w"])):
        (cut / "manifest.json").write_text(json.dumps(m | {k: v, "state": "finished", "ended_by": "interrupted"}))
        res = faultkit("show", str(cut), "-f", "json")
        assert res.returncode == 0 and "Traceback" not in res.stderr, (k, res.stderr)
        json.loads(res.stdout)


# ---------------- doctor ----------------

def test_doctor_names_the_tools_with_their_own_versions():
    res = faultkit("doctor", "--format", "json", "--dir", str(ROOT))
    doc = json.loads(res.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert {"kernel log", "core limit", "core_pattern", "gdb", "rocgdb", "cuda-gdb", "rocprofv3", "compute-sanitizer",
            "ROCm", "NVIDIA", "free disk", "debugger attach"} <= set(checks)
    assert res.returncode == doc["exit_status"] == (1 if any(c["status"] == "fail" for c in doc["checks"]) else 0)
    gdb = shutil.which("gdb")
    if gdb:
        first = subprocess.run([gdb, "--version"], capture_output=True, text=True).stdout.splitlines()[0].strip()
        assert checks["gdb"]["status"] == "ok" and checks["gdb"]["found"] == f"{gdb}: {first}"
    free = shutil.disk_usage(ROOT).free / (1 << 30)
    assert f"{free:.0f}" in checks["free disk"]["found"] or f"{free:.1f}"[:-2] in checks["free disk"]["found"]
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    assert pattern[:40] in checks["core_pattern"]["found"]


def _no_cores():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def test_doctor_fails_on_a_zero_hard_core_limit_and_says_what_to_do():
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "doctor"], cwd=ROOT, capture_output=True, text=True,
                         preexec_fn=_no_cores, timeout=120)
    assert res.returncode == 1                                        # README: doctor, 1 = a check failed
    line = next(ln for ln in res.stdout.splitlines() if "core limit" in ln)
    assert line.startswith("FAIL") and "soft 0, hard 0" in line
    assert "what to do: raise the hard limit where the server starts" in res.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run doctor as another user")
def test_doctor_as_an_unprivileged_user_says_the_kernel_log_is_not_readable():
    try:
        restricted = Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1"
    except OSError:
        restricted = False
    python = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not restricted or not python.exists():
        pytest.skip("needs kernel.dmesg_restrict=1 and a system Python of this version readable by nobody")
    site = next(p for p in map(Path, sys.path) if p.name == "site-packages" and (p / "click").is_dir())

    def nobody():
        os.setgid(65534)
        os.setuid(65534)
    res = subprocess.run([str(python), "-m", "faultkit.cli", "doctor", "--dir", "/tmp"], cwd="/tmp",
                         capture_output=True, text=True, preexec_fn=nobody, timeout=120,
                         env={"PYTHONPATH": f"{ROOT}:{site}", "PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    if "No module named" in res.stderr:
        pytest.skip(f"the test environment is not readable by nobody: {res.stderr[-200:]}")
    assert res.returncode == 1, res.stderr
    assert "FAIL  kernel log: not readable (/dev/kmsg: Operation not permitted" in res.stdout, res.stdout
    assert "`sudo sysctl kernel.dmesg_restrict=0`" in res.stdout


# ---------------- pack ----------------

def _members(tgz: Path) -> dict[str, bytes]:
    with tarfile.open(tgz) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


@pytest.fixture(scope="module")
def with_core(bundle, tmp_path_factory) -> Path:
    """The bundle with a real core dump in cores/ (gdb's gcore of a live process)."""
    if shutil.which("gdb") is None:
        pytest.skip("gdb not installed: no real core to pack")
    b = tmp_path_factory.mktemp("core") / "b"
    shutil.copytree(bundle, b)
    (b / "cores").mkdir(exist_ok=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)
        subprocess.run(["gdb", "-batch", "-p", str(sleeper.pid), "-ex", f"gcore {b / 'cores' / 'core.python'}"],
                       capture_output=True, timeout=120)
    finally:
        sleeper.kill()
        sleeper.wait()
    core = next((b / "cores").glob("core.python*"), None)
    if core is None:
        pytest.skip("gdb could not write a core here (ptrace not allowed?)")
    assert core.read_bytes()[:4] == b"\x7fELF"
    return b


def test_pack_leaves_out_cores_and_environments_and_redacts_again(with_core, tmp_path):
    out = tmp_path / "incident.tar.gz"
    res = faultkit("pack", str(with_core), "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    members = _members(out)
    names = {n.split("/", 1)[1] for n in members}
    assert "server.log" in names and "manifest.json" in names and "pack-manifest.json" in names
    assert not any(n.startswith("cores/core.python") for n in names) and "environ.json" not in names
    for name, data in members.items():
        assert SECRET.encode() not in data and HF.encode() not in data, name
    listed = json.loads(members[next(n for n in members if n.endswith("pack-manifest.json"))])
    why = {f["name"]: f["why"] for f in listed["left_out"]}
    core = next(n for n in why if n.startswith("cores/core.python"))
    assert "add --with-cores" in why[core] and "add --with-env" in why["environ.json"]
    assert listed["output"] == "incident.tar.gz"                    # no local path in a shared copy
    manifest = json.loads(members[next(n for n in members if n.endswith("/manifest.json"))])
    assert "<redacted>" in manifest["command"] and manifest["env_requested"]["HF_TOKEN"] == "<redacted>"
    # what triage finds in the copy is what it finds in the bundle
    a = json.loads(faultkit("triage", str(with_core), "--no-open-cores", "-f", "json").stdout)
    b = json.loads(faultkit("triage", str(out), "--no-open-cores", "-f", "json").stdout)
    assert [f["kind"] for f in a["faults"]] == [f["kind"] for f in b["faults"]]
    assert a["verdict"]["level"] == b["verdict"]["level"]


def test_pack_with_cores_and_env_when_asked(with_core, tmp_path):
    out = tmp_path / "full.tar.gz"
    res = faultkit("pack", str(with_core), "-o", str(out), "--with-cores", "--with-env")
    assert res.returncode == 0, res.stderr
    members = _members(out)
    core = next(n for n in members if "/cores/core.python" in n)
    assert members[core] == next((with_core / "cores").glob("core.python*")).read_bytes()
    env = json.loads(members[next(n for n in members if n.endswith("/environ.json"))])
    assert env and HF.encode() not in json.dumps(env).encode()          # included, and redacted again


def test_pack_never_follows_a_link_out_of_the_bundle(bundle, tmp_path):
    b = tmp_path / "b"
    shutil.copytree(bundle, b)
    (b / "extra.log").symlink_to("/etc/passwd")
    out = tmp_path / "x.tar.gz"
    res = faultkit("pack", str(b), "-o", str(out), "-v")
    assert res.returncode == 0 and "left out extra.log: not a regular file" in res.stderr
    assert not any(n.endswith("extra.log") for n in _members(out))
    bad = faultkit("pack", str(b / "server.log"), "-o", str(out))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr        # a file, not a folder: usage


# ---------------- completion, -q / -v ----------------

def test_shell_completion_script_generates_and_completes_the_verbs():
    res = faultkit(env={"_FAULTKIT_COMPLETE": "bash_source"})
    assert res.returncode == 0
    assert "_faultkit_completion()" in res.stdout and "complete -o nosort -F _faultkit_completion faultkit" in res.stdout
    words = faultkit(env={"_FAULTKIT_COMPLETE": "bash_complete", "COMP_WORDS": "faultkit sh", "COMP_CWORD": "1"})
    assert "plain,show" in words.stdout.splitlines()
    words = faultkit(env={"_FAULTKIT_COMPLETE": "bash_complete", "COMP_WORDS": "faultkit pack x --with-",
                          "COMP_CWORD": "3"})
    assert {"plain,--with-cores", "plain,--with-env"} <= set(words.stdout.splitlines())


def _leaves(group: click.Group, prefix=""):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _leaves(cmd, f"{prefix}{name} ")
        else:
            yield prefix + name, cmd


def test_every_verb_takes_q_and_v_with_one_meaning():
    leaves = dict(_leaves(main))
    assert {"triage", "timeline", "capture", "show", "doctor", "pack", "trials run", "trials report",
            "trials plan"} <= set(leaves)
    for name, cmd in leaves.items():
        opts = {o.name: o for o in cmd.params if isinstance(o, click.Option)}
        assert "-q" in opts["quiet"].opts and "-v" in opts["verbose"].opts, name
        if name != "capture":             # capture's -q also names what it hides: the target's output
            assert opts["quiet"].help == "print nothing on stderr but warnings and errors", name
        assert opts["verbose"].help == "say on stderr what was read and every problem met", name


def test_quiet_leaves_stderr_empty_and_verbose_says_more(bundle, tmp_path):
    for args in (["show", str(bundle), "-o", str(tmp_path / "s.txt")],
                 ["pack", str(bundle), "-o", str(tmp_path / "p.tar.gz"), "--with-env"],
                 ["triage", str(bundle), "-o", str(tmp_path / "r.md")]):
        quiet = faultkit(*args, "-q")
        assert quiet.returncode == 0 and quiet.stderr == "", (args, quiet.stderr)
        loud = faultkit(*args, "-v")
        assert loud.returncode == 0 and len(loud.stderr) > len(faultkit(*args).stderr) or args[0] == "show", args
    assert stat.S_IMODE((tmp_path / "s.txt").stat().st_mode) == 0o600


def test_an_unwritable_output_is_a_plain_error(bundle):
    for args in (["show", str(bundle)], ["doctor"], ["trials", "report", "--counts", "a=1/5", "--counts", "b=0/5"],
                 ["pack", str(bundle)]):
        res = faultkit(*args, "-o", "/proc/faultkit-no/out")
        assert res.returncode == 1 and "cannot write there" in res.stderr and "internal error" not in res.stderr, args
