"""Type mutations of every structured input (issue 28: 328 inputs raised, exit 70). Each field of a
valid document is replaced, one at a time, by a value of every other JSON type (and numbers
outside int64, NaN-likes, deep nesting); every reader must answer with what it could read and
problems, never an exception, and never fall back on its 'internal error' net."""

from __future__ import annotations

import copy
import json
import sqlite3
import subprocess
import sys

import pytest

from faultkit.bundle import collect
from faultkit.export.report import to_json
from faultkit.ingest.traces import read_trace_paths
from faultkit.triage import build, triage

from .test_traces import _rocpd

MUTANTS = [1.5, "x", {}, [], None, True, -1, 2 ** 70, "inf", 1e308, [[[]]], {"a": {}}]

ROCPROF = {"rocprofiler-sdk-tool": [{
    "metadata": {"pid": 55},
    "agents": [{"id": {"handle": 111}, "type": 2, "node_id": 3, "logical_node_id": 1, "name": "gfx90a"}],
    "kernel_symbols": [{"kernel_id": 9, "formatted_kernel_name": "gemm_kernel"}],
    "strings": {"buffer_records": [{"kind": "HIP_API", "operations": ["hipMalloc", "hipLaunchKernel"]}]},
    "buffer_records": {
        "kernel_dispatch": [{"thread_id": 56, "correlation_id": {"internal": 12}, "start_timestamp": 10,
                             "end_timestamp": 20, "stream_id": {"handle": 1},
                             "dispatch_info": {"agent_id": {"handle": 111}, "queue_id": {"handle": 2}, "kernel_id": 9,
                                               "dispatch_id": 1, "workgroup_size": {"x": 64, "y": 1, "z": 1},
                                               "grid_size": {"x": 64, "y": 1, "z": 1}}}],
        "memory_copy": [{"src_agent_id": {"handle": 111}, "dst_agent_id": {"handle": 111}, "bytes": 8,
                         "correlation_id": {"internal": 4}, "start_timestamp": 3, "end_timestamp": 4, "operation": 1}],
        "memory_allocation": [{"operation": 1, "agent_id": {"handle": 111}, "address": "0x7f00",
                               "allocation_size": 256, "correlation_id": {"internal": 3},
                               "start_timestamp": 1, "end_timestamp": 2}],
        "hip_api": [{"thread_id": 56, "operation": 1, "correlation_id": {"internal": 12}, "start_timestamp": 5,
                     "end_timestamp": 6}]}}]}
TORCH = {"schemaVersion": 1, "baseTimeNanoseconds": 0, "traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 900, "tid": 901, "ts": 1000.0,
     "dur": 5.0, "args": {"correlation": 77}},
    {"ph": "X", "cat": "kernel", "name": "gather_kernel", "pid": 0, "tid": 7, "ts": 1010.0, "dur": 20.0,
     "args": {"correlation": 77, "device": 0, "stream": 7, "grid": [1024, 1, 1], "block": [128, 1, 1]}},
    {"ph": "i", "name": "[memory]", "pid": 900, "tid": 901, "ts": 900.0,
     "args": {"Addr": 140000000000000, "Bytes": 4096, "Device Id": 0}}]}
MANIFEST = {"schema": "faultkit.bundle/1", "command": "python serve.py", "ended_by": "exit", "exit": "exit 1",
            "exit_code": 1, "root_pid": 4242, "start": {"wall": 1.7e9, "monotonic_ns": 5, "boottime_ns": 7},
            "warnings": ["w"], "kernel_log": {"before": "ok", "follow": "ok", "after": "ok"},
            "coredump": {"cuda": True, "rocm": False, "notes": ["n"]},
            "cores": [{"path": "cores/core.1", "pid": 4242, "size": 5, "platform": "host", "how_found": "x"}]}
ENVIRON = [{"pid": 4242, "ppid": 1, "argv": ["python", "serve.py"], "env": {"HIP_VISIBLE_DEVICES": "0"}}]
FAULT = ("Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f0000001000. "
         "Reason: Page not present or supervisor privilege.\n")


