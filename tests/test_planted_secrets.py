"""Fifty planted secrets, of every shape issue 28 found leaking, through a real capture (process
records, manifest, the target's output with --redact-output), a debugger transcript, and the
triage reports in Markdown, HTML and JSON: none may appear in any file or on the terminal."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys

import pytest
from click.testing import CliRunner

from faultkit import redact
from faultkit.cli import main

from .test_secrets import leaked as leaks

# Inherited by the target: names with no ROC*/HIP* exemption, *_PASS/*_PWD/*_PW, secret-shaped values
# under harmless names, flags and key=value inside values, a header, a URL password.
ENV = {
    "ROCKSET_API_KEY": "rockset-key-value-0001",
    "MYSQL_PWD": "mysql-pwd-value-0002",
    "SMTP_PASS": "smtp-pass-value-0003",
    "DB_PASS": "db-pass-value-0004",
    "ADMIN_PW": "admin-pw-value-0005",
    "OPENAI_API_KEY": "sk-proj-openaiKeyValue0006xxxxxxxx",
    "BILLING": "sk_live_stripeValue0007abcdef",
    "MAPS": "AIzaSyPlantedGoogleKey0008abcdefghijklmno",
    "NPMRC_VALUE": "npm_PlantedNpmToken0009abcdefghijklmnopq",
    "SERVER_ARGS": "--api-key server-args-secret-0010 --port 30000",
    "EXTRA_OPTS": "wandb.api_key=wandb-secret-0011",
    "UPSTREAM_HEADER": "Authorization: Bearer bearer-env-secret-0012",
    "DATABASE_URL": "postgres://svc:url-pw-secret-0013@db:5432/app",
    "HIP_API_KEY": "hip-api-key-secret-0014",
    "TORCH_HUB_TOKEN": "torch-hub-token-0015",
    "CI_JOB_JWT": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIwMDE2In0.c2lnbmF0dXJlMDAxNg",
    "PUBLISH": "pypi-AgEIcHlwaS5vcmcPlantedPyPIToken0017abcdefghijklmnop",
    "GH": "ghp_PlantedGitHubToken0018abcdefghij",
    "SLACK": "xoxb-planted-slack-0019",
    "AWS_ID": "AKIAPLANTEDKEY000020",
}
# In the one string of `sh -c "..."`: flags, short -p, headers, dotted keys, quoted values, URLs.
SHELL_SECRETS = ["cli-api-key-0021", "cli-pw-0022", "hf_PlantedCliToken0023abcdefgh", "cli-bearer-token-0024",
                 "Y2xpLWJhc2ljLTAwMjU=", "cli-wandb-0026", "cli-dbpw-0027", "cli-env-dbpass-0028", "cli-url-pw-0029",
                 "cli-client-secret-0030"]
# capture's own --env
FLAG_ENV = {"HF_TOKEN": "hf_PlantedEnvFlag0031abcdefghij", "SERVE_SECRET": "env-flag-secret-0032",
            "MODEL_ARGS": "--api-key envflag-args-0033"}
# A child's argv as separate elements, and a child started through a shell of its own.
CHILD_SECRETS = ["child-api-key-0034", "child-pw-0035", "child-p-0036", "child-bearer-0037", "child-sh-token-0038"]
# The target's own output, with --redact-output.
OUTPUT_LINES = {
    "out-pw-0039": "password: out-pw-0039",
    "out-bearer-0040": "Authorization: Bearer out-bearer-0040",
    "out-token-0041": "connecting with token=out-token-0041",
    "sk-ant-outAnthropicKey0042abcdef": "key sk-ant-outAnthropicKey0042abcdef",
    "out-json-key-0043": '{"api_key": "out-json-key-0043"}',
    "out-xapikey-0044": "X-Api-Key: out-xapikey-0044",
    "sk_test_outStripeKey0045abc": "using sk_test_outStripeKey0045abc",
    "out-mysql-pw-0046": "db at mysql://root:out-mysql-pw-0046@db/x",
    "out-mysqlpwd-0047": "MYSQL_PWD=out-mysqlpwd-0047 mysql -h db",
    "npm_outNpmToken0048abcdefghijklmnopqrstuv": "npm token npm_outNpmToken0048abcdefghijklmnopqrstuv",
    "out-gdb-escaped-0049": "Starting program: /srv/app --api-key\\ out-gdb-escaped-0049",
    "AIzaSyOutGoogle0050abcdefghijklmnopqrstu": "maps AIzaSyOutGoogle0050abcdefghijklmnopqrstu",
}
FAULT = ("Memory access fault by GPU node-2 (Agent handle: 0x55d0c0a0) on address 0x7f0000001000. "
         "Reason: Page not present or supervisor privilege.")

TARGET = """
import subprocess, sys, time
kids = [
    [sys.executable, "-c", "import time; time.sleep(1.2)", "--api-key", "child-api-key-0034",
     "--password=child-pw-0035", "-p", "child-p-0036", "Authorization: Bearer child-bearer-0037"],
    ["sh", "-c", "sleep 1.2; : --token child-sh-token-0038"],
]
procs = [subprocess.Popen(k) for k in kids]
time.sleep(0.8)
for line in OUTPUT:
    print(line, flush=True)
