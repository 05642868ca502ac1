"""The sample's plain arm: at most 1 crash in the 10 plain trials of the live script's ten-against-ten run
(the issue's "crashing in at most 1 of 10 plain runs"; the H200's run at --reuse-rate 0.1 --seed 4 crashed
2 of 10, at its plain trials 10 and 14). The plain trials' indices come from faultkit's own seeded plan
(the script's `-n 10`, amplify's default --seed 0); the crashes from the real CPU stand-in run at each."""

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

from faultkit.trials.runner import Arm, make_plan

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "uaf_server.py"


def sample():
    spec = importlib.util.spec_from_file_location("uaf_server_sample", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def plain_indices(n: int = 10, seed: int = 0) -> list[int]:
    arms = [Arm("plain", "x"), Arm("poison", "x")]
    return [e.index for e in make_plan(arms, n, seed) if e.arm == "plain"]


def test_the_plain_trials_of_the_ten_run_are_these():
    # the H200's ten run (amp-ten's plan.json, plain against release at seed 0) had exactly these
    assert plain_indices() == [0, 2, 5, 6, 8, 10, 12, 14, 16, 19]


def test_the_default_draw_gives_at_most_one_plain_crash_in_ten():
    s = sample()
    assert s.REUSE_RATE <= 0.05
    drawn = [i for i in plain_indices() if s.reuses(s.SEED, i, s.REUSE_RATE)]
    assert len(drawn) <= 1, drawn
    # the H200's own draw, for contrast: 2 of 10 (trials 10 and 14 crashed there)
    assert [i for i in plain_indices() if s.reuses(4, i, 0.1)] == [10, 14]


def test_the_expected_plain_rate_is_the_reuse_rate():
    s = sample()
    n = 20000
    hits = sum(s.reuses(s.SEED, i, s.REUSE_RATE) for i in range(n))
    # binomial(20000, 0.05): sd 31; 5 sd either side
    assert abs(hits - n * s.REUSE_RATE) < 5 * (n * 0.05 * 0.95) ** 0.5


def run_worker(index: int, extra_env: dict | None = None) -> int:
    env = dict(os.environ, FAULTKIT_TRIAL_INDEX=str(index), **(extra_env or {}))
    for k in ("PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_NO_HIP_MEMORY_CACHING"):
        if not extra_env or k not in extra_env:
            env.pop(k, None)
    reqs = "".join(f'{{"id": {i}}}\n' for i in range(3))        # 12 steps: past step 6, where the reuse is made
    p = subprocess.run([sys.executable, str(SCRIPT), "--worker", "--device", "cpu"], input=reqs, text=True,
                       capture_output=True, env=env, timeout=60)
    return p.returncode


def test_the_real_stand_in_crashes_plain_only_where_drawn_and_amplified_always():
    s = sample()
    plain = {i: run_worker(i) for i in plain_indices()}
    crashed = [i for i, rc in plain.items() if rc != 0]
    assert crashed == [i for i in plain if s.reuses(s.SEED, i, s.REUSE_RATE)]
    assert len(crashed) <= 1
    assert all(rc in (0, -signal.SIGSEGV) for rc in plain.values())
    # caching off: every trial crashes, whatever its draw (the docstring's "by construction")
    for i in plain_indices()[:3]:
        assert run_worker(i, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}) == -signal.SIGSEGV
