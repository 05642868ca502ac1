"""Planted secrets never reach what faultkit writes, and bundles are private to their owner."""

from __future__ import annotations

import shutil
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit import redact
from faultkit.cli import main

SECRETS = {
    "DATABASE_URL": "postgres://svc:Pa55-db-Word@db.internal:5432/app",
    "REDIS_URL": "redis://:r3dis-S3cret@cache:6379/0",
    "HTTPS_PROXY": "http://proxyuser:Pr0xy-Pass@proxy:3128",
    "PIP_INDEX_URL": "https://pipuser:P1p-Index-Pw@pypi.internal/simple",
    "SENTRY_DSN": "https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/42",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXXslackhooksecret",
    "MLFLOW_TRACKING_URI": "https://mluser:Mlfl0w-Pw@mlflow.internal",
    "CI_JOB_JWT": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJqb2IxMjM0NSJ9.c2lnbmF0dXJlLXNlY3JldA",
    "GH_PAT": "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "HF_TOKEN": "hf_PlantedHuggingFaceToken1234567",
    "MY_API_KEY": "plain-value-by-name-only-42",
}
ARGS = ["--api-key", "sk-plantedOpenAIKey1234567890abcdef", "--hf-token=hf_PlantedFlagToken99887766554433",
        "--model-url", "https://urluser:Url-Pa55word@models.internal/m"]
CHILD_TOKEN = "child-token-value-7788"


def leaked(root: Path, values) -> list[str]:
    found = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            found += [f"{p.relative_to(root)}: {v[:12]}..." for v in values if v.encode() in data]
    return found


def secret_values() -> list[str]:
    pw = ["Pa55-db-Word", "r3dis-S3cret", "Pr0xy-Pass", "P1p-Index-Pw", "Mlfl0w-Pw", "Url-Pa55word",
          "0123456789abcdef0123456789abcdef", "XXXXslackhooksecret"]
    return pw + [SECRETS["CI_JOB_JWT"], SECRETS["GH_PAT"], SECRETS["HF_TOKEN"], SECRETS["MY_API_KEY"],
                 "sk-plantedOpenAIKey1234567890abcdef", "hf_PlantedFlagToken99887766554433", CHILD_TOKEN,
                 "EnvFlagSecret-5566"]


