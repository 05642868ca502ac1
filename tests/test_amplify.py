"""`faultkit amplify` end to end on CPU: the real verb, real server and worker processes of
scripts/uaf_server.py (its CPU stand-in allocator honours PYTORCH_NO_CUDA_MEMORY_CACHING as torch's
does), the agent's hold-back in the real worker, and trials that are not counted because the amplifier
did not reach the worker."""

import json
import os
import random
import socket
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import main

from .conftest import own_processes

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = f"{sys.executable} {ROOT / 'scripts' / 'uaf_server.py'}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def amplify(out: Path, *args: str, server: str, client: str | None = None):
    argv = ["amplify", "run", "-q", "--timeout", "40s", "-o", str(out), *args]
    if client:
        argv += ["--client", client]
    res = CliRunner().invoke(main, argv + ["--", *server.split()], catch_exceptions=False)
    return res


def results(out: Path) -> dict[str, list[dict]]:
    by = {}
    for p in sorted(out.glob("trial-*/result.json")):
        r = json.loads(p.read_text())
        by.setdefault(r["arm"], []).append(r)
    return by


def reused(seed: int, index: int, rate: float = 0.1) -> bool:
    """The sample's own rule (its docstring): a trial reuses the freed table with probability
    --reuse-rate, drawn from --seed and the trial index."""
    return random.Random(seed * 100003 + index).random() < rate


