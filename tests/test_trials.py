"""Crash-rate trials: exact statistics against known values, then live runs of real processes."""

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import main

from .conftest import own_processes
from faultkit.trials.runner import make_plan, Arm
from faultkit.trials.stats import arm_rate, boschloo, fisher, min_crashes_vs_zero, power, trials_for_power

ROOT = Path(__file__).resolve().parent.parent
CRASHY = f"{sys.executable} {ROOT / 'scripts' / 'crashy_server.py'}"


# ---------------- statistics (values computed with scipy; see the issue) ----------------

def test_fisher_known_values():
    assert fisher(10, 15, 0, 15) == pytest.approx(2.0e-4, rel=0.01)
    assert fisher(10, 15, 0, 15, "greater") == pytest.approx(1.0e-4, rel=0.01)
    assert fisher(2, 5, 0, 5) == pytest.approx(0.444, abs=0.001)
    assert fisher(2, 5, 0, 5, "greater") == pytest.approx(0.222, abs=0.001)
    # the 3.2e-5 quoted in a user report is not Fisher's
    assert abs(fisher(10, 15, 0, 15) - 3.2e-5) > 1e-4


def test_boschloo_known_value():
    assert boschloo(10, 15, 0, 15) == pytest.approx(5.2e-5, rel=0.02)


@pytest.mark.parametrize("n,expected", [(10, 0.62), (12, 0.77), (15, 0.91)])
def test_exact_power(n, expected):
    assert power(0.4, 0.0, n, n, 0.05, "greater") == pytest.approx(expected, abs=0.01)


def test_trials_needed_and_crashes_needed():
    assert trials_for_power(0.4, 0.0, 0.9, 0.05, "greater")[0] == 15
    assert trials_for_power(0.4, 0.0, 0.9, 0.05, "two-sided")[0] == 18
    assert min_crashes_vs_zero(10) == 4


def test_intervals():
    r = arm_rate("a", 10, 15)
    assert r.exact_ci[0] == pytest.approx(0.384, abs=0.001) and r.exact_ci[1] == pytest.approx(0.882, abs=0.001)
    assert r.wilson_ci[0] == pytest.approx(0.417, abs=0.001) and r.wilson_ci[1] == pytest.approx(0.848, abs=0.001)