TARGET = f"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)", "--child-token", "{CHILD_TOKEN}"])
time.sleep(1.0)
print("serving", flush=True)
child.wait()
"""


def test_no_planted_secret_reaches_the_bundle(tmp_path, monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    script = tmp_path / "server.py"
    script.write_text(TARGET)
    out = tmp_path / "bundle"
    res = CliRunner().invoke(main, ["capture", "--env", "HF_TOKEN=" + SECRETS["HF_TOKEN"], "--env",
                                    "SERVE_SECRET=EnvFlagSecret-5566", "--timeout", "20s", "-o", str(out), "--",
                                    sys.executable, str(script), *ARGS])
    assert res.exit_code == 0, res.output
    assert leaked(out, secret_values()) == []
    assert not any(v in res.output for v in secret_values())       # nor the warnings on stderr
    import json
    m = json.loads((out / "manifest.json").read_text())
    assert m["env_requested"] == {"HF_TOKEN": "<redacted>", "SERVE_SECRET": "<redacted>"}
    assert m["env_check"]["ok"], m["env_check"]                    # compared by fingerprint, not with '<redacted>'
    assert "--api-key <redacted>" in m["command"] and "urluser:<redacted>@" in m["command"]
    procs = json.loads((out / "environ.json").read_text())
    child = next(p for p in procs if "--child-token" in p["cmdline"])
    assert child["cmdline"][child["cmdline"].index("--child-token") + 1] == "<redacted>"
    env = next(p for p in procs if p["env"].get("DATABASE_URL"))["env"]
    assert env["DATABASE_URL"] == "postgres://svc:<redacted>@db.internal:5432/app"
    assert env["HSA_COREDUMP_PATTERN"].endswith("gpucore.%p")     # evidence is kept
    # Owner only: the folder 0700, every file 0600.
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.rglob("*") if p.is_file()}
    assert modes and set(modes.values()) == {0o600}, modes


def test_env_mismatch_is_said_without_the_value(tmp_path):
    out = tmp_path / "b"
    res = CliRunner().invoke(main, ["capture", "--env", "HF_TOKEN=hf_WantedValue000000000000000", "-o", str(out), "--",
                                    "env", "HF_TOKEN=hf_OtherValue11111111111111111", "sleep", "0.5"])
    assert "hf_WantedValue" not in res.output and "hf_OtherValue" not in res.output
    assert "did not reach every process" in res.output
    assert leaked(out, ["hf_WantedValue000000000000000", "hf_OtherValue11111111111111111"]) == []


@pytest.mark.skipif(not shutil.which("gdb"), reason="GNU gdb not installed (apt-get install gdb)")
def test_debugger_transcript_is_redacted(tmp_path):
    out = tmp_path / "b"
    res = CliRunner().invoke(main, ["capture", "--with", "gdb", "--timeout", "30s", "-o", str(out), "--", sys.executable,
                                    "-c", "import os; os.kill(os.getpid(), 11)", "--api-key",
                                    "sk-plantedOpenAIKey1234567890abcdef"])
    assert res.exit_code == 139, res.output      # 128+SIGSEGV: the signal the debugger stopped on (#21 A2)
    text = (out / "debugger.txt").read_text()
    assert "Starting program" in text or "process" in text
    assert leaked(out, ["sk-plantedOpenAIKey1234567890abcdef"]) == []


def test_trials_plan_and_results_hold_no_secret(tmp_path):
    out = tmp_path / "t"
    server = f"{sys.executable} -c 'import sys; sys.exit(0)'"
    res = CliRunner().invoke(main, ["trials", "run", "--arm", f"a={server} --api-key sk-plantedOpenAIKey1234567890abcdef",
                                    "--arm", f"b={server}", "--env-arm", "a:HF_TOKEN=hf_PlantedArmToken1234567890",
                                    "-n", "1", "--trial-timeout", "20s", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert leaked(out, ["hf_PlantedArmToken1234567890", "sk-plantedOpenAIKey1234567890abcdef"]) == []
    # The same command resumes (fingerprints match); another token is another experiment.
    again = CliRunner().invoke(main, ["trials", "run", "--arm", f"a={server} --api-key sk-plantedOpenAIKey1234567890abcdef",
                                      "--arm", f"b={server}", "--env-arm", "a:HF_TOKEN=hf_PlantedArmToken1234567890",
                                      "-n", "1", "--trial-timeout", "20s", "-o", str(out)])
    assert again.exit_code == 0, again.output
    other = CliRunner().invoke(main, ["trials", "run", "--arm", f"a={server} --api-key sk-plantedOpenAIKey1234567890abcdef",
                                      "--arm", f"b={server}", "--env-arm", "a:HF_TOKEN=hf_DifferentToken000000000000",
                                      "-n", "1", "--trial-timeout", "20s", "-o", str(out)])
    assert other.exit_code == 1 and "different experiment" in other.output


def test_arm_names_cannot_escape_the_output_folder(tmp_path):
    res = CliRunner().invoke(main, ["trials", "run", "--arm", "x/../../../../tmp/evil=true", "--arm", "b=true",
                                    "-n", "1", "-o", str(tmp_path / "t")])
    assert res.exit_code == 1 and "arm name" in res.output
    assert not Path("/tmp/evil").exists() or not any(Path("/tmp/evil").iterdir())


@pytest.mark.parametrize("raw, shown", [
    ("postgres://u:pw123@h/db", "postgres://u:<redacted>@h/db"),
    ("python -m sglang.launch_server --api-key abc123 --port 30000", "python -m sglang.launch_server --api-key <redacted> --port 30000"),
    ("--max-new-tokens 512 --kv-cache-dtype fp8 --key-size 64", "--max-new-tokens 512 --kv-cache-dtype fp8 --key-size 64"),
    ("token sk-ant-api03-abcdefghijklmnopqrstuv in text", "token <redacted> in text"),
    ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwx python x.py", "HF_TOKEN=<redacted> python x.py"),
    ("AMD_SERIALIZE_KERNEL=3 HSA_COREDUMP_PATTERN=/b/gpucore.%p", "AMD_SERIALIZE_KERNEL=3 HSA_COREDUMP_PATTERN=/b/gpucore.%p"),
    ("key AKIAABCDEFGHIJKLMNOP", "key <redacted>"),
])
def test_redaction_shapes(raw, shown):
    assert redact.text(raw) == shown


def test_evidence_variables_are_kept():
    env = redact.env({"HSA_TOOLS_LIB": "librocm-debug-agent.so.2", "AMD_LOG_LEVEL": "4", "NCCL_IB_HCA": "mlx5",
                      "SSH_AUTH_SOCK": "/tmp/ssh", "OPENAI_API_KEY": "x", "SESSION_TOKEN": "y"})
    assert env == {"HSA_TOOLS_LIB": "librocm-debug-agent.so.2", "AMD_LOG_LEVEL": "4", "NCCL_IB_HCA": "mlx5",
                   "SSH_AUTH_SOCK": "/tmp/ssh", "OPENAI_API_KEY": "<redacted>", "SESSION_TOKEN": "<redacted>"}