print(FAULT, flush=True)
for p in procs:
    p.wait()
"""

SECRETS = (list(ENV.values()) + SHELL_SECRETS + list(FLAG_ENV.values()) + CHILD_SECRETS + list(OUTPUT_LINES))
# The parts of composite values that are the secret itself (a value like "--api-key X --port 1"
# is kept apart from its secret: the flag and the port are evidence).
NEEDLES = [s for s in SECRETS if not s.startswith(("--", "wandb.", "Authorization", "postgres://"))] + [
    "server-args-secret-0010", "wandb-secret-0011", "bearer-env-secret-0012", "url-pw-secret-0013",
    "envflag-args-0033"]


def test_fifty_planted_secrets_reach_no_file_and_no_terminal(tmp_path, monkeypatch):
    assert len(set(NEEDLES)) >= 50
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    script = tmp_path / "server.py"
    script.write_text(f"OUTPUT = {list(OUTPUT_LINES.values())!r}\nFAULT = {FAULT!r}\n{TARGET}")
    shell = (f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} --api-key cli-api-key-0021 -p cli-pw-0022 "
             f"--hf-token=hf_PlantedCliToken0023abcdefgh -H 'Authorization: Bearer cli-bearer-token-0024' "
             f"-H \"Authorization: Basic Y2xpLWJhc2ljLTAwMjU=\" wandb.api_key=cli-wandb-0026 "
             f"--db-password 'cli-dbpw-0027' --env DB_PASS=cli-env-dbpass-0028 "
             f"--model https://user:cli-url-pw-0029@host/x --client-secret=cli-client-secret-0030 --port 30000")
    out = tmp_path / "bundle"
    args = ["capture", "--redact-output", "--timeout", "30s", "-o", str(out)]
    for k, v in FLAG_ENV.items():
        args += ["--env", f"{k}={v}"]
    res = CliRunner().invoke(main, [*args, "--", "sh", "-c", shell])
    assert res.exit_code == 0, res.output
    reports = tmp_path / "reports"
    for ext in ("md", "html", "json"):
        r = CliRunner().invoke(main, ["triage", str(out), "-o", str(reports / f"report.{ext}")])
        assert r.exit_code == 0, r.output
        assert not [n for n in NEEDLES if n in r.output]
    assert leaks(out, NEEDLES) == [] and leaks(reports, NEEDLES) == []
    # The terminal: faultkit's own lines hold no secret; the target's output is mirrored as the
    # target wrote it (to the user's own terminal, as without faultkit), and only those lines.
    own = [ln for ln in res.output.splitlines() if ln not in OUTPUT_LINES.values()]
    assert not [n for n in NEEDLES if any(n in ln for ln in own)]
    # What was hidden is marked, and the evidence around it kept.
    m = json.loads((out / "manifest.json").read_text())
    assert "--api-key <redacted> -p <redacted>" in m["command"] and "--port 30000" in m["command"]
    assert "Authorization: Bearer <redacted>" in m["command"] and "wandb.api_key=<redacted>" in m["command"]
    assert m["env_requested"] == {"HF_TOKEN": "<redacted>", "SERVE_SECRET": "<redacted>",
                                  "MODEL_ARGS": "--api-key <redacted>"}
    assert m["env_check"]["ok"], m["env_check"]          # fingerprints still compare the real values
    procs = json.loads((out / "environ.json").read_text())
    env = next(p for p in procs if "SERVER_ARGS" in p["env"])["env"]
    assert env["SERVER_ARGS"] == "--api-key <redacted> --port 30000"
    assert env["MYSQL_PWD"] == env["ROCKSET_API_KEY"] == env["HIP_API_KEY"] == "<redacted>"
    assert env["HSA_COREDUMP_PATTERN"].endswith("gpucore.%p")     # evidence variables kept
    log = (out / "server.log").read_text()
    assert "password: <redacted>" in log and "Authorization: Bearer <redacted>" in log
    assert FAULT in log
    report = json.loads((reports / "report.json").read_text())
    assert report["capture"]["command"] == m["command"]
    # Every file, reports included, is its owner's only.
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in [*out.rglob("*"), *reports.rglob("*")] if p.is_file()}
    assert set(modes.values()) == {0o600}, modes


C_PROGRAM = r"""
#include <signal.h>
#include <stdio.h>
#include <string.h>
static int connect_db(const char *api_key, int port) {
    char password[32];
    strcpy(password, "gdb-local-pw-0053");
    volatile int *bad = 0;
    printf("connecting %zu %d\n", strlen(api_key) + strlen(password), port);
    fflush(stdout);
    return *bad;
}
int main(int argc, char **argv) { return connect_db(argv[3], 30000); }
"""


@pytest.mark.skipif(not shutil.which("gdb") or not shutil.which("cc"), reason="needs GNU gdb and a C compiler")
def test_debugger_transcript_hides_escaped_flags_and_secret_strings(tmp_path):
    src = tmp_path / "t.c"
    src.write_text(C_PROGRAM)
    exe = tmp_path / "t"
    subprocess.run(["cc", "-g", "-O0", "-o", str(exe), str(src)], check=True)
    out = tmp_path / "b"
    # argv[1] holds a space: gdb prints it escaped (`--token\ X`); argv[3] is the string the
    # backtrace shows as `api_key=0x... "X"`; the local `password` appears in `bt full`.
    res = CliRunner().invoke(main, ["capture", "--with", "gdb", "--timeout", "60s", "-o", str(out), "--", str(exe),
                                    "--token gdb-escaped-0052", "--api-key", "gdb-arg-0051"])
    text = (out / "debugger.txt").read_text()
    assert "connect_db" in text and "password" in text, text[-2000:]      # the frames were printed
    assert 'api_key=0x' in text and '"<redacted>"' in text
    reports = tmp_path / "r"
    for ext in ("md", "json"):
        CliRunner().invoke(main, ["triage", str(out), "-o", str(reports / f"report.{ext}")])
    needles = ["gdb-escaped-0052", "gdb-arg-0051", "gdb-local-pw-0053"]
    assert leaks(out, needles) == [] and leaks(reports, needles) == []
    assert not [n for n in needles if n in res.output]


@pytest.mark.parametrize("raw, shown", [
    # issue 28's reproducers, one per shape
    ('/bin/sh -c "python s.py --api-key X1 -p X2"', '/bin/sh -c "python s.py --api-key <redacted> -p <redacted>"'),
    ("curl -H 'Authorization: Bearer abcdefgh12345678' x", "curl -H 'Authorization: Bearer <redacted>' x"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic <redacted>"),
    ("python train.py wandb.api_key=abc123", "python train.py wandb.api_key=<redacted>"),
    ('SERVER_ARGS="--api-key X"', 'SERVER_ARGS="--api-key <redacted>"'),
    ("MYSQL_PWD=a SMTP_PASS=b --env DB_PASS=c", "MYSQL_PWD=<redacted> SMTP_PASS=<redacted> --env DB_PASS=<redacted>"),
    ("ROCKSET_API_KEY=x ROCR_VISIBLE_DEVICES=0,1", "ROCKSET_API_KEY=<redacted> ROCR_VISIBLE_DEVICES=0,1"),
    ("sk_live_abcdefghij1234 AIzaSyA1234567890abcdefghijklmnopqrstuv npm_abcdefghijklmnopqrstuvwxyz0123456789",
     "<redacted> <redacted> <redacted>"),
    (r"Starting program: /srv/app --api-key\ SECRET\ --port\ 30000",
     r"Starting program: /srv/app --api-key\ <redacted>\ --port\ 30000"),
    ('#1  0x0000555 in connect_db (api_key=0x7ffd5e2c "sekrit", port=30000) at t.c:9',
     '#1  0x0000555 in connect_db (api_key=0x7ffd5e2c "<redacted>", port=30000) at t.c:9'),
    ('        password = "hunter22"', '        password = "<redacted>"'),
    ("password: hunter22", "password: <redacted>"),
    # evidence stays: ports after -p, paths after -p, counts named like tokens
    ("mkdir -p /tmp/x && python -u s.py -p 8080 --max-new-tokens 512", "mkdir -p /tmp/x && python -u s.py -p 8080 "
     "--max-new-tokens 512"),
    ("kernel key: 0x10 session length 4", "kernel key: 0x10 session length 4"),
    ("Decode batch. #running-req: 61, #token: 48312, token usage: 0.21", "Decode batch. #running-req: 61, "
     "#token: 48312, token usage: 0.21"),
])
def test_issue_28_shapes(raw, shown):
    assert redact.text(raw) == shown


def test_redaction_keeps_the_line_count_and_cut_quotes_hide_their_secret():
    # server.times.tsv numbers the recorded log's lines: no redaction may join or split them
    for raw in ('--api-key "abc\nline2 "x"\nline3', "password:\nnext line", "Authorization:\nBearer abcdefgh12345"):
        assert redact.text(raw).count("\n") == raw.count("\n")
    assert redact.text('--api-key "cut-secret-77') == "--api-key <redacted>"      # a line cut inside the quote


def test_a_long_block_is_redacted_line_by_line_like_a_short_one():
    lines = ["plain line %d elapsed=0.2s" % i for i in range(400)] + ["password: hunter22", "--api-key X1 -p X2"]
    block = "\n".join(lines)
    assert len(block) > 4096
    assert redact.text(block) == "\n".join(redact.text(ln) for ln in lines)
    assert redact.text(block).endswith("password: <redacted>\n--api-key <redacted> -p <redacted>")


def test_single_string_command_lines_in_argv():
    assert redact.argv(["/bin/sh", "-c", "server --api-key X1 -p X2 --port 1"]) == \
        ["/bin/sh", "-c", "server --api-key <redacted> -p <redacted> --port 1"]
    assert redact.argv(["x", "wandb.api_key=Y", "-p", "Z", "-p", "8080", "--env", "DB_PASS=x"]) == \
        ["x", "wandb.api_key=<redacted>", "-p", "<redacted>", "-p", "8080", "--env", "DB_PASS=<redacted>"]
    assert redact.env({"SERVER_ARGS": "--api-key X --port 1", "ROCR_VISIBLE_DEVICES": "0", "HSA_XNACK": "1",
                       "PWD": "/home/u"}) == \
        {"SERVER_ARGS": "--api-key <redacted> --port 1", "ROCR_VISIBLE_DEVICES": "0", "HSA_XNACK": "1",
         "PWD": "/home/u"}


def test_fingerprints_are_salted_hmacs():
    a, b = redact.fingerprint("hunter2", "salt-a"), redact.fingerprint("hunter2", "salt-b")
    assert a != b and a == redact.fingerprint("hunter2", "salt-a")
    import hashlib
    import hmac
    assert a == "hmac-sha256:" + hmac.new(b"salt-a", b"hunter2", hashlib.sha256).hexdigest()
    assert len(a.split(":")[1]) == 64                 # the whole digest, not a 64-bit prefix
    assert hashlib.sha256(b"hunter2").hexdigest()[:16] not in a


def test_trials_plan_fingerprints_use_the_plan_salt(tmp_path):
    from faultkit.trials.runner import Arm, load_or_create_plan
    arms = [Arm("a", "srv --api-key sk-plantedOpenAIKey1234567890abcdef", {"HF_TOKEN": "hf_x1234567890123456789"}),
            Arm("b", "srv")]
    plan = load_or_create_plan(tmp_path, arms, 1, 0, None, None, 10.0)
    salt = plan.salt
    assert len(salt) >= 32
    fp = plan.spec.arms[0].command_fingerprint
    assert fp == redact.fingerprint(arms[0].command, salt)
    assert load_or_create_plan(tmp_path, arms, 1, 0, None, None, 10.0).salt == salt     # resumed: same salt
    other = tmp_path / "other"
    assert load_or_create_plan(other, arms, 1, 0, None, None, 10.0).spec.arms[0].command_fingerprint != fp


def test_trials_plan_holds_no_client_secret(tmp_path):
    from faultkit.trials.runner import Arm, load_or_create_plan
    arms = [Arm("a", "srv"), Arm("b", "srv")]
    client = "bench --host x -H 'Authorization: Bearer client-bearer-0099' --api-key client-key-0098"
    plan = load_or_create_plan(tmp_path, arms, 1, 0, client, None, 10.0)
    text = (tmp_path / "plan.json").read_text()
    assert "client-bearer-0099" not in text and "client-key-0098" not in text
    assert plan.spec.client == "bench --host x -H 'Authorization: Bearer <redacted>' --api-key <redacted>"
    other = client.replace("client-key-0098", "client-key-0097")          # another secret: another experiment
    from faultkit.trials.runner import TrialsError
    with pytest.raises(TrialsError, match="different experiment"):
        load_or_create_plan(tmp_path, arms, 1, 0, other, None, 10.0)
    assert load_or_create_plan(tmp_path, arms, 1, 0, client, None, 10.0).salt == plan.salt


# ---- issue 36: every secret shape of redact.SHAPES and of the README, through every verb ----
PEM_LINES = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCplantedPem0309a", "plantedPem0309bKeyBodySecondLineAbCdEfGhIjKlMnOp"]
SHAPE_ENV = {
    "SSHPASS": "sshpass-0301",
    "MYSQL_CMD": "mysql -h db -pmysql-attached-0302 app",
    "CURL_CMD": "curl -u admin:curl-pw-0303 https://api.internal/x",
    "BLOB_URL": "https://acct.blob.core.windows.net/c/b?sv=2021-08-06&sp=r&se=2030-01-01&sig=sas-sig-0304",
    "S3_URL": "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=amz-cred-0305"
              "&X-Amz-Expires=3600&X-Amz-Signature=amz-sig-0306",
    "GCS_URL": "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=goog-sig-0307",
    "DB_URL": "postgres://svc:url-pw-0308@db:5432/app",
    "TLS_MATERIAL": "-----BEGIN PRIVATE KEY-----\n" + "\n".join(PEM_LINES) + "\n-----END PRIVATE KEY-----",
    "UPSTREAM": "Authorization: Bearer bearer-0310",
    "OPENAI": "sk-proj-plantedOpenai0311abcdefgh",
    "HUB": "hf_plantedHubToken0312abcdefgh",
    "GHUB": "ghp_plantedGithub0313abcdefghij",
    "INNER": "SSHPASS=inner-sshpass-0314 MODE=1",
    "SERVER_OPTS": "--api-key inner-api-0315 --port 8000",
    "MY_SERVICE_TOKEN": "by-name-0316",
    "CI_JWT_VALUE": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIwMzE3In0.c2lnbmF0dXJlMDMxNw",
    # true values that are not secrets: kept
    "ETW_FILTER": "keywords=0x0 level=4",
    "KEYWORDS": "0x0",
}
SHAPE_ARGS = ["-pargs-mysql-0320", "-u", "admin:args-curl-0321", "https://x.internal/f?sv=1&sig=args-sig-0322",
              "--token", "args-token-0323"]
SHAPE_OUTPUT = ["connecting: mysql -h db -pout-mysql-0324", "GET https://h/x?sig=out-sig-0325&se=1",
                "curl -u root:out-curl-0326 http://h", "-----BEGIN RSA PRIVATE KEY-----", "outPemBodyLine0327abcdef",
                "-----END RSA PRIVATE KEY-----", "ETW keywords=0x0 ok"]
SHAPE_NEEDLES = ["sshpass-0301", "mysql-attached-0302", "curl-pw-0303", "sas-sig-0304", "amz-cred-0305", "amz-sig-0306",
                 "goog-sig-0307", "url-pw-0308", *PEM_LINES, "bearer-0310", "plantedOpenai0311", "plantedHubToken0312",
                 "plantedGithub0313", "inner-sshpass-0314", "inner-api-0315", "by-name-0316", "c2lnbmF0dXJlMDMxNw",
                 "args-mysql-0320", "args-curl-0321", "args-sig-0322", "args-token-0323", "out-mysql-0324",
                 "out-sig-0325", "out-curl-0326", "outPemBodyLine0327", "trials-curl-0330", "trials-sig-0331"]
SHAPE_TARGET = """
import sys, time
for line in OUTPUT:
    print(line, flush=True)
