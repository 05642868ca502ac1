"""One incident across nodes (a real gloo job on this machine): three ranks, each captured as its own
"node" (its own host name in a UTS namespace, its own wall clock skewed), one rank
segfaults mid-run and the others lose it in an all-reduce. The triage of the three bundles names the
faulting rank as the incident, the others' losses as consequences, and the skews it corrected."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from faultkit.analyze.job import NodeEvent, NodeEvidence, decide
from faultkit.ingest.markers import markers_in
from faultkit.launch_env import Launch, PatternError, expand, launch_of

ROOT = Path(__file__).resolve().parents[1]

RANK = textwrap.dedent("""
    import ctypes, datetime, os, sys, time
    import torch, torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['PORT']}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    for step in range(400):
        t = torch.ones(8)
        dist.all_reduce(t)                       # every rank leaves it at about the same moment ...
        print(f"step {step} done rid=req{step:08d}", flush=True)   # ... and logs the request id
        if step == 40 and rank == int(os.environ["FAULTING_RANK"]):
            time.sleep(0.5)
            ctypes.string_at(0)                  # a segfault, like a worker killed by its GPU fault
        time.sleep(0.02)
""")
NODES = (("node-a", 0.0), ("node-b", 7.0), ("node-c", -4.0))     # host, wall clock skew in seconds
# A node whose wall clock is off: every Python process of the "node" reads time.time() that much off
# (libfaketime would do it for the whole process, but its sleep breaks when the monotonic clock is kept
# real, and a real node's kernel log stamps the real monotonic clock).
SKEW = textwrap.dedent("""
    import os, time
    _skew = float(os.environ.get("TEST_NODE_WALL_SKEW_S", "0"))
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _skew
    time.time_ns = lambda: _time_ns() + int(_skew * 1e9)
