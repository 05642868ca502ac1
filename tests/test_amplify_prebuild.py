"""`faultkit amplify run` builds the agent's tracker and poison library once, before the first trial, with
the server's own python, into the cache the trials' processes attach from (FAULTKIT_AGENT_CACHE). On the
H200 a cold cache was built by the trials themselves and killed with each trial's tree: the first trials
had no allocation map ("waiting for the tracker's build"). The compiler here is a `#!` shim that logs
each call and writes the library where it is told (-o): torch on this machine has no CUDA to build for,
so those tests put a CUDA torch's two files first on the server python's path (`cuda_torch`); with the
machine's own CPU torch the build-ahead says there is nothing to build, without importing torch."""

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.amplify.prebuild import target_python
from faultkit.cli import main

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = f"{sys.executable} {ROOT / 'scripts' / 'uaf_server.py'}"


def shim(tmp: Path) -> tuple[Path, Path]:
    log = tmp / "cxx.log"
    cxx = tmp / "cxx"
    cxx.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import sys, time
        out = sys.argv[sys.argv.index("-o") + 1]
        open({str(log)!r}, "a").write(f"{{time.time()}} {{sys.argv[sys.argv.index('-o') - 1]}} {{out}}\\n")
        open(out, "wb").write(b"\\x7fELF")
    """))
    cxx.chmod(0o755)
    inc = tmp / "cuda" / "include"
    inc.mkdir(parents=True)
    (inc / "cuda_runtime_api.h").write_text("")
    return cxx, log


def cuda_torch(tmp: Path, monkeypatch) -> None:
    """A CUDA build's torch package as the build reads it (its version.py is a CUDA wheel's: `cuda` set),
    first on PYTHONPATH; the CPU-only sample server never imports torch."""
    pkg = tmp / "cuda-torch" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "version.py").write_text("from typing import Optional\n__version__ = '2.9.0+cu128'\ndebug = False\n"
                                    "cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n")
    (pkg / "__init__.py").write_text("from .version import __version__\nfrom . import version\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pkg.parent), os.environ.get("PYTHONPATH", "")]))


def test_the_tracker_and_poison_library_are_built_once_before_the_first_trial(tmp_path, monkeypatch):
    cxx, log = shim(tmp_path)
    cuda_torch(tmp_path, monkeypatch)
    cache = tmp_path / "cache"
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("FAULTKIT_AGENT_CACHE", str(cache))
    out = tmp_path / "amp"
    before = time.time()
    res = CliRunner().invoke(main, ["amplify", "run", "--arm", "caching-off", "--arm", "poison", "-n", "1",
                                    "--timeout", "20s", "-o", str(out), "--", *f"{SAMPLE} --port 1 --device cpu "
                                    "--serve-for 0.5".split()], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    calls = [ln.split() for ln in log.read_text().splitlines()]
    assert sorted(Path(c[1]).name for c in calls) == ["poison.cpp", "tracker.cpp"]        # each once
    assert all(Path(c[2]).parent == cache for c in calls)
    assert sorted(p.name.split("-")[0] for p in cache.glob("*.so")) == ["poison", "tracker"]
    first = min(json.loads(p.read_text())["clocks"]["start"]["wall"] for p in out.glob("trial-*/result.json"))
    assert before < max(float(c[0]) for c in calls) < first
    assert f"for {sys.executable} into {cache} (once, before the first trial)" in res.output
    assert "tracker: " + str(cache) in res.output
    # a second experiment finds them built: no compiler call
    res = CliRunner().invoke(main, ["amplify", "run", "--arm", "caching-off", "-n", "1", "--timeout", "20s", "-o",
                                    str(tmp_path / "amp2"), "--", *f"{SAMPLE} --port 1 --device cpu "
                                    "--serve-for 0.5".split()], catch_exceptions=False)
    assert res.exit_code == 0 and len(log.read_text().splitlines()) == 2 and "(0.0 s)" in res.output


def test_the_servers_python_is_found(tmp_path):
    script = tmp_path / "torchrun"
    script.write_text("#!/usr/bin/env /opt/other/bin/python3.12\nprint(1)\n")
    script.chmod(0o755)
    assert target_python(f"{sys.executable} -m x") == sys.executable
    assert target_python(f"FOO=1 {script} --nproc 2 train.py") == "/opt/other/bin/python3.12"
    assert target_python("/bin/true") == sys.executable          # not a python: faultkit's own


def test_a_crash_whose_black_box_names_no_block_says_why(tmp_path):
    """The H200's first release trials: the agent attached nothing (its tracker was still being built)."""
    from faultkit.amplify.report import black_box_findings
    t = tmp_path / "trial-001-release"
    (t / "agent").mkdir(parents=True)
    (t / "server.log").write_text("worker pid 1297 on cuda\n[17:20:18.889106] coredump: Detected an exception of "
                                  "type CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS (14)\n")
    (t / "agent" / "1297.json").write_text(json.dumps({
        "pid": 1297, "ppid": 1295, "python": "3.12.3", "mode": "segments", "armed": ["faulthandler"],
        "failures": [], "torch": "2.11.0+cu130", "alloc": {"mechanism": None, "note": "waiting for the tracker's build"}}))
    assert black_box_findings([t], 1) == ["name no block (trial-001-release: no allocation map: waiting for the "
                                          "tracker's build)"]