def paths(doc, prefix=()):
    """Every place in `doc` a value sits (object fields and list items)."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, prefix + (i,))


def mutated(doc, where, value):
    out = copy.deepcopy(doc)
    if not where:
        return value
    node = out
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    return out


def cases(doc):
    return [(w, v) for w in paths(doc) for v in MUTANTS]


def no_internal(problems) -> None:
    text = [str(p) for p in problems]
    assert not any("internal" in p for p in text), text


SHARDS = 4          # every mutant, in four shards: test workers (-n) share the minute this takes


@pytest.mark.parametrize("shard", range(SHARDS))
@pytest.mark.parametrize("name, doc", [("9_results.json", ROCPROF), ("prof.json", TORCH)], ids=["rocprofv3", "torch"])
def test_trace_json_readers_take_every_type_mutation(tmp_path, name, doc, shard):
    every = cases(doc)
    assert len(every) > 300
    for where, value in every[shard::SHARDS]:
        f = tmp_path / name
        f.write_text(json.dumps(mutated(doc, where, value)))
        t = read_trace_paths([f])            # raised on 108 of 235 mutants before
        no_internal(t.problems)


def test_a_deeply_nested_json_trace_is_a_problem(tmp_path):
    f = tmp_path / "9_results.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    t = read_trace_paths([f])
    assert any("nested too deeply" in p.message for p in t.problems)


@pytest.mark.parametrize("value", ["'x'", "'inf'", "X'00ff'", "9223372036854775807", "1e400", "-1e400", "NULL",
                                   "3.5"])
def test_rocpd_cells_of_another_type(tmp_path, value):
    """#28: TEXT in an INTEGER column, inf, BLOB names raised in the rocpd reader."""
    db = tmp_path / "host_77_results.db"
    _rocpd(db)
    con = sqlite3.connect(db)
    for col in ("pid", "agent_id", "grid_size_x", "dispatch_id"):
        con.execute(f"UPDATE rocpd_kernel_dispatch_0197aabb_cc SET {col} = {value}")
    con.execute(f"UPDATE rocpd_region_0197aabb_cc SET start = {value}")
    con.execute(f"UPDATE rocpd_info_kernel_symbol_0197aabb_cc SET display_name = {value}")
    con.execute(f"UPDATE rocpd_info_agent_0197aabb_cc SET absolute_index = {value}, product_name = {value}")
    con.commit()
    con.close()
    t = read_trace_paths([tmp_path])
    no_internal(t.problems)
    assert len(t.dispatches) == 1                     # an id cell of another type reads as missing
    assert t.dispatches["kernel"].map(lambda k: k is None or isinstance(k, str)).all()
    # a time that is not an int64 (or ends before it starts) leaves its record out, and says so
    assert len(t.api) == 0 and any("out of range" in p.message for p in t.problems)


@pytest.mark.parametrize("cell", ["9223372036854775808", "99999999999999999999999", "1e30", "inf", "-", "0x10"])
def test_csv_integers_out_of_int64(tmp_path, cell):
    """#28: CSV integers >= 2**63 raised in trace_model.resolve_agents."""
    header = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
              '"Correlation_Id","Start_Timestamp","End_Timestamp","Grid_Size_X","Workgroup_Size_X"\n')
    (tmp_path / "9_kernel_trace.csv").write_text(
        header + f'"KERNEL_DISPATCH","Agent {cell}",{cell},1,9,1,2,"k",3,100,150,64,{cell}\n'
                 f'"KERNEL_DISPATCH","{cell}",1,1,9,2,2,"k",4,200,300,64,64\n'
                 f'"KERNEL_DISPATCH","Agent 1",1,1,9,3,2,"k",5,400,{cell},64,64\n')
    t = read_trace_paths([tmp_path])
    no_internal(t.problems)
    d = t.dispatches
    # a bad id cell reads as missing; a row whose time is not a number is left out, and said
    assert list(d["dispatch_id"]) == [1, 2]
    assert d["queue"].iloc[0] in (-1, 16) and d["wg_x"].iloc[0] in (-1, 16)        # 0x10 may read as 16
    assert any("left out" in p.message for p in t.problems) or cell == "0x10"


