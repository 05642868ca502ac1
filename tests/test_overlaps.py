"""Overlaps count only work of one process on one GPU (issue 21 A1), in near-linear time (issue 28)."""

from __future__ import annotations

import csv
import time
from pathlib import Path

from click.testing import CliRunner

from faultkit.analyze.overlaps import find_overlaps
from faultkit.cli import main
from faultkit.ingest.traces import read_trace_paths

from .conftest import TRACES
from .test_traces import K70, k70

SAMPLE = TRACES / "sglang-tp2-mi300x"


def _lanes(path: Path) -> set[tuple[str, str, str]]:
    with open(path, newline="") as f:
        return {(r["Agent_Id"], r["Queue_Id"], r["Stream_Id"]) for r in csv.DictReader(f)}


def test_two_ranks_on_two_gpus_are_not_a_serialization_failure():
    # The evidence: each rank's kernel trace runs on one agent, one queue and one stream
    # (48212: Agent 1 queue 1 stream 1; 48213: Agent 2 queue 1 stream 1), so nothing of one
    # process on one GPU ran beside other work of it: 0 overlaps, and the setting is consistent.
    traces = sorted(SAMPLE.glob("rocprofv3/*/*_kernel_trace.csv"))
    assert [sorted(_lanes(p)) for p in traces] == [[("Agent 1", "1", "1")], [("Agent 2", "1", "1")]]
    result = CliRunner().invoke(main, ["triage", str(SAMPLE), "--env", "AMD_SERIALIZE_KERNEL=3"])
    assert result.exit_code == 0, result.output
    assert "did not take effect" not in result.output
    assert "0 kernel-kernel overlap(s)" in result.output
    assert "no overlaps remain: consistent with serialized execution" in result.output


def _trace(tmp_path: Path, rows: list[str]):
    d = tmp_path / "t"
    d.mkdir(exist_ok=True)
    (d / "7_kernel_trace.csv").write_text(K70 + "\n" + "".join(r + "\n" for r in rows))
    return read_trace_paths([d])


def test_only_one_process_one_gpu_different_queue_counts(tmp_path):
    rows = [k70(1, 1, 1, 9, 1, "a", 1, 100, 200),
            k70(1, 2, 2, 9, 2, "same_gpu_other_queue", 2, 150, 250),     # overlaps a: counted
            k70(2, 3, 3, 9, 3, "other_gpu", 3, 120, 260),                 # another GPU: never
            k70(1, 1, 1, 9, 4, "same_queue", 4, 180, 190)]                # a's queue: the hardware serializes
    o = find_overlaps(_trace(tmp_path, rows), None, None)
    # pairs on agent 1: (a, same_gpu_other_queue) and (same_gpu_other_queue, same_queue)
    assert o.kernel_kernel == 2
    assert {(p["a"], p["b"]) for p in o.pairs} == {("a", "same_gpu_other_queue"),
                                                  ("same_gpu_other_queue", "same_queue")}


def _duplicated(tmp_path: Path, n: int):
    # n identical rows on each of two queues of one GPU: n*n cross-queue pairs, all alike
    rows = [k70(1, q, q, 9, i, f"k{q}", i, 1000, 2000) for q in (1, 2) for i in range(n)]
    return _trace(tmp_path / str(n), rows)


def _median_seconds(trace, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        o = find_overlaps(trace, None, None)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], o


def test_duplicated_rows_cost_near_linear_time_and_make_one_row(tmp_path):
    (tmp_path / "1000").mkdir()
    (tmp_path / "10000").mkdir()
    small, big = _duplicated(tmp_path, 1000), _duplicated(tmp_path, 10000)
    t_small, o_small = _median_seconds(small)
    t_big, o_big = _median_seconds(big)
    assert (o_small.kernel_kernel, o_big.kernel_kernel) == (1000 * 1000, 10000 * 10000)
    # identical rows are listed once
    assert [(p["a"], p["b"]) for p in o_big.pairs] == [("k1", "k2")]
    # 10x the rows, 100x the pairs: a pair-by-pair sweep would take ~100x; this must stay far below
    assert t_big < 30 * max(t_small, 1e-3), (t_small, t_big)


# --- issue 21 A5: another job's kernel-log faults on a shared node ---

DMESG_TWO_JOBS = """\
[  183.5] amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:9 pasid:32801, for process python3 pid 4242 thread python3 pid 4242)
[  183.5] amdgpu 0000:c1:00.0: amdgpu:   in page starting at address 0x00007f0000001000 from IH client 0x1b (UTCL2)
[  183.5] amdgpu 0000:c1:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00901031
[  190.1] amdgpu 0000:c2:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32777, for process other_job pid 9999 thread other_job pid 9999)
[  190.1] amdgpu 0000:c2:00.0: amdgpu:   in page starting at address 0x00007e0000002000 from IH client 0x1b (UTCL2)
[  190.1] amdgpu 0000:c2:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00901031
"""


def test_other_processes_kernel_log_faults_are_listed_apart(tmp_path):
    import json

    b = tmp_path / "bundle"
    b.mkdir()
    (b / "manifest.json").write_text(json.dumps({"schema": "faultkit.bundle/1", "command": "python3 serve.py"}))
    (b / "environ.json").write_text(json.dumps([{"pid": 4242, "cmdline": ["python3", "serve.py"], "env": {}}]))
    (b / "kernel.log").write_text(DMESG_TWO_JOBS)
    (b / "server.log").write_text("(pid=4242) wave_0: pc=0x7f00aa001000 (kernel_code_entry=0x7f00aa000f00 "
                                  "<gemm_kernel>) (stopped, reason: MEMORY_VIOLATION)\n")
    result = CliRunner().invoke(main, ["triage", str(b), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    # pid 9999 is not in environ.json's process record: apart, and no incident of its own
    assert [f["pid"] for f in doc["faults"]] == [4242]
    assert [f["pid"] for f in doc["other_processes"]["faults"]] == [9999]
    assert [i["pids"] for i in doc["incidents"]] == [[4242]]
    assert all(9999 != c["identities"].get("pid") for c in doc["verdict"]["claims"])
    md = CliRunner().invoke(main, ["triage", str(b)]).output
    assert "## Other processes on this machine" in md and "pid 9999 (other_job)" in md
