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