def test_a_poison_arm_whose_agent_failed_says_the_failure():
    """The H200's poison trials before 496a9d3: the torch hook raised; the report said 'CUDA never started'."""
    from faultkit.amplify.reach import _agent_note
    h = {"pid": 593, "armed": ["faulthandler", "torch-import-hook"], "torch": "2.11.0+cu130",
         "failures": ["torch hook: TypeError: int() can't convert non-string with explicit base"]}
    assert _agent_note(h, "amplify-poison") == (" (the agent failed in it: torch hook: TypeError: int() can't "
                                                "convert non-string with explicit base)")


def test_a_cold_cache_on_a_fresh_home_is_built_where_the_trials_processes_look(tmp_path, monkeypatch):
    """The H200's ten run: a fresh machine, nothing cached. With no FAULTKIT_AGENT_CACHE the cache is
    ~/.cache/faultkit/agent of the user's HOME (XDG_CACHE_HOME is not consulted, by faultkit or the
    agent); the libraries are there before trial 1 starts, and trial 1's processes, whose environment the
    trial recorded, compute the same folder."""
    from faultkit.agent import build
    cxx, log = shim(tmp_path)
    cuda_torch(tmp_path, monkeypatch)
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.delenv("FAULTKIT_AGENT_CACHE", raising=False)
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    cache = home / ".cache" / "faultkit" / "agent"
    assert not cache.exists()
    out = tmp_path / "amp"
    res = CliRunner().invoke(main, ["amplify", "run", "--arm", "caching-off", "--arm", "poison", "-n", "1",
                                    "--timeout", "20s", "-o", str(out), "--", *f"{SAMPLE} --port 1 --device cpu "
                                    "--serve-for 0.5".split()], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    built = sorted(cache.glob("*.so"))
    assert sorted(p.name.split("-")[0] for p in built) == ["poison", "tracker"] and not xdg.exists()
    first = min((json.loads(p.read_text())["clocks"]["start"]["wall"], p.parent)
                for p in out.glob("trial-*/result.json"))
    assert max(p.stat().st_mtime for p in built) < first[0]
    procs = json.loads((first[1] / "environ.json").read_text())
    assert procs
    for proc in procs:
        monkeypatch.setattr(os, "environ", dict(proc["env"]))
        monkeypatch.setenv("HOME", proc["env"]["HOME"])
        assert build.cache_dir() == str(cache)


def test_a_cpu_torch_has_nothing_to_build_and_is_not_imported_for_it(tmp_path, monkeypatch):
    """The machine's own torch when it is a CPU build (this CI's): the build-ahead reads its version.py
    and says so; no compiler runs (the CPU wheel lacks c10/cuda's headers: every amplify run spent 2 s
    importing torch to fail that compile)."""
    torch = pytest.importorskip("torch", reason="no torch here: the CPU-build case needs one")
    if torch.version.cuda is not None or getattr(torch.version, "hip", None):
        pytest.skip(f"torch {torch.__version__} here is a CUDA/ROCm build")
    cxx, log = shim(tmp_path)
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("FAULTKIT_AGENT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "amp"
    res = CliRunner().invoke(main, ["amplify", "run", "--arm", "caching-off", "-n", "1", "--timeout", "20s", "-o",
                                    str(out), "--", *f"{SAMPLE} --port 1 --device cpu --serve-for 0.5".split()],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    said = (f"{sys.executable}: nothing to build: a CPU build of torch ({torch.__version__}): "
            "no CUDA allocator to track")
    assert said in res.output and not log.exists()
    assert "was not built" not in res.output        # not a warning: there is nothing it could build
    assert list(out.glob("trial-*/result.json"))   # the trials ran
