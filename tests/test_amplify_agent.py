"""The agent's amplifiers in real Python processes started with the agent on PYTHONPATH, as
`faultkit amplify` starts them: hold-back keeps a function's tensors alive past its return, jitter
delays the chosen site, each process's header proves it, and neither changes what a correct program
computes."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faultkit.agent import files
from faultkit.capture.agent import SITE_DIR

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "scripts" / "uaf_server.py"

STEPS = """
import sys, weakref
import torch
freed = []
def step(i):
    t = torch.zeros(1000)
    weakref.finalize(t, freed.append, i)
    return float(t.sum())
def other(i):
    u = torch.ones(10)
    return float(u.sum())
for i in range(6):
    step(i)
    other(i)
    print("after step", i, "freed", sorted(freed), flush=True)
"""


def run(code_or_args, tmp_path: Path, env: dict, stdin: str | None = None) -> subprocess.CompletedProcess:
    agent_dir = tmp_path / "agent"
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE_DIR), str(ROOT)]),
            files.ENV_DIR: str(agent_dir), **env}
    args = [sys.executable, "-c", code_or_args] if isinstance(code_or_args, str) else [sys.executable, *code_or_args]
    return subprocess.run(args, env=full, input=stdin, capture_output=True, text=True, timeout=120)


def headers(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "agent").glob("*.json"))]


def freed_after(stdout: str) -> list[str]:
    return [ln.split("freed ", 1)[1] for ln in stdout.splitlines() if ln.startswith("after step")]


def test_hold_back_keeps_the_sites_tensors_alive(tmp_path):
    plain = run(STEPS, tmp_path / "a", {})
    assert plain.returncode == 0, plain.stderr
    # without it, a step's tensor is freed when the step returns
    assert freed_after(plain.stdout) == ["[0]", "[0, 1]", "[0, 1, 2]", "[0, 1, 2, 3]", "[0, 1, 2, 3, 4]",
                                         "[0, 1, 2, 3, 4, 5]"]
    held = run(STEPS, tmp_path / "b", {files.ENV_HOLD: "step", files.ENV_HOLD_MAX: "2", files.ENV_HOLD_MS: "60000"})
    assert held.returncode == 0, held.stderr
    # held for two more returns of the site: freed only when the third return pushes it out
    assert freed_after(held.stdout) == ["[]", "[]", "[0]", "[0, 1]", "[0, 1, 2]", "[0, 1, 2, 3]"]
    h = headers(tmp_path / "b")[0]
    assert files.ARMED_HOLD in h["armed"] and h["amplify"]["hits"] == {"step": 1}     # saved at the first hit
    assert h["amplify"]["mechanism"].startswith("sys.monitoring" if sys.version_info >= (3, 12) else "sys.setprofile")
    # the other function's tensor is not held: only the named site is
    assert "other" not in json.dumps(h["amplify"])


def test_hold_back_releases_after_its_time(tmp_path):
    held = run(STEPS.replace("    other(i)\n", "    other(i)\n    __import__('time').sleep(0.06)\n"), tmp_path,
               {files.ENV_HOLD: "step", files.ENV_HOLD_MAX: "100", files.ENV_HOLD_MS: "100"})
    assert held.returncode == 0, held.stderr
    seen = freed_after(held.stdout)
    # with 60 ms between steps and 100 ms of holding, a tensor is released by the site's return two steps on
    assert seen[0] == "[]" and seen[-1] != "[]" and seen[-1] != "[0, 1, 2, 3, 4, 5]"


def test_jitter_delays_only_the_chosen_site(tmp_path):
    code = "def step():\n    return 1\ndef other():\n    return 2\nfor _ in range(20):\n    step(); other()\n"
    t0 = time.monotonic()
    run(code, tmp_path / "a", {files.ENV_JITTER: "other", files.ENV_JITTER_MS: "0"})
    base = time.monotonic() - t0
    t0 = time.monotonic()
    r = run(code, tmp_path / "b", {files.ENV_JITTER: "__main__:step", files.ENV_JITTER_MS: "40"})
    jittered = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    # 20 delays drawn from 0-40 ms: their sum is near 400 ms, and far above 150 ms
    assert jittered - base > 0.15
    h = headers(tmp_path / "b")[0]
    assert files.ARMED_JITTER in h["armed"] and h["amplify"]["hits"] == {"__main__:step": 1}
    assert h["amplify"]["jitter"] == {"sites": ["__main__:step"], "max_ms": 40.0, "seed": "0"}


def test_a_site_in_another_module_is_not_matched(tmp_path):
    r = run("def step():\n    return 1\nstep()\n", tmp_path, {files.ENV_JITTER: "scheduler:step"})
    assert r.returncode == 0
    h = headers(tmp_path)[0]
    assert files.ARMED_JITTER in h["armed"] and h["amplify"]["hits"] == {}     # armed, never reached


@pytest.mark.parametrize("env", [{files.ENV_HOLD: "uaf_server:decode_step"},
                                 {files.ENV_JITTER: "uaf_server:decode_step", files.ENV_JITTER_MS: "1"}])
def test_the_amplifiers_change_nothing_a_correct_program_computes(tmp_path, env):
    """The sample without its bug: the same checksums of every request with the amplifier and without."""
    reqs = "".join(json.dumps({"id": i}) + "\n" for i in range(4))
    args = [str(SAMPLE), "--worker", "--device", "cpu", "--no-bug"]
    a = run(args, tmp_path / "a", {}, stdin=reqs)
    b = run(args, tmp_path / "b", env, stdin=reqs)
    assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout == b.stdout and len(a.stdout.splitlines()) == 4
    h = headers(tmp_path / "b")[0]
    assert h["amplify"]["hits"] == {"uaf_server:decode_step": 1}


def test_poison_without_cuda_says_so(tmp_path):
    r = run("import torch\nprint(torch.ones(2).sum())\n", tmp_path, {files.ENV_POISON: "0x7f"})
    assert r.returncode == 0, r.stderr
    h = headers(tmp_path)[0]
    # the poison's own settings parse without CUDA too: an unset minimum size once raised a TypeError in
    # the torch hook, which then armed nothing at all (seen live on the H200: every poison trial not reached)
    assert h["failures"] == []
    assert files.ARMED_POISON not in h["armed"] and "torch" in h
    from faultkit.amplify.reach import _agent_note
    assert _agent_note(h, files.ARMED_POISON) == " (CUDA never started in it)"


def _python312():
    import glob
    import shutil
    found = [shutil.which(n) for n in ("python3.13", "python3.12")] + \
        sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python")))
    for path in found:
        if path and subprocess.run([path, "-c", "import sys; assert sys.version_info >= (3, 12)"],
                                   capture_output=True).returncode == 0:
            return path
    return None


def test_sys_monitoring_path_on_python_312(tmp_path):
    """The path the GPU machines take (Python 3.12+): the same hold-back and hits through sys.monitoring,
    with every other function disabled after its first call."""
    py = _python312()
    if py is None:
        pytest.skip("no python3.12 or python3.13 on PATH: the sys.monitoring path is not exercised here")
    code = ("import weakref\nfreed = []\nclass Blk:\n    def data_ptr(self): return id(self)\n"
            "def step(i):\n    b = Blk()\n    weakref.finalize(b, freed.append, i)\n"
            "def other():\n    return 2\n"
            "for i in range(4):\n    step(i); other()\n    print('after step', i, 'freed', sorted(freed))\n")
    env = {**os.environ, "PYTHONPATH": str(SITE_DIR), files.ENV_DIR: str(tmp_path / "agent"),
           files.ENV_HOLD: "step", files.ENV_HOLD_MAX: "1", files.ENV_HOLD_MS: "60000"}
    r = subprocess.run([py, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert freed_after(r.stdout) == ["[]", "[0]", "[0, 1]", "[0, 1, 2]"]
    h = headers(tmp_path)[0]
    assert h["amplify"]["mechanism"] == "sys.monitoring" and h["amplify"]["hits"] == {"step": 1}


def test_release_claims_nothing_without_cuda(tmp_path):
    """The release amplifier is armed only once it really released (CUDA started): on a CPU-only torch
    the site is hit, nothing is released, and the header does not say it was armed."""
    r = run(STEPS, tmp_path, {files.ENV_RELEASE: "step"})
    assert r.returncode == 0, r.stderr
    h = headers(tmp_path)[0]
    assert h["amplify"]["hits"] == {"step": 1} and h["amplify"]["release"] == {"sites": ["step"], "released": 0}
    assert files.ARMED_RELEASE not in h["armed"]
    from faultkit.amplify.reach import _agent_note
    assert _agent_note(h, files.ARMED_RELEASE) == " (CUDA never started in it: nothing cached to release)"
