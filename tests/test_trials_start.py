"""Trials through the real command line (`python -m faultkit.cli`, the installed entry point's code):
start-up failures are not crashes (#21 A3), helpers that exit before they are checked are not
environment mismatches (#21 A7), trials files are private and redacted (#28)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from .test_trials import free_port

ROOT = Path(__file__).resolve().parent.parent
CRASHY = f"{sys.executable} {ROOT / 'scripts' / 'crashy_server.py'}"
SECRET = "sk-plantedOpenAIKey1234567890abcdef"


def faultkit(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def results(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("trial-*/result.json"))]


# ---------------- #21 A3: a trial that never started is not a crash ----------------

def test_missing_command_stops_the_experiment_in_the_first_pair(tmp_path):
    out = tmp_path / "t"
    res = faultkit("trials", "run", "--arm", "base=true", "--arm", "fix=nosuch-command-faultkit", "-n", "5",
                   "--trial-timeout", "20s", "-o", str(out))
    assert res.returncode == 3, res.stderr                     # README: trials run, 3 = an arm failed to start
    assert "arm fix failed to start in its first trial: command not found (exit status 127" in res.stderr
    assert "nosuch-command-faultkit" in res.stderr and "Traceback" not in res.stderr
    done = results(out)
    assert len(done) <= 2 and all(r["pair"] == 0 for r in done)     # stopped in pair 0 of 5
    fix = next(r for r in done if r["arm"] == "fix")
    assert fix["outcome"] == "failed-to-start" and fix["crashed"] is False and fix["exit_code"] == 127
    report = json.loads(faultkit("trials", "report", str(out), "-f", "json").stdout)
    fix_arm = next(a for a in report["arms"] if a["arm"] == "fix")
    assert (fix_arm["crashes"], fix_arm["trials"]) == (0, 0)
    assert fix_arm["failed_to_start_trials"][0]["index"] == fix["index"]
    assert not any("crashes more often" in c["conclusion"] for c in report["comparisons"])


def test_missing_script_and_not_executable_are_start_failures(tmp_path):
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)                                         # not executable
    out = tmp_path / "a"
    res = faultkit("trials", "run", "--arm", "base=true", "--arm", f"fix={sys.executable} {tmp_path}/nosuch.py",
                   "-n", "3", "--trial-timeout", "20s", "-o", str(out))
    assert res.returncode == 3, res.stderr
    assert "arm fix failed to start in its first trial: script not found (exit status 2: can't open file" in res.stderr
    out = tmp_path / "b"
    res = faultkit("trials", "run", "--arm", f"base={script}", "--arm", "fix=true", "-n", "3",
                   "--trial-timeout", "20s", "-o", str(out))
    assert res.returncode == 3, res.stderr
    assert "arm base failed to start in its first trial: command not executable (exit status 126" in res.stderr


def test_server_that_never_becomes_ready_failed_to_start(tmp_path):
    port = free_port()
    out = tmp_path / "t"
    never = f"{sys.executable} -c 'import time; time.sleep(30)' --port {port}"      # never listens
    res = faultkit("trials", "run", "--arm", f"base={CRASHY} --rate 0 --port {port} --run-for 0.5",
                   "--arm", f"fix={never}", "--client", "true", "-n", "2", "--trial-timeout", "3s", "-o", str(out))
    assert res.returncode == 3, res.stderr
    assert "arm fix failed to start in its first trial: never became ready before the trial's timeout" in res.stderr


def test_start_failure_in_a_later_pair_is_kept_and_not_counted(tmp_path):
    out = tmp_path / "t"
    # the fix arm starts in pair 0 (trials 0 and 1) and its command is missing from pair 1 on
    flaky = 'test "$FAULTKIT_TRIAL_INDEX" -lt 2 || exec nosuch-command-faultkit'
    args = ("trials", "run", "--arm", "base=true", "--arm", f"fix={flaky}", "-n", "2", "--trial-timeout", "20s",
            "-o", str(out))
    res = faultkit(*args)
    assert res.returncode == 0, res.stderr
    assert "FAILED TO START (command not found (exit status 127" in res.stderr
    assert "3 trials, 0 crashed, 1 failed to start (not counted)" in res.stderr
    report = json.loads(faultkit("trials", "report", str(out), "-f", "json").stdout)
    fix = next(a for a in report["arms"] if a["arm"] == "fix")
    assert (fix["crashes"], fix["trials"], len(fix["failed_to_start_trials"])) == (0, 1, 1)
    md = faultkit("trials", "report", str(out)).stdout
    assert "1 trial(s) of fix failed to start and are not counted in its rate" in md
    # a failed start is not a finished trial: the same command tries it again
    again = faultkit(*args)
    assert again.returncode == 0 and "failed to start last time" in again.stderr


# ---------------- #21 A7: helpers that exited are not mismatches ----------------

HELPERS = ("import subprocess, time\n"
           "kids = []\n"
           "for _ in range(6):\n"
           "    kids.append(subprocess.Popen(['true']))   # never waited for: a zombie until the end\n"
           "    time.sleep(0.15)\n"
           "time.sleep(0.6)\n")


def test_helpers_that_exited_before_the_check_are_not_a_mismatch(tmp_path):
    server = tmp_path / "server.py"
    server.write_text(HELPERS)
    out = tmp_path / "t"
    res = faultkit("trials", "run", "--arm", f"base={sys.executable} {server}", "--arm", f"fix={sys.executable} {server}",
                   "--env-arm", "fix:AMD_SERIALIZE_KERNEL=3", "-n", "2", "--trial-timeout", "20s", "-o", str(out))
    assert res.returncode == 0, res.stderr
    fix = [r for r in results(out) if r["arm"] == "fix"]
    assert all(r["env"]["ok"] and not r["env"]["mismatches"] for r in fix), [r["env"] for r in fix]
    assert sum(len(r["env"]["exited"]) for r in fix) >= 1        # the zombies: listed, not mismatched
    assert "did not reach" not in res.stderr and "exited before" in res.stderr
    md = faultkit("trials", "report", str(out)).stdout
    assert "environment did not reach" not in md and "exited before their environment could be checked" in md


# ---------------- #28: trials files are private and redacted ----------------

def test_trials_files_are_private_and_the_client_is_redacted(tmp_path):
    out = tmp_path / "t"
    client = f"{sys.executable} -c pass --api-key {SECRET}"
    res = faultkit("trials", "run", "--arm", f"a={CRASHY} --rate 0 --run-for 0.2",
                   "--arm", f"b={CRASHY} --rate 0 --run-for 0.2", "--client", client, "-n", "1",
                   "--trial-timeout", "20s", "-o", str(out))
    assert res.returncode == 0, res.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["spec"]["client"] == f"{sys.executable} -c pass --api-key <redacted>"
    for p in [out, *out.rglob("*")]:
        if p.is_symlink():
            continue
        assert SECRET.encode() not in (p.read_bytes() if p.is_file() else b""), p
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), f"{p}: {oct(mode)}"
    report = tmp_path / "report.md"
    assert faultkit("trials", "report", str(out), "-o", str(report)).returncode == 0
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    # the same client resumes (compared by fingerprint); another token is another experiment
    same = faultkit("trials", "run", "--arm", f"a={CRASHY} --rate 0 --run-for 0.2",
                    "--arm", f"b={CRASHY} --rate 0 --run-for 0.2", "--client", client, "-n", "1",
                    "--trial-timeout", "20s", "-o", str(out))
    assert same.returncode == 0 and "trial 1/" not in same.stderr, same.stderr
    other = faultkit("trials", "run", "--arm", f"a={CRASHY} --rate 0 --run-for 0.2",
                     "--arm", f"b={CRASHY} --rate 0 --run-for 0.2", "--client", client.replace("1234", "9999"),
                     "-n", "1", "--trial-timeout", "20s", "-o", str(out))
    assert other.returncode == 1 and "different experiment" in other.stderr


def test_capture_says_an_environment_mismatch_in_a_sentence(tmp_path):
    res = faultkit("capture", "-q", "--env", "FAULTKIT_TEST_VAR=1", "-o", str(tmp_path / "b"), "--",
                   "env", "-u", "FAULTKIT_TEST_VAR", "sleep", "0.3")
    line = next(ln for ln in res.stderr.splitlines() if "requested environment" in ln)
    assert "did not reach every process: pid " in line and "(sleep 0.3) has no FAULTKIT_TEST_VAR (wanted " \
        "FAULTKIT_TEST_VAR=1)" in line
    assert "{'pid'" not in res.stderr and "[{" not in res.stderr


def test_a_crash_before_readiness_is_still_a_crash(tmp_path):
    port = free_port()
    out = tmp_path / "t"
    dies = f"{sys.executable} -c 'import ctypes; ctypes.string_at(0)' --port {port}"      # SIGSEGV while starting
    res = faultkit("trials", "run", "--arm", f"base={dies}", "--arm", f"fix={sys.executable} -m no_such_module_fk",
                   "--client", "true", "-n", "1", "--trial-timeout", "10s", "-o", str(out))
    by_arm = {r["arm"]: r for r in results(out)}
    assert by_arm["base"]["outcome"] == "crash" and by_arm["base"]["exit_code"] == 139
    # seed 0 puts base first in the pair, so both ran before the experiment stopped at fix
    assert by_arm["fix"]["outcome"] == "failed-to-start"
    assert "script not found (exit status 1: No module named no_such_module_fk" in by_arm["fix"]["failed_to_start"]
    assert res.returncode == 3


def test_an_arm_whose_program_refuses_its_arguments_failed_to_start(tmp_path):
    out = tmp_path / "t"
    typo = f"{sys.executable} {ROOT / 'scripts' / 'crashy_server.py'} --rate 0 --run-for-typo 1"   # argparse: exit 2
    res = faultkit("trials", "run", "--arm", f"base={CRASHY} --rate 0 --run-for 0.1", "--arm", f"fix={typo}",
                   "-n", "3", "--trial-timeout", "20s", "-o", str(out))
    assert res.returncode == 3, res.stderr
    assert ("arm fix failed to start in its first trial: the command refused its arguments (exit status 2: "
            "crashy_server.py: error: unrecognized arguments: --run-for-typo 1)") in res.stderr
