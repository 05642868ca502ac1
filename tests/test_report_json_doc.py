"""docs/report-json.md names every key the JSON report writes: real reports are walked and each key
path must appear there (backticked)."""

from __future__ import annotations

from faultkit.bundle import InputFile, Inputs
from faultkit.export.report import to_json
from faultkit.triage import build, triage

from .conftest import ROOT

DOC = (ROOT / "docs" / "report-json.md").read_text()
FREE_FORM = (".detail", ".fields", ".behind_at", ".env_requested")   # keys that depend on the record (kind; a rank; a variable), documented as such

WAVES_AND_EVENTS = (
    "[  501.100000] amdgpu 0000:03:00.0: amdgpu: ring comp_1.0.0 timeout, signaled seq=10, emitted seq=12\n"
    "wave_1: pc=0x7f00aa001000 (kernel_code_entry=0x7f00aa000f00 <gemm_kernel>) (stopped, reason: MEMORY_VIOLATION)\n"
    "(gdb) info dispatches\n  Id   Target Id                   Grid        Workgroup Fence   Kernel Function\n"
    "* 1    AMDGPU Dispatch 1:1:1 (PKID 0) [256,1,1] [64,1,1] B|As|Ar  gemm_kernel\n"
    "Kernel Name: _Z3fooPi\nVGPU=0x1 SWq=0x2, HWq=0x3, id=4\n\tgrid=[1024, 1, 1], workgroup=[256, 1, 1]\n"
    "\trptr=931, wptr=959\nVGPU(0x1) Queue(0x5) is idle\n")


def paths(obj, path="", out=None) -> set[str]:
    out = set() if out is None else out
    if isinstance(obj, dict):
        if path.endswith(FREE_FORM):
            return out
        for k, v in obj.items():
            p = f"{path}.{k}" if path else k
            out.add(p)
            paths(v, p, out)
    elif isinstance(obj, list):
        for x in obj[:5]:
            paths(x, path + "[]", out)
    return out


def hang_inputs() -> list[InputFile]:
    """Stack samples (one rank stuck on its GPU, one in a collective) and two ranks' flight records."""
    import json
    import pickle

    from faultkit.hang_model import ProcessStacks, StackFrame, ThreadStack
    coll = ProcessStacks(10, "gdb", [ThreadStack(10, "main", [StackFrame("ncclAllReduce", native=True)])], rank=0)
    gpu = ProcessStacks(11, "gdb", [ThreadStack(11, "main", [StackFrame("hipStreamSynchronize", native=True),
                                                             StackFrame("step", "/srv/a.py", 3)])], rank=1)
    samples = json.dumps({"interval_s": 3, "samples": [[coll.to_json(), gpu.to_json()]] * 2}).encode()

    def fr(seqs):
        return pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [
            {"process_group": ("0", "default"), "collective_seq_id": s, "profiling_name": "nccl:all_reduce",
             "state": "started", "is_p2p": False} for s in seqs]}, protocol=2)
    return [InputFile("b/stacks/samples-hang-1.json", samples), InputFile("b/collectives/nccl_trace_rank_0", fr([1, 2])),
            InputFile("b/collectives/nccl_trace_rank_1", fr([1]))]


def test_every_key_is_documented():
    docs = [to_json(triage([str(ROOT / p)])) for p in ("traces/sglang-tp2-mi300x",
                                                       "tests/data/live_h200_coredump/fault",
                                                       "tests/data/live_h200_coredump/hang",
                                                       "tests/data/live_h200_agent/uaf",
                                                       "tests/data/source_shapes/racecheck_hazard_warn_cuda_memcheck.txt")]
    docs.append(to_json(build(Inputs(files=[InputFile("mixed.txt", WAVES_AND_EVENTS.encode())]))))
    docs.append(to_json(build(Inputs(hang=hang_inputs()))))
    assert docs[-1]["hang"]["stuck"] and docs[-1]["hang"]["collectives"]
    # one rank's watchdog lines: the hang's `waiting` record (tests/test_one_rank_watchdog.py)
    from .test_one_rank_watchdog import TORCH27
    docs.append(to_json(build(Inputs(files=[InputFile("rank3.log", TORCH27.encode())]))))
    assert docs[-1]["hang"]["collectives"][0]["waiting"]["call"]
    found = set().union(*(paths(d) for d in docs))
    assert {"kernel_events[].kind", "wave_dumps[].kernel", "trace.in_flight[].why", "cores[].platform",
            "queue_analysis[].state"} <= found
    missing = sorted(p for p in found if f"`{p}`" not in DOC)
    assert not missing, f"keys the JSON writes that docs/report-json.md does not name: {missing}"