def test_a_headerless_extra_csv_beside_the_trace(tmp_path):
    """#28: a header-less extra CSV raised in `timeline --window all`."""
    (tmp_path / "server.log").write_text(FAULT)
    (tmp_path / "notes.csv").write_text("1,2,3\n4,5,6\n")
    (tmp_path / "empty.csv").write_text("")
    out = tmp_path / "t.pftrace"
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "timeline", str(tmp_path), "--window", "all",
                          "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert out.stat().st_size > 0


@pytest.mark.parametrize("doc, what", [(MANIFEST, "manifest"), (ENVIRON, "environ")])
def test_bundle_records_take_every_type_mutation(tmp_path, doc, what):
    """#28: manifest fields of the wrong type (`cores: 5`, `size: "big"`) raised in triage."""
    (tmp_path / "server.log").write_text(FAULT)
    for where, value in cases(doc):
        (tmp_path / "manifest.json").write_text(json.dumps(mutated(MANIFEST, where, value) if what == "manifest"
                                                           else MANIFEST))
        (tmp_path / "environ.json").write_text(json.dumps(mutated(ENVIRON, where, value) if what == "environ"
                                                          else ENVIRON))
        inputs = collect([str(tmp_path)])
        inc = build(inputs)
        doc_out = to_json(inc)
        assert [f["address"] for f in doc_out["faults"]] == ["0x7f0000001000"], (where, value)
        no_internal(inc.problems)


@pytest.mark.parametrize("row", ["1\t" + "9" * 400 + "\t5\t7", "1\t1.7e9\t5\t" + "9" * 400, "1\tinf\t5\t7",
                                 "x\ty", "1\tnan\tnan\tnan", "-5\t1.7e9\t5\t7"])
def test_times_rows_that_are_not_times(tmp_path, row):
    """#28: a 400-digit wall clock in server.times.tsv raised."""
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    (tmp_path / "server.log").write_text(FAULT)
    (tmp_path / "server.times.tsv").write_text(row + "\n1\t1700000000.5\t5\t7\n")
    inc = triage([str(tmp_path)])
    no_internal(inc.problems)
    assert any("row(s) not read" in p.message for p in inc.problems)
    assert len(inc.faults) == 1


@pytest.mark.parametrize("start", ["-5", "9223372036854775806", "300"])
def test_out_of_range_times_reach_neither_the_analyses_nor_the_perfetto_writer(tmp_path, start):
    """#28: out-of-range times raised in the Perfetto writer (exit 70)."""
    (tmp_path / "server.log").write_text(FAULT)
    (tmp_path / "9_kernel_trace.csv").write_text(
        '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
        '"Correlation_Id","Start_Timestamp","End_Timestamp"\n'
        f'"KERNEL_DISPATCH","Agent 1",1,1,9,1,2,"k",3,{start},200\n"KERNEL_DISPATCH","Agent 1",1,1,9,2,2,"k",4,100,200\n')
    out = tmp_path / "t.pftrace"
    res = subprocess.run([sys.executable, "-m", "faultkit.cli", "timeline", str(tmp_path), "--window", "all",
                          "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    check = subprocess.run([sys.executable, "-m", "faultkit.cli", "timeline", "--check", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout
    inc = triage([str(tmp_path)])
    # only the well-formed record is kept: the other ends before it starts or starts before zero
    assert any("out of range" in p.message for p in inc.problems)


def test_a_corrupted_offload_bundle_count_keeps_the_entries_that_fit():
    import struct
    from pathlib import Path

    from faultkit.ingest.code_object import BUNDLE_MAGIC, code_objects_in
    data = (Path(__file__).parent / "data" / "code_objects" / "kernels.hipfb").read_bytes()
    good, _ = code_objects_in(data, "k.hipfb")
    at = data.find(BUNDLE_MAGIC) + len(BUNDLE_MAGIC)
    for count in (1 << 63, 10 ** 6):
        bad = data[:at] + struct.pack("<Q", count) + data[at + 8:]
        found, problems = code_objects_in(bad, "k.hipfb")
        assert [n for n, _ in found] == [n for n, _ in good]           # was: none, "bundle is cut"
        assert any(f"declares {count:,} entries" in p.message for p in problems)
