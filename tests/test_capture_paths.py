"""Every path capture hands its target is absolute (issue 31 A6): a relative `-o` once put
`b/cores/gpucore.%p` into HSA_COREDUMP_PATTERN, so a worker that changed directory wrote its GPU
cores and flight records outside the bundle. The target here changes directory, then prints the
environment it really has."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from click.testing import CliRunner

from faultkit.cli import main

PRINT_ENV = "import json, os; os.chdir('/'); print('ENV=' + json.dumps(dict(os.environ)), flush=True)"
# The variables that name where the runtimes write into the bundle (reference/gpu_coredumps.md,
# PyTorch's flight recorder).
BUNDLE_PATHS = ("HSA_COREDUMP_PATTERN", "CUDA_COREDUMP_FILE", "CUDA_COREDUMP_PIPE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


def test_a_relative_output_hands_the_target_only_absolute_paths_inside_the_bundle(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["capture", "-q", "--timeout", "60s", "-o", "rel/b", "--",
                                    sys.executable, "-c", PRINT_ENV])
    assert res.exit_code == 0, res.output
    bundle = (tmp_path / "rel" / "b").resolve()
    line = next(ln for ln in (bundle / "server.log").read_text().splitlines() if "ENV=" in ln)
    env = json.loads(line.split("ENV=", 1)[1])
    assert set(BUNDLE_PATHS) <= set(env), sorted(env)
    for name in BUNDLE_PATHS:
        assert os.path.isabs(env[name]) and Path(env[name]).parent.resolve().is_relative_to(bundle), \
            (name, env[name])
    # and any other path faultkit added: absolute; those naming the bundle, inside it
    added = {k: v for k, v in env.items() if os.environ.get(k) != v}
    for name, value in added.items():
        for part in value.split(os.pathsep):
            if "rel/b" in part or part.startswith(("rel", "./")):
                assert os.path.isabs(part) and Path(part).resolve().is_relative_to(bundle), (name, part)


# ---- issue 31 B: a capture ends at its --timeout, and -q says nothing but warnings and errors ----

def test_a_timeout_ends_at_its_deadline_with_the_stacks_taken_before_it(tmp_path):
    """`--timeout 20s` ended at 26 s: the stacks were sampled after the deadline. They are taken
    before it now; the end is the deadline and a short stop (an idle sleeper stops at SIGINT)."""
    import subprocess
    import time
    out = tmp_path / "b"
    root = Path(__file__).resolve().parent.parent
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-q", "--timeout", "8s", "-o", str(out),
                           "--", sys.executable, "-c", "import time; print('up', flush=True); time.sleep(100)"],
                          cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})
    took = time.monotonic() - t0
    m = json.loads((out / "manifest.json").read_text())
    assert proc.returncode == 124 and m["ended_by"] == "timeout"
    ran = (m["end"]["monotonic_ns"] - m["start"]["monotonic_ns"]) / 1e9
    # the deadline, and a bounded stop (stacks sampled after it ran to 12.6 s here on an idle machine)
    assert 8 <= ran <= 8 + 3.5, ran
    assert [h["tag"] for h in m["hang_check"]] == ["timeout-1"]     # the stacks were still taken
    assert (out / "stacks" / "samples-timeout-1.json").is_file()
    # -q: neither the progress ("stacks of ...", "stopping: SIGINT sent ...") nor the summary
    assert proc.stderr == "" and proc.stdout == "", (proc.stdout, proc.stderr)
    assert took < 8 + 2.5 + 8                             # faultkit's own start and end stay small too