""")


def _why_not() -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch not installed (pip install torch): the gloo job needs it"
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare(1) for a host name per node"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))
@pytest.mark.xdist_group("clusters")     # several torch ranks: one multi-process job at a time (-n)
def test_three_node_gloo_job_one_faulting_rank(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    (tmp_path / "skew").mkdir()
    (tmp_path / "skew" / "sitecustomize.py").write_text(SKEW)
    port, run = _free_port(), tmp_path / "run"
    run.mkdir()
    procs = []
    for rank, (host, skew) in enumerate(NODES):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "3", "TORCHELASTIC_RUN_ID": "job-4242",
               "PORT": str(port), "FAULTING_RANK": "1", "TEST_NODE_WALL_SKEW_S": str(skew),
               "PYTHONPATH": os.pathsep.join([str(tmp_path / "skew"), os.environ.get("PYTHONPATH", "")])}
        inner = (f"hostname {host} && exec {sys.executable} -m faultkit.cli capture -q --allow-running "
                 f"--timeout 120 -o {run}/%h -- {sys.executable} {script}")
        procs.append(subprocess.Popen(["unshare", "--uts", "sh", "-c", inner], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    codes = [p.wait(timeout=300) for p in procs]
    assert codes[1] == 139, procs[1].stderr.read()            # the faulting rank died by SIGSEGV
    assert sorted(p.name for p in run.iterdir()) == ["node-a", "node-b", "node-c"]   # -o run/%h
    manifest = json.loads((run / "node-b" / "manifest.json").read_text())
    assert manifest["launch"] == {"launcher": "torchrun", "job": "job-4242", "rank": 1, "local_rank": None,
                                  "node_rank": None, "world_size": 3, "host": "node-b"}
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "triage", "-f", "json", *sorted(map(str, run.iterdir()))],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)
    assert job["schema"] == "faultkit.job/1" and job["job"] == "job-4242"
    assert job["first_mover"] == ["node-b"]
    nodes = {n["node"]: n for n in job["nodes"]}
    # node-b's clock is 7 s ahead of node-a's, node-c's 4 s behind: the offsets undo it
    assert abs(nodes["node-b"]["clock_offset_s"] + 7) < 0.3 and abs(nodes["node-c"]["clock_offset_s"] - 4) < 0.3
    assert nodes["node-b"]["alignment_points"] >= 30            # the request ids both sides logged
    assert nodes["node-b"]["first_cause"]["kind"] in ("host-segfault", "killed by signal 11")
    # the others lost their peer in the all-reduce after rank 1 died: consequences, not verdicts
    lost = {c["node"] for c in job["consequences"] if c["kind"] == "peer-loss"}
    assert lost == {"node-a", "node-c"}
    if nodes["node-b"]["first_cause"]["kind"] == "host-segfault":
        # the kernel's stamp of the segfault is exact; the capture's end (the fallback) comes later
        assert all(c["after_s"] > -0.1 for c in job["consequences"] if c["kind"] == "peer-loss")
    # the timeline: a process per node, the first mover's cause flowing to each consequence
    out = tmp_path / "job.pftrace"
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "timeline", *sorted(map(str, run.iterdir())), "-o",
                          str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    from faultkit.export.pftrace_check import check_trace
    checked = check_trace(out.read_bytes(), keep_names=True)
    assert checked.ok, checked.errors
    assert checked.flows == len(job["consequences"]) and checked.flows >= 2


def test_output_patterns_take_the_launchers_variables():
    slurm = launch_of({"SLURM_JOB_ID": "881", "SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
                       "SLURM_NTASKS": "8"}, "gpu07")
    assert slurm == Launch("slurm", "881", 5, 1, 2, 8, "gpu07")
    assert expand("run/%j/%h-%r-%p%%", slurm, 123) == "run/881/gpu07-5-123%"
    lws = launch_of({"LWS_LEADER_ADDRESS": "my-lws-0.my-lws", "LWS_WORKER_INDEX": "3", "LWS_GROUP_SIZE": "4"}, "pod")
    assert (lws.launcher, lws.rank, lws.world_size) == ("kubernetes-lws", 3, 4)
    ompi = launch_of({"OMPI_COMM_WORLD_RANK": "9", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "16"})
    assert (ompi.launcher, ompi.rank, ompi.local_rank) == ("openmpi", 9, 1)
    assert launch_of({"PMI_RANK": "2", "PMI_SIZE": "4"}).launcher == "hydra"
    assert launch_of({"RAY_JOB_ID": "02000000"}).job == "02000000"
    assert launch_of({"NODE_RANK": "1"}).node_rank == 1          # a server's own --node-rank convention
    with pytest.raises(PatternError, match="no launcher's rank"):
        expand("run/%r", launch_of({}), 1)


def test_capture_refuses_a_rank_pattern_without_a_launcher(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "SLURM_PROCID", "NODE_RANK")}
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "capture", "-o", str(tmp_path / "r%r"), "--", "true"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 2 and "no launcher's rank variable" in res.stderr
    assert not list(tmp_path.iterdir())


def test_markers_from_the_producers_formats():
    # ProcessGroupNCCL's watchdog line (its format: "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=...")
    text = ("[rank1]:[E1201 10:00:00.000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1732, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            "600036 milliseconds before timing out.\n"
            "INFO 12-01 10:00:00 Finish: rid=8f2e6c1d90ab44c1 decode\n"
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:2345\n")
    marks, losses = markers_in(text, "log")
    assert [(m.key, m.origin.line) for m in marks] == [("collective:1732:ALLREDUCE", 1), ("request:8f2e6c1d90ab44c1", 2)]
    assert [pl.origin.line for pl in losses] == [3]


def _node(name, cause_at, markers, start=0.0):
    ev = [NodeEvent(cause_at, "page-fault", True, "fault", f"{name}:1")] if cause_at is not None else []
    return NodeEvidence(name, name, None, start, ev, markers)


def test_a_cause_within_the_clocks_uncertainty_is_not_called_first():
    a = _node("a", 100.00, {"request:x": 50.0, "request:y": 60.0})
    b = _node("b", 100.02, {"request:x": 50.0, "request:y": 60.3})    # 0.3 s spread between the two points
    v = decide("j", [a, b])
    assert sorted(v.first_mover) == ["a", "b"] and "cannot be told" in v.why
    c = _node("c", 101.0, {"request:x": 50.0, "request:y": 60.0})
    assert decide("j", [a, c]).first_mover == ["a"]


def test_nodes_without_a_shared_moment_fall_back_to_the_starts_with_unknown_uncertainty():
    a, b = _node("a", 10.0, {}, start=0.0), _node("b", 25.0, {}, start=12.0)
    v = decide(None, [a, b])
    assert v.alignment["b"].offset_s == -12.0 and v.alignment["b"].uncertainty_s is None
    assert sorted(v.first_mover) == ["a", "b"]   # unknown uncertainty: neither can be called first