def test_caching_off_turns_an_intermittent_uaf_into_every_time(tmp_path):
    port = free_port()
    out = tmp_path / "amp"
    res = amplify(out, "--arm", "caching-off", "--port", str(port), "-n", "10",
                  server=f"{SAMPLE} --port {port} --device cpu --seed 11 --reuse-rate 0.1",
                  client=f"{SAMPLE} --client --port {port} --requests 5")
    assert res.exit_code == 0, res.output
    by = results(out)
    plain, amp = by["plain"], by["caching-off"]
    # plain: crashes exactly where the sample's draw planted a reuse (and only there)
    assert [r["crashed"] for r in plain] == [reused(11, r["index"]) for r in plain]
    assert sum(r["crashed"] for r in plain) == 1            # 1 of 7: the intermittent bug
    # caching off: every trial crashes, its worker killed by SIGSEGV at the stale read
    assert all(r["crashed"] for r in amp)
    for r in amp:
        log = (out / f"trial-{r['index']:03d}-caching-off" / "server.log").read_text()
        assert "worker died (signal 11)" in log
        assert r["env"]["ok"] and r["env"]["wanted"]["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
        assert len(r["env"]["checked"]) == 2                     # the front and the worker
    # the sequential rule stopped it before the 10 rounds: at the first look with p under its threshold
    from faultkit.amplify.sequential import fisher_p, threshold
    n, t = len(amp), threshold(0.05, 10)
    assert n < 10 and fisher_p(n, n, sum(r["crashed"] for r in plain[:n]), n) <= t
    assert fisher_p(n - 1, n - 1, sum(r["crashed"] for r in plain[:n - 1]), n - 1) > t
    report = json.loads((out / "amplify-report.json").read_text())
    pc = sum(r["crashed"] for r in plain)
    assert f"caching off raised the crash rate from {pc}/{len(plain)} to {n}/{n}" in res.output
    assert report["verdict"]["classes"] == ["memory-reuse"]
    assert report["verdict"]["fastest"]["arm"] == "caching-off"
    assert "calibrated by exact enumeration" in report["rule"] and "alpha/10 = 0.005 (Bonferroni" in report["rule"]
    assert report["threshold"] == pytest.approx(t)
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads((ROOT / "docs" / "schemas" / "amplify-report.schema.json").read_text())
    assert not [e.message for e in jsonschema.Draft202012Validator(doc).iter_errors(report)]
    md = (out / "amplify-report.md").read_text()
    assert "| caching-off | memory-reuse | " in md and f"decided after round {n}" in md
    # the report of the folder replays the same looks
    again = CliRunner().invoke(main, ["amplify", "report", str(out), "-f", "json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["verdict"]["text"] == report["verdict"]["text"]
    assert not own_processes("uaf_server.py")


def test_hold_back_removes_the_crash_through_the_agent(tmp_path):
    port = free_port()
    out = tmp_path / "amp"
    res = amplify(out, "--arm", "hold-back", "--site", "uaf_server:decode_step", "--port", str(port), "-n", "6",
                  server=f"{SAMPLE} --port {port} --device cpu --reuse-rate 1",
                  client=f"{SAMPLE} --client --port {port} --requests 3")
    assert res.exit_code == 0, res.output
    by = results(out)
    assert all(r["crashed"] for r in by["plain"]) and not any(r["crashed"] for r in by["hold-back"])
    # the proof it reached the worker: the agent's header there says hold-back was armed and the site hit
    t = out / f"trial-{by['hold-back'][0]['index']:03d}-hold-back"
    headers = [json.loads(p.read_text()) for p in (t / "agent").glob("*.json")]
    worker = [h for h in headers if (h.get("amplify") or {}).get("hits")]
    assert worker and "amplify-hold" in worker[0]["armed"]
    assert worker[0]["amplify"]["hits"]["uaf_server:decode_step"] >= 1
    n = len(by["hold-back"])
    assert n < 6 and f"holding freed blocks back removed the crash (0/{n} vs {n}/{n})" in res.output
    report = json.loads((out / "amplify-report.json").read_text())
    arm = next(a for a in report["arms"] if a["arm"] == "hold-back")
    assert any("agent armed amplify-hold" in p for p in arm["reached_proof"])
    # the same command again resumes: every trial is finished, none runs again, the verdict is the same
    mtimes = {p: p.stat().st_mtime for p in out.glob("trial-*/result.json")}
    again = amplify(out, "--arm", "hold-back", "--site", "uaf_server:decode_step", "--port", str(port), "-n", "6",
                    server=f"{SAMPLE} --port {port} --device cpu --reuse-rate 1",
                    client=f"{SAMPLE} --client --port {port} --requests 3")
    assert again.exit_code == 0 and {p: p.stat().st_mtime for p in out.glob("trial-*/result.json")} == mtimes
    assert json.loads((out / "amplify-report.json").read_text())["verdict"]["text"] == report["verdict"]["text"]
    # another experiment in the same folder is refused, its trials kept
    other = amplify(out, "--arm", "hold-back", "--site", "uaf_server:decode_step", "--port", str(port), "-n", "6",
                    server=f"{SAMPLE} --port {port} --device cpu --reuse-rate 0.5",
                    client=f"{SAMPLE} --client --port {port} --requests 3")
    assert other.exit_code == 1 and "different experiment" in other.output


def test_an_amplifier_that_does_not_reach_the_worker_is_not_counted(tmp_path):
    port = free_port()
    out = tmp_path / "amp"
    # the front starts its worker with a cleaned environment (PATH and LANG only)
    res = amplify(out, "--arm", "caching-off", "--port", str(port), "-n", "5",
                  server=f"{SAMPLE} --port {port} --device cpu --clean-worker-env",
                  client=f"{SAMPLE} --client --port {port} --requests 2")
    assert res.exit_code == 0, res.output
    amp = results(out)["caching-off"]
    # the trials ran and crashed or not, but the variable was not in the worker: none counted
    assert len(amp) == 2 and all(r["env"]["mismatches"] for r in amp)
    report = json.loads((out / "amplify-report.json").read_text())
    arm = next(a for a in report["arms"] if a["arm"] == "caching-off")
    assert (arm["crashes"], arm["trials"], arm["state"]) == (0, 0, "not-reached")
    assert all("PYTORCH_NO_CUDA_MEMORY_CACHING did not reach pid" in x["why"] for x in arm["not_counted"])
    assert "NOT COUNTED" in res.output and "did not reach pid" in res.output
    assert report["verdict"]["classes"] == []


def test_poison_on_a_machine_without_cuda_is_not_counted(tmp_path):
    out = tmp_path / "amp"
    script = tmp_path / "idle.py"
    script.write_text("import time\ntime.sleep(1.0)\n")       # a Python server that never imports torch
    res = amplify(out, "--arm", "poison", "-n", "4", server=f"{sys.executable} {script}")
    assert res.exit_code == 0, res.output
    report = json.loads((out / "amplify-report.json").read_text())
    arm = next(a for a in report["arms"] if a["arm"] == "poison")
    assert arm["state"] == "not-reached" and arm["trials"] == 0
    assert "no process of the trial armed amplify-poison (the process never imported torch)" in \
        arm["not_counted"][0]["why"]


def test_parallel_slots_have_disjoint_gpu_sets(tmp_path, monkeypatch):
    for v in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(v, raising=False)
    base = free_port()
    out = tmp_path / "amp"
    res = amplify(out, "--arm", "caching-off", "--gpus", "0,1", "--port", str(base), "-n", "3",
                  server=f"{SAMPLE} --port {{port}} --device cpu --reuse-rate 0",
                  client=f"{SAMPLE} --client --port {{port}} --requests 8")
    assert res.exit_code == 0, res.output
    every = [r for rs in results(out).values() for r in rs]
    sets = {r["index"]: r["env"]["wanted"]["CUDA_VISIBLE_DEVICES"] for r in every}
    assert set(sets.values()) == {"0", "1"} and all(r["env"]["ok"] for r in every)
    # two trials of one round ran at the same time, on different GPU sets and ports
    overlapping = [(a, b) for a in every for b in every if a["index"] < b["index"] and
                   a["clocks"]["start"]["monotonic_ns"] < b["clocks"]["end"]["monotonic_ns"] and
                   b["clocks"]["start"]["monotonic_ns"] < a["clocks"]["end"]["monotonic_ns"]]
    assert overlapping
    assert all(sets[a["index"]] != sets[b["index"]] for a, b in overlapping)
    ports = {r["index"]: r["command"].split("--port ")[1].split()[0] for r in every}
    assert all(ports[a["index"]] != ports[b["index"]] for a, b in overlapping)


@pytest.mark.parametrize("args,said", [(["--gpus", "0,0"], "names a GPU twice"),
                                       (["--gpus", "0,1,2", "--gpus-per-trial", "2"], "do not split into sets"),
                                       (["--arm", "nonsense"], "no amplifier 'nonsense'")])
def test_refusals(tmp_path, args, said, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    res = CliRunner().invoke(main, ["amplify", "run", "-o", str(tmp_path / "a"), *args, "--", "true"])
    assert res.exit_code == 1 and said in res.output
    assert "Traceback" not in res.output


def test_a_checker_runs_one_trial_apart(tmp_path, monkeypatch):
    """compute-sanitizer where installed: here a shim of it on PATH (prints the tool's banner, then
    runs the command it was given, as the tool does)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "compute-sanitizer"
    shim.write_text("#!/bin/sh\n"
                    "echo '========= COMPUTE-SANITIZER'\n"
                    "while [ \"${1#-}\" != \"$1\" ]; do case $1 in --tool|--target-processes|--print-limit) shift;; esac;"
                    " shift; done\n"
                    "exec \"$@\"\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    script = tmp_path / "idle.py"
    script.write_text("print('served', flush=True)\n")
    out = tmp_path / "amp"
    res = amplify(out, "--arm", "memcheck", "--arm", "launch-blocking", "-n", "2",
                  server=f"{sys.executable} {script}")
    assert res.exit_code == 0, res.output
    report = json.loads((out / "amplify-report.json").read_text())
    (c,) = report["checkers"]
    assert c["arm"] == "memcheck" and c["outcome"] == "no-crash" and c["checker_output_seen"]
    log = (out / "checkers" / "memcheck" / "server.log").read_text()
    assert "COMPUTE-SANITIZER" in log and "served" in log
    assert "memcheck" not in {a["arm"] for a in report["arms"]}            # not a rate arm
    assert "## Checkers (one trial each)" in (out / "amplify-report.md").read_text()


def test_a_server_that_does_not_start_is_never_counted(tmp_path):
    out = tmp_path / "amp"
    res = amplify(out, "--arm", "caching-off", "-n", "3", server=f"{sys.executable} {tmp_path / 'missing.py'}")
    assert res.exit_code == 1 and "the plain arm failed to start" in res.output and "script not found" in res.output
    assert "Traceback" not in res.output
    first = json.loads(next(out.glob("trial-*/result.json")).read_text())
    assert first["outcome"] == "failed-to-start"


def test_no_early_stop_runs_every_round_and_looks_once(tmp_path):
    port = free_port()
    out = tmp_path / "amp"
    res = amplify(out, "--arm", "caching-off", "--no-early-stop", "--port", str(port), "-n", "6",
                  server=f"{SAMPLE} --port {port} --device cpu --reuse-rate 0",
                  client=f"{SAMPLE} --client --port {port} --requests 2")
    assert res.exit_code == 0, res.output
    by = results(out)
    # with looks, 4/4 vs 0/4 (p = 0.029) would have stopped it after round 4; here all 6 rounds ran
    assert len(by["plain"]) == len(by["caching-off"]) == 6
    report = json.loads((out / "amplify-report.json").read_text())
    arm = next(a for a in report["arms"] if a["arm"] == "caching-off")
    assert (arm["crashes"], arm["state"], arm["stopped_after_round"]) == (6, "decided", 6)
    assert report["rule"].startswith("fixed design") and report["threshold"] == 0.05


def test_a_taken_port_is_said_before_any_trial_is_announced(tmp_path, monkeypatch):
    from faultkit.amplify import engine
    monkeypatch.setattr(engine, "PORT_WAIT_S", 1.0, raising=False)   # the tryout waited the default 30 s
    with socket.socket() as held:                        # a server from before, listening on the port
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        argv = ["amplify", "run", "--timeout", "20s", "-o", str(tmp_path / "amp"), "--arm", "poison",
                "--port", str(port), "-n", "2", "--", *f"{SAMPLE} --port {port} --device cpu".split()]
        res = CliRunner().invoke(main, argv)
    said = f"port {port} is still in use"
    assert said in res.output, res.output
    before = res.output[:res.output.index(said)]
    assert "trial 1:" not in before and ", arm poison" not in before and "checker " not in before
    assert not list((tmp_path / "amp").glob("trial-*/result.json"))
