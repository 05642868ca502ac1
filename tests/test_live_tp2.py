"""The two real TP2-on-one-GPU bundles of issue 38 (tests/data/live_h200_tp2_*, see their READMEs):
two gloo ranks over CUDA tensors on the H200, rank 1 faulting, then rank 1 spinning in a kernel.
Every expected value is read from the bundle's own evidence (server.log, the py-spy samples, the
cores' cuda-gdb transcripts), never from faultkit's output; the verdicts come through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from faultkit.cli import main

DATA = Path(__file__).parent / "data"
FAULT = DATA / "live_h200_tp2_fault"
HANG = DATA / "live_h200_tp2_hang"


def triage_json(bundle: Path) -> dict:
    r = CliRunner().invoke(main, ["triage", str(bundle), "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.output)


def rank_pids(bundle: Path) -> dict[int, int]:
    """rank -> pid from the server's own `rank R pid P ready` lines."""
    text = (bundle / "server.log").read_text()
    return {int(r): int(p) for r, p in re.findall(r"^rank (\d) pid (\d+) ready$", text, re.M)}


def sample_frames(bundle: Path, pid: int, n: int) -> list[str]:
    """The main thread's native and Python frames of one py-spy --native sample."""
    threads = json.loads((bundle / "stacks" / f"{pid}.s{n}.py-spy-native.json").read_text())
    main_thread = next(t for t in threads if t["thread_name"] == "MainThread")
    return [f["name"] for f in main_thread["frames"]]


def test_fault_is_rank_1s_gather_kernel_certain_and_rank_0_no_cause():
    ranks = rank_pids(FAULT)
    assert ranks == {1: 1884, 0: 1882}                                     # server.log:4-5
    transcript = next((FAULT / "cores").glob("*.cuda-gdb.txt")).read_text()
    assert "CUDA Exception: Warp Illegal Address" in transcript            # the excepting warp, in rank 1's core
    kernel = re.search(r" in (\w+)<<<\(1024,1,1\),\(128,1,1\)>>>", transcript).group(1)
    assert kernel == "gather_kernel"
    log = (FAULT / "server.log").read_text()
    # rank 0 did not fault: the launcher ended it after rank 1 died (before gloo's 30 s timeout came)
    assert f"Terminating process {ranks[0]} via signal SIGTERM" in log               # server.log:175
    assert "process 1 terminated with signal SIGABRT" in log

    d = triage_json(FAULT)
    assert (d["verdict"]["level"], d["verdict"]["kernel"]) == ("certain", kernel)
    assert [i["pids"] for i in d["incidents"]] == [[ranks[1]]]             # one incident: rank 1's
    assert {c["pid"] for c in d["cores"]} == {ranks[1]}
    stop = d["debugger_stops"][0]
    assert stop["kernel"] == kernel and stop["exception"] == "Warp Illegal Address" and stop["precise"] is True
    # rank 0 is nowhere a cause: no fault, no claim carries its pid
    assert all(f.get("pid") != ranks[0] for f in d["faults"])
    assert all(c["identities"].get("pid") != ranks[0] for c in d["verdict"]["claims"])
    assert not d["other_processes"]["faults"]


def test_hang_rank_1_is_stuck_in_its_kernel_and_rank_0_waits_on_it():
    ranks = rank_pids(HANG)
    assert ranks == {1: 2115, 0: 2114}                                     # server.log:4-5
    assert "rank 1: launching spin_kernel at step 183" in (HANG / "server.log").read_text()
    # rank 1's main thread: in cuCtxSynchronize_v2 from server.py's synchronize in both samples (the
    # driver's own frames under it differ: it polls), its core shows spin_kernel active
    s1, s2 = (sample_frames(HANG, ranks[1], n) for n in (1, 2))
    assert s1[s1.index("cuCtxSynchronize_v2"):] == s2[s2.index("cuCtxSynchronize_v2"):]
    assert "rank_main" in s1 and s1[:s1.index("cuCtxSynchronize_v2")] != s2[:s2.index("cuCtxSynchronize_v2")]
    assert all("c10d::Work::wait" in sample_frames(HANG, ranks[0], n) for n in (1, 2))
    core1 = (HANG / "cores" / f"cuda.vm.{ranks[1]}.1796143849.cuda-gdb.txt").read_text()
    core0 = (HANG / "cores" / f"cuda.vm.{ranks[0]}.1796143850.cuda-gdb.txt").read_text()
    assert re.search(r"\bActive\b.*spin_kernel\(\)", core1) and "server.py:29" in core1
    assert "No CUDA kernels." in core0

    d = triage_json(HANG)
    h = d["hang"]
    assert (h["state"], h["level"]) == ("hung", "likely")
    assert [t["pid"] for t in h["stuck"]] == [ranks[1]] and h["stuck"][0]["kind"] == "synchronize"
    assert h["summary"].startswith(f"pid {ranks[1]} is stuck: ") and "cuCtxSynchronize_v2" in h["summary"]
    states = {p["pid"]: p["state"] for p in h["processes"]}
    assert states[ranks[1]] == "stuck" and states[ranks[0]] == "waiting"
    # who waits on whom: rank 0's all-reduce waits on rank 1, whose GPU runs the spinning kernel
    assert any(w.startswith(f"pid {ranks[0]} waits in c10d::Work::wait") and
               f"while pid {ranks[1]} is stuck on its GPU in cuCtxSynchronize_v2" in w and "server.py:60" in w
               for w in h["waits_on"]), h["waits_on"]
    assert any(w.startswith(f"pid {ranks[1]}'s GPU was running spin_kernel at ") for w in h["waits_on"])
    v = d["verdict"]
    assert (v["level"], v["kernel"]) == ("likely", "spin_kernel")
    kernel_claim = next(c for c in v["claims"] if c["kernel"] == "spin_kernel")
    assert kernel_claim["basis"]["kind"] == "hang-stuck-kernel" and kernel_claim["identities"] == {"pid": ranks[1]}
    assert "Not 'certain': no GPU exception stopped it" in v["why"]
    # the manifest's hang_dumps (an object: pid -> what happened) is read, not called malformed
    assert not [p for p in d["problems"] if "hang_dumps" in str(p)]


def test_hang_helpers_are_not_blocked():
    """multiprocessing's resource tracker (its command line and a read in resource_tracker.main) and
    the agent's resolver thread (in pthread_cond_clockwait) wait like that for their whole life."""
    samples = json.loads((HANG / "stacks" / "samples-hang-1.json").read_text())["samples"][0]
    tracker = next(p for p in samples if "multiprocessing.resource_tracker import main" in (p["command"] or ""))
    assert [f["function"] for f in tracker["threads"][0]["frames"][:2]] == ["read", "main"]
    h = triage_json(HANG)["hang"]
    proc = next(p for p in h["processes"] if p["pid"] == tracker["pid"])
    assert proc["state"] == "idle" and [t["kind"] for t in proc["threads"]] == ["resource-tracker"]
    assert proc["threads"][0]["background"] is True
    resolvers = [t for p in h["processes"] for t in p["threads"] if t["name"] == "faultkit-agent-sites"]
    assert len(resolvers) == 2 and {t["kind"] for t in resolvers} == {"condition"}
    assert all(t["on"] == "pthread_cond_clockwait" for t in resolvers)