def test_plan_cli_json():
    res = CliRunner().invoke(main, ["trials", "plan", "--rate", "base=0.4", "--rate", "fix=0", "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (out["trials_per_arm"], out["alternative"]) == (15, "greater") and out["power"] == pytest.approx(0.91, abs=0.01)
    res = CliRunner().invoke(main, ["trials", "plan", "--rate", "base=0.4", "--rate", "fix=0", "-n", "12", "--format", "json"])
    assert json.loads(res.output)["power"] == pytest.approx(0.77, abs=0.01)


def test_plan_alternates_pairs_with_seeded_order():
    arms = [Arm("base", "x"), Arm("fix", "y")]
    order = make_plan(arms, 6, seed=7)
    assert order == make_plan(arms, 6, seed=7)
    for pair in range(6):
        assert sorted(e.arm for e in order if e.pair == pair) == ["base", "fix"]
    firsts = [e.arm for e in order if e.position == 0]
    assert len(set(firsts)) == 2  # the order within pairs is not fixed


# ---------------- live runs ----------------

def run_cli(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_live_trials_rates_env_and_report(tmp_path):
    out = tmp_path / "t"
    res = run_cli("trials", "run",
                  "--arm", f"base={CRASHY} --rate 1 --after 0.1 --run-for 0.2",
                  "--arm", f"fix={CRASHY} --rate 0 --run-for 0.2",
                  "--env", "fix:AMD_SERIALIZE_KERNEL=3", "-n", "3", "--seed", "7", "--timeout", "30s",
                  "--metric", r"trial (\d+)", "-o", str(out))
    assert res.exit_code == 0, res.output
    results = [json.loads(p.read_text()) for p in sorted(out.glob("trial-*/result.json"))]
    assert len(results) == 6
    assert all(r["metric"] == r["index"] for r in results)      # the server prints its trial index
    assert all(r["crashed"] for r in results if r["arm"] == "base")
    assert not any(r["crashed"] for r in results if r["arm"] == "fix")
    fix = [r for r in results if r["arm"] == "fix"]
    assert all(r["env"]["ok"] and r["env"]["wanted"] == {"AMD_SERIALIZE_KERNEL": "3"} for r in fix)
    assert all("SIGSEGV" in r["signature"] for r in results if r["crashed"])
    # each trial keeps its own bundle with the server's output and every process's environment
    t0 = sorted(out.glob("trial-000-*"))[0]
    assert "server ready" in (t0 / "server.log").read_text()
    env = json.loads((t0 / "environ.json").read_text())
    assert any("crashy_server.py" in " ".join(p["cmdline"]) for p in env)
    report = json.loads(run_cli("trials", "report", str(out), "--format", "json").output)
    base, fixa = report["arms"]
    assert (base["crashes"], base["trials"], fixa["crashes"], fixa["trials"]) == (3, 3, 0, 3)
    assert report["comparisons"][0]["fisher_two_sided"] == pytest.approx(0.1, abs=0.001)
    metric = {a["arm"]: a["metric"]["values"] for a in report["arms"]}
    assert sorted(metric["base"] + metric["fix"]) == [0, 1, 2, 3, 4, 5]
    assert report["comparisons"][0]["metric"]["mann_whitney_p"] is not None
    again = json.loads(run_cli("trials", "report", str(out), "--metric", r"(will) crash", "--format", "json").output)
    assert [a["metric"] for a in again["arms"]] == [None, None]     # no number in the group: no figure
    page = run_cli("trials", "report", str(out), "--format", "html").output
    assert "<svg" in page and "<circle" in page and "Fisher" in page
    assert "95% exact (Clopper-Pearson) interval" in page and "No difference shown" in page
    assert 'class="warn"' in page and "too few trials" in page
    assert "3 / 3" in run_cli("trials", "report", str(out)).output


def test_env_that_does_not_reach_the_worker_is_reported(tmp_path):
    out = tmp_path / "t"
    # the launcher drops the variable before starting the worker: exactly the trap users fall into
    res = run_cli("trials", "run", "--arm", f"base={CRASHY} --rate 0 --run-for 0.1",
                  "--arm", f"fix=env -u AMD_SERIALIZE_KERNEL {CRASHY} --rate 0 --run-for 0.5",
                  "--env-arm", "fix:AMD_SERIALIZE_KERNEL=3", "-n", "1", "-o", str(out))
    assert res.exit_code == 0, res.output
    fix = json.loads(next(out.glob("trial-*-fix/result.json")).read_text())
    assert not fix["env"]["ok"]
    assert any(m["variable"] == "AMD_SERIALIZE_KERNEL" and m["found"] is None for m in fix["env"]["mismatches"])
    # said as a sentence naming the process and the variable, not as a Python repr
    assert "env did not reach every process: pid " in res.output and "has no AMD_SERIALIZE_KERNEL (wanted " \
        "AMD_SERIALIZE_KERNEL=3)" in res.output and "{'pid'" not in res.output
    assert "Warning" in run_cli("trials", "report", str(out)).output


def test_stale_server_on_the_port_is_refused(tmp_path, monkeypatch):
    from faultkit.trials import runner
    wait = runner._wait_port_free      # the real check, waiting 1 s instead of the default 30 s
    monkeypatch.setattr(runner, "_wait_port_free", lambda port, wait_s: wait(port, 1.0))
    port = free_port()
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        out = tmp_path / "t"
        res = CliRunner().invoke(main, ["trials", "run", "--arm", f"a={CRASHY} --rate 0 --port {port}",
                                        "--arm", f"b={CRASHY} --rate 0 --port {port}", "-n", "1", "-o", str(out)])
        assert res.exit_code == 1 and f"port {port} is still in use" in res.output
        assert not list(out.glob("trial-*/result.json"))
    finally:
        holder.close()


def test_client_ends_trial_and_port_readiness(tmp_path):
    port = free_port()
    out = tmp_path / "t"
    client = f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {port})).close(); print('load done')\""
    res = run_cli("trials", "run", "--arm", f"a={CRASHY} --rate 0 --port {port} --run-for 30",
                  "--arm", f"b={CRASHY} --rate 0 --port {port} --run-for 30", "--client", client, "-n", "1",
                  "--trial-timeout", "20s", "-o", str(out))
    assert res.exit_code == 0, res.output
    for p in out.glob("trial-*/result.json"):
        r = json.loads(p.read_text())
        assert r["ended_by"] == "client-exit" and not r["crashed"] and r["duration_s"] < 15
        assert "load done" in (p.parent / "client.log").read_text()


def test_interrupt_and_resume(tmp_path):
    out = tmp_path / "t"
    cmd = [sys.executable, "-m", "faultkit.cli", "trials", "run",
           "--arm", f"a={CRASHY} --rate 0 --run-for 0.2", "--arm", f"b={CRASHY} --rate 0 --run-for 60",
           "-n", "2", "--seed", "3", "--trial-timeout", "4s", "-o", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    plan_order = None
    deadline = time.time() + 60
    while time.time() < deadline:
        if (out / "plan.json").exists():
            plan_order = json.loads((out / "plan.json").read_text())["order"]
        # interrupt while a long 'b' trial runs
        running_b = plan_order and any((out / f"trial-{e['index']:03d}-b" / "server.log").exists()
                                       and not (out / f"trial-{e['index']:03d}-b" / "result.json").exists()
                                       for e in plan_order if e["arm"] == "b")
        if running_b:
            break
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 130, output
    assert "resume" in output
    finished = {p.parent.name: p.stat().st_mtime for p in out.glob("trial-*/result.json")}
    assert len(finished) < 4
    # nothing of the interrupted trial is left running
    assert not own_processes("--run-for 60")
    # resume: same command, with the long arm shortened would change the spec; so it must be refused
    changed = CliRunner().invoke(main, ["trials", "run", "--arm", f"a={CRASHY} --rate 0 --run-for 0.2", "--arm",
                                        f"b={CRASHY} --rate 0 --run-for 0.1", "-n", "2", "--seed", "3",
                                        "--trial-timeout", "4s", "-o", str(out)])
    assert changed.exit_code == 1 and "different experiment" in changed.output
    # same arguments: resumes, finished trials untouched
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0, output
    results = {p.parent.name: p.stat().st_mtime for p in out.glob("trial-*/result.json")}
    assert len(results) == 4
    for name, mtime in finished.items():
        assert results[name] == mtime
    b = [json.loads(p.read_text()) for p in out.glob("trial-*-b/result.json")]
    assert all(r["ended_by"] == "timeout" and not r["crashed"] for r in b)


def test_plan_answers_quickly_when_no_n_can_reach_the_power():
    import time as _time

    from faultkit.trials.stats import _rejection_region, _rejects
    t0 = _time.monotonic()
    assert trials_for_power(0.4, 0.4)[0] is None and trials_for_power(0.2, 0.4)[0] is None
    assert _time.monotonic() - t0 < 30          # a hang guard (it never returned before), not a speed target
    # the vectorized rejection region is Fisher's test, table by table
    for alt in ("greater", "less", "two-sided"):
        region = _rejection_region(12, 10, 0.05, alt)
        assert all(region[a, b] == _rejects(a, 12, b, 10, 0.05, alt) for a in range(13) for b in range(11))


def test_report_of_counts_collected_by_hand():
    res = run_cli("trials", "report", "--counts", "base=2/5", "--counts", "fix=0/5", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    c = doc["comparisons"][0]
    assert c["fisher_two_sided"] == pytest.approx(4 / 9)
    # the test is one-sided (the default, as `trials plan` counts): 15 per arm, the plan's figure for 40% vs 0
    assert c["alternative"] == "greater" and c["p"] == pytest.approx(2 / 9)
    assert c["too_few_trials"] and c["trials_per_arm_to_decide"] == 15
    assert doc["by_hand"] and [a["crashes"] for a in doc["arms"]] == [2, 0]
    md = run_cli("trials", "report", "--counts", "base=2/5", "--counts", "fix=0/5").output
    assert "No difference shown: 2/5 vs 0/5 (Fisher one-sided p = 0.22" in md and "Too few trials" in md
    decided = json.loads(run_cli("trials", "report", "--counts", "a=9/10", "--counts", "b=0/10", "-f", "json").output)
    assert decided["comparisons"][0]["conclusion"].startswith("a crashes more often than b")
    assert run_cli("trials", "report", "--counts", "a=6/5", "--counts", "b=0/5").exit_code == 2
    assert run_cli("trials", "report", "--counts", "a=1/5").exit_code == 2


def test_plan_with_n_prints_no_unasked_two_sided_figure():
    out = run_cli("trials", "plan", "--rate", "base=0.4", "--rate", "fix=0", "-n", "10").output
    assert "10 trials per arm give power" in out and "two-sided" not in out