print(FAULT, flush=True)
time.sleep(SLEEP)
"""


def test_every_secret_shape_through_every_verb(tmp_path):
    from .test_secrets import leaked_anywhere
    env = {**os.environ, **SHAPE_ENV}
    printed: list[str] = []

    def cli(*args, ok=(0,), **kw):
        r = subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                           timeout=300, env=env, **kw)
        printed.extend([r.stdout, r.stderr])
        assert r.returncode in ok, (args, r.returncode, r.stderr[-2000:])
        return r

    script = tmp_path / "server.py"
    script.write_text(f"OUTPUT = {SHAPE_OUTPUT!r}\nFAULT = {FAULT!r}\nSLEEP = float(sys.argv[-1])\n{SHAPE_TARGET}"
                      .replace("SLEEP = float", "import sys\nSLEEP = float"))
    bundle = tmp_path / "bundle"
    cli("capture", "--redact-output", "--timeout", "60s", "-o", bundle, "--", sys.executable, script, *SHAPE_ARGS, "0.5")
    # the target's own output is mirrored to the terminal as it wrote it (as without faultkit): only those lines
    printed[-2:] = ["\n".join(ln for ln in p.splitlines() if ln not in SHAPE_OUTPUT) for p in printed[-2:]]
    reports = tmp_path / "reports"
    for ext in ("md", "html", "json"):
        cli("triage", bundle, "-o", reports / f"report.{ext}")
    cli("triage", bundle)
    cli("show", bundle)
    cli("show", bundle, "--format", "json")
    cli("pack", bundle, "-v", "-o", tmp_path / "packs" / "incident.tar.gz")
    cli("pack", bundle, "-v", "--with-env", "-o", tmp_path / "packs" / "with-env.tar.gz")
    # dump and watch read a live process: its command line and environment hold the shapes
    sleeper = subprocess.Popen([sys.executable, script, *SHAPE_ARGS, "60"], env=env, stdout=subprocess.DEVNULL)
    try:
        cli("dump", "--pid", sleeper.pid, "--samples", "1", "-o", tmp_path / "dump", ok=(0, 1))
        cli("dump", "--pid", sleeper.pid, "--samples", "1", "--format", "json", ok=(0, 1))
        klog = tmp_path / "kern.log"
        klog.write_text(f"[ 100.000000] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 "
                        f"vmid:8 pasid:32768, for process python pid {sleeper.pid} thread python pid {sleeper.pid})\n")
        spool, db = tmp_path / "spool", tmp_path / "registry.duckdb"
        cli("watch", "--mode", "npd", "--from-start", "--quiet-after", "0s", "--spool", spool, "--kernel-log", klog,
            "--db", db, "-v", ok=(1,))
    finally:
        sleeper.kill()
        sleeper.wait()
    incident = next(d for d in spool.iterdir() if d.is_dir())
    procs = json.loads((incident / "manifest.json").read_text())["processes"]
    assert procs and procs[0]["pid"] == sleeper.pid and "env" in procs[0], procs     # the records were read
    cli("registry", "add", "-v", "--db", db, incident / "report.json", bundle)
    cli("registry", "top", "--db", db)
    sig = json.loads(cli("registry", "top", "--db", db, "-f", "json").stdout)["signatures"][0]["signature"]
    cli("registry", "show", sig, "--db", db)
    cli("registry", "similar", bundle, "--db", db)
    cli("registry", "export", "--db", db, "-o", tmp_path / "export.parquet")
    trials = tmp_path / "trials"
    cli("trials", "run", "--arm", "a=sh -c 'echo ready; sleep 3'", "--arm", "b=sh -c 'echo ready; sleep 3'", "-n", "1",
        "--ready-pattern", "ready", "--client", "true -u admin:trials-curl-0330 https://h/x?sv=1&sig=trials-sig-0331",
        "-o", trials)
    cli("trials", "report", trials)
    # every byte written (archives opened, UTF-16 read) and printed
    assert [x for x in leaked_anywhere(tmp_path, SHAPE_NEEDLES) if not x.startswith("server.py:")] == []
    assert [n for n in SHAPE_NEEDLES if any(n in p for p in printed)] == []
    # what is kept: the non-secret true values, and the marks where secrets were
    environ = (bundle / "environ.json").read_text()
    assert '"KEYWORDS": "0x0"' in environ and '"ETW_FILTER": "keywords=0x0 level=4"' in environ
    assert '"MYSQL_CMD": "mysql -h db -p<redacted> app"' in environ
    assert "sig=<redacted>" in environ and "X-Amz-Expires=3600" in environ
    log = (bundle / "server.log").read_text()
    assert "ETW keywords=0x0 ok" in log and "GET https://h/x?sig=<redacted>&se=1" in log
    assert json.loads((trials / "plan.json").read_text())["spec"]["client"] == \
        "true -u admin:<redacted> https://h/x?sv=1&sig=<redacted>"
