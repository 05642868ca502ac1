"""Planted secrets never reach what faultkit writes, and bundles are private to their owner."""

from __future__ import annotations

import json
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


def every_byte(root: Path):
    """(name, bytes) of every file under `root`, and of what each holds once opened: a gzip, xz or bzip2
    stream inflated, a tar archive's members, recursively (a secret in a pack is in its members)."""
    import bz2
    import gzip
    import io
    import lzma
    import tarfile

    def inside(name: str, data: bytes, depth: int = 0):
        yield name, data
        if depth > 4:
            return
        for magic, mod in ((b"\x1f\x8b", gzip), (b"\xfd7zXZ", lzma), (b"BZh", bz2)):
            if data.startswith(magic):
                yield from inside(name + "|inflated", mod.decompress(data), depth + 1)
        if data[257:262] == b"ustar":
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                for m in tar.getmembers():
                    if m.isfile():
                        yield from inside(f"{name}:{m.name}", tar.extractfile(m).read(), depth + 1)

    for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
        if p.is_file() and not p.is_symlink():
            yield from inside(str(p.relative_to(root) if root.is_dir() else p.name), p.read_bytes())


def leaked_anywhere(root: Path, needles) -> list[str]:
    """Needles found in any byte written, as UTF-8 or as UTF-16 (both byte orders)."""
    found = []
    for name, data in every_byte(root):
        for n in needles:
            forms = (n.encode(), n.encode("utf-16-le"), n.encode("utf-16-be"))
            if any(f in data for f in forms):
                found.append(f"{name}: {n}")
    return found


PEM_BODY = ["MIIEowIBAAKCAQEAplantedPemBodyLineOne0001", "plantedPemBodyLineTwo0002abcdefghijklmnopq"]


def test_pack_leaves_out_or_redacts_every_text_it_holds(tmp_path):
    """Issue 36: UTF-16 and compressed logs, an earlier pack, a rocpd database, a PEM key body and a
    compressed core at the bundle's top all reached the archive."""
    import gzip
    import lzma
    import sqlite3
    import subprocess
    bundle = tmp_path / "bundle"
    res = CliRunner().invoke(main, ["capture", "--timeout", "20s", "-o", str(bundle), "--", "sh", "-c", "echo serving"])
    assert res.exit_code == 0, res.output
    (bundle / "win-tool.log").write_bytes("\ufeffconnect password: utf16-pw-0101\r\n".encode("utf-16-le"))
    (bundle / "old-server.log.gz").write_bytes(gzip.compress(b"start --api-key gz-key-0102 --port 1\n"))
    (bundle / "kern.log.xz").write_bytes(lzma.compress(b"mysql -h db -pxz-mysql-0103 app\n"))
    (bundle / "deploy.log").write_text("loading key\n-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) +
                                       "\n-----END RSA PRIVATE KEY-----\ndone\n")
    # rocpd's database: its process table holds the command line and the environment
    db = sqlite3.connect(bundle / "rocpd-results.db")
    db.execute("CREATE TABLE rocpd_info_process (pid INTEGER, command TEXT, environment TEXT)")
    db.execute("INSERT INTO rocpd_info_process VALUES (4242, 'server --token rocpd-token-0104', "
               "'{\"MYSQL_PWD\": \"rocpd-mysql-0105\", \"HIP_VISIBLE_DEVICES\": \"0\"}')")
    db.commit()
    db.close()
    # a real core of a process whose memory holds a secret, compressed, at the bundle's top
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; s = 'core-mem-secret-0106'; time.sleep(30)"])
    try:
        if shutil.which("gcore"):
            subprocess.run(["gcore", "-o", str(tmp_path / "core"), str(sleeper.pid)], capture_output=True, timeout=60)
    finally:
        sleeper.kill()
        sleeper.wait()
    core = next(tmp_path.glob("core.*"), None)
    if core is not None:
        (bundle / "core.gz").write_bytes(gzip.compress(core.read_bytes(), 1))
    # an earlier pack of the same bundle, with its environments
    earlier = CliRunner().invoke(main, ["pack", str(bundle), "--with-env", "-o", str(bundle / "earlier.tar.gz")])
    assert earlier.exit_code == 0, earlier.output
    (bundle / "environ.json").write_text(json.dumps([{"pid": 1, "env": {"X": "in-earlier-env-0107"}}]))
    out = tmp_path / "incident.tar.gz"
    res = CliRunner().invoke(main, ["pack", str(bundle), "-v", "-o", str(out)])
    assert res.exit_code == 0, res.output
    needles = ["utf16-pw-0101", "gz-key-0102", "xz-mysql-0103", "rocpd-token-0104", "rocpd-mysql-0105",
               "core-mem-secret-0106", "in-earlier-env-0107", *PEM_BODY]
    assert leaked_anywhere(out, needles) == []
    assert not [n for n in needles if n in res.output]
    members = {name.split(":", 1)[1].split("/", 1)[1]: data for name, data in every_byte(out) if ":" in name
               and "|" not in name.split(":", 1)[1]}
    manifest = json.loads(members["pack-manifest.json"])
    out_names = {f["name"]: f["why"] for f in manifest["left_out"]}
    assert "earlier.tar.gz" in out_names and "archive" in out_names["earlier.tar.gz"]
    if core is not None:
        assert "core dump" in out_names["core.gz"]
    # what could be redacted went in, redacted, its evidence kept
    assert "connect password: <redacted>" in members["win-tool.log"].decode("utf-16")
    assert gzip.decompress(members["old-server.log.gz"]) == b"start --api-key <redacted> --port 1\n"
    assert lzma.decompress(members["kern.log.xz"]) == b"mysql -h db -p<redacted> app\n"
    pem = members["deploy.log"].decode()
    assert pem.count("\n") == 6 and "-----END RSA PRIVATE KEY-----\ndone" in pem
    packed_db = tmp_path / "packed.db"
    packed_db.write_bytes(members["rocpd-results.db"])
    row = sqlite3.connect(packed_db).execute("SELECT pid, command, environment FROM rocpd_info_process").fetchone()
    assert row[0] == 4242 and row[1] == "server --token <redacted>"
    assert json.loads(row[2]) == {"MYSQL_PWD": "<redacted>", "HIP_VISIBLE_DEVICES": "0"}
