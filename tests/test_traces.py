"""rocprofv3 / PyTorch-profiler ingest and the trace analyses, on the corpus and on own fixtures."""

import json
import sqlite3

import pytest

from faultkit.triage import TriageOptions, build, triage
from faultkit.bundle import collect
from faultkit.export.report import render_markdown, to_json
from faultkit.ingest.traces import read_trace_paths

from .conftest import corpus_files, corpus_ids

CSVS = corpus_files("rocprofv3", "*.csv") + corpus_files("rocprofv3", "*_excerpt.txt")
CORPUS_ROWS = {  # file -> (table, rows)
    "hpctraining-rocm6.2.1_agent_info.csv": ("agents", 8),
    "hpctraining-rocm6.2.1_kernel_trace.csv": ("dispatches", 9),
    "hpctraining-rocm6.3or6.4_kernel_trace_excerpt.txt": ("dispatches", 4),
    "hpctraining-rocm7.1.1_rocpd2csv_kernel_trace.csv": ("dispatches", 9),
    "sdk-docs-2024-07_hip_runtime_trace.csv": ("api", 7),
    "sdk-docs-2024-08_kernel_trace.csv": ("dispatches", 7),
    "sdk-docs-2024-10_memory_copy_trace.csv": ("copies", 2),
    "sdk-docs-2025-08_memory_allocation_trace.csv": ("allocations", 4),
    "sdk-docs-rocm6.2.0_kernel_trace.csv": ("dispatches", 1),
    "sdk-docs-rocm6.2.0_memory_copy_trace.csv": ("copies", 2),
    "sdk-docs-rocm7.0_hip_runtime_trace.csv": ("api", 8),
    "sdk-docs-rocm7.0_kernel_trace.csv": ("dispatches", 9),
    "sdk-docs-rocm7.0_memory_copy_trace.csv": ("copies", 4),
    "sdk-docs-rocm7.0_rocpd-to-csv_hip_api_trace.csv": ("api", 7),
}


@pytest.mark.parametrize("path", CSVS, ids=corpus_ids(CSVS))
def test_every_corpus_trace_ingests(corpus, path):
    from faultkit.ingest.rocprof import read_csv
    from faultkit.trace_model import Trace
    t = Trace()
    read_csv(path, t)
    t.finish()
    if path.name in CORPUS_ROWS:
        table, rows = CORPUS_ROWS[path.name]
        assert len(getattr(t, table)) == rows
        if table == "dispatches":
            d = t.dispatches
            assert d["start"].is_monotonic_increasing and (d["end"] >= d["start"]).all()
            assert d["kernel"].notna().all()
    else:   # stats and counters are not traces of work
        assert path.name.endswith(("_stats.csv", "counter_collection.csv"))


def test_corpus_value_formats(corpus):
    t = read_trace_paths([corpus / "rocprofv3/sdk-docs-2024-08_kernel_trace.csv"])
    d = t.dispatches                      # sorted by start time, not the file's buffer-flush order
    assert d["start"].is_monotonic_increasing and list(d["dispatch_id"])[:3] == [1, 5, 2]
    t = read_trace_paths([corpus / "rocprofv3/sdk-docs-2025-08_memory_allocation_trace.csv"])
    a = t.allocations
    assert a["address"].iloc[0] == 0x00007FFB26354000 and set(a["operation"]) == {"ALLOCATE", "FREE"}
    t = read_trace_paths([corpus / "rocprofv3/sdk-docs-2024-10_memory_copy_trace.csv"])
    assert list(t.copies["direction"]) == ["HOST_TO_DEVICE", "DEVICE_TO_HOST"]   # MEMORY_COPY_ prefix gone
    t = read_trace_paths([corpus / "rocprofv3/hpctraining-rocm7.1.1_rocpd2csv_kernel_trace.csv",
                          corpus / "rocprofv3/hpctraining-rocm6.2.1_agent_info.csv"])
    assert t.dispatches["agent"].iloc[0] == "Agent 4" and t.dispatches["lds"].iloc[0] == 8456
    assert t.dispatches["agent_node"].iloc[0] == 4      # logical 4 -> Node_Id 4 through agent_info


# ---------------- own fixtures: every version's header ----------------

K62 = ('"Kind","Agent_Id","Queue_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp",'
       '"Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z",'
       '"Grid_Size_X","Grid_Size_Y","Grid_Size_Z"')
K63 = ('"Kind","Agent_Id","Queue_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
       '"Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X",'
       '"Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"')
K70 = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
       '"Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count",'
       '"Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X",'
       '"Grid_Size_Y","Grid_Size_Z"')
API = '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"'
A64 = '"Kind","Operation","Agent_Id","Allocation_Size","Address","Correlation_Id","Start_Timestamp","End_Timestamp"'
M70 = ('"Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id","Correlation_Id",'
       '"Start_Timestamp","End_Timestamp"')
AG = '"Node_Id","Logical_Node_Id","Agent_Type","Name","Product_Name"'


def k70(agent, queue, stream, tid, did, name, corr, start, end):
    return (f'"KERNEL_DISPATCH","Agent {agent}",{queue},{stream},{tid},{did},7,"{name}",{corr},{start},{end},'
            f'0,0,8,0,16,256,1,1,65536,1,1')


def test_each_version_header(tmp_path):
    (tmp_path / "1_kernel_trace.csv").write_text(
        K62 + '\n"KERNEL_DISPATCH",2,139690710949888,3,"k62(int)",5,100,200,0,64,4,4,1,1024,1024,1\n')
    (tmp_path / "2_kernel_trace.csv").write_text(
        K63 + '\n"KERNEL_DISPATCH",2,1,69,4,3,"void k63<float>(float*, int)",7,300,400,16,0,64,1,1,1024,1,1\n')
    (tmp_path / "3_kernel_trace.csv").write_text(K70 + "\n" + k70(1, 1, 2, 9, 1, "k70", 3, 500, 600) + "\n")
    t = read_trace_paths([tmp_path])
    d = t.dispatches
    assert list(d["kernel"]) == ["k62(int)", "void k63<float>(float*, int)", "k70"]
    assert list(d["pid"]) == [1, 2, 3] and list(d["dispatch_id"]) == [-1, 4, 1] and list(d["stream"]) == [-1, -1, 2]
    assert list(d["lds"]) == [64, 0, 0] and list(d["scratch"]) == [0, 16, 0] and d["vgpr"].iloc[2] == 8
    assert list(d["agent_node"]) == [2, 2, -1]            # 'Agent 1' without agent_info stays unknown
    assert any("logical" in p.message for p in t.problems)


def test_crashed_run_files(tmp_path):
    (tmp_path / "9_kernel_trace.csv").write_text(K70 + "\n" + k70(1, 1, 1, 9, 1, "done", 1, 10, 20) + "\n"
                                                 + '"KERNEL_DISPATCH","Agent 1",1,1,9,2,7,"cut_ro')
    (tmp_path / "9_hip_api_trace.csv").write_text("")
    (tmp_path / "9_quoted_kernel_trace.csv").write_text(
        K70 + "\n" + k70(1, 1, 1, 9, 3, 'op<"x">(int, float)', 4, 30, 40) + "\n" + k70(1, 1, 1, 9, 4, "b", 5, 50, 60) + "\n")
    (tmp_path / "9_results.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)
    (tmp_path / "9_results.json").write_text('{"rocprofiler-sdk-tool": [{"metadata": {"pid": 9}, "buffer_rec')
    (tmp_path / ".rocprofv3").mkdir()
    (tmp_path / ".rocprofv3" / "1-9-kernel.dat").write_bytes(b"\x01\x02")
    t = read_trace_paths([tmp_path])
    assert sorted(t.dispatches["kernel"]) == ["b", "done", 'op<"x">(int, float)']
    msgs = " | ".join(str(p) for p in t.problems)
    for needle in ("cut mid-row", "empty file", "database unreadable", "not readable JSON", "buffer residue"):
        assert needle in msgs, needle


def _rocpd(path, suffix="_0197aabb_cc"):
    con = sqlite3.connect(path)
    ddl = {
        "rocpd_string": "id INTEGER PRIMARY KEY, guid TEXT, string TEXT",
        "rocpd_info_agent": "id INTEGER PRIMARY KEY, guid TEXT, nid INT, pid INT, type TEXT, absolute_index INT, "
                            "logical_index INT, type_index INT, name TEXT, product_name TEXT",
        "rocpd_info_kernel_symbol": "id INTEGER PRIMARY KEY, guid TEXT, kernel_name TEXT, display_name TEXT",
        "rocpd_event": "id INTEGER PRIMARY KEY, guid TEXT, category_id INT, stack_id INT, correlation_id INT",
        "rocpd_region": "id INTEGER PRIMARY KEY, guid TEXT, nid INT, pid INT, tid INT, start INT, end INT, "
                        "name_id INT, event_id INT",
        "rocpd_kernel_dispatch": "id INTEGER PRIMARY KEY, guid TEXT, nid INT, pid INT, tid INT, agent_id INT, "
                                 "kernel_id INT, dispatch_id INT, queue_id INT, stream_id INT, start INT, end INT, "
                                 "private_segment_size INT, group_segment_size INT, workgroup_size_x INT, "
                                 "workgroup_size_y INT, workgroup_size_z INT, grid_size_x INT, grid_size_y INT, "
                                 "grid_size_z INT, region_name_id INT, event_id INT",
        "rocpd_memory_allocate": "id INTEGER PRIMARY KEY, guid TEXT, nid INT, pid INT, tid INT, agent_id INT, "
                                 "type TEXT, level TEXT, start INT, end INT, address INT, size INT, queue_id INT, "
                                 "stream_id INT, event_id INT",
    }
    for t, cols in ddl.items():
        con.execute(f"CREATE TABLE {t}{suffix} ({cols})")
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM {t}{suffix}")
    con.executemany(f"INSERT INTO rocpd_string{suffix} VALUES (?,?,?)",
                    [(1, "g", "HIP_RUNTIME_API_EXT"), (2, "g", "hipLaunchKernel")])
    con.execute(f"INSERT INTO rocpd_info_agent{suffix} VALUES (1,'g',1,77,'GPU',2,1,0,'gfx942','AMD Instinct MI300X')")
    con.execute(f"INSERT INTO rocpd_info_kernel_symbol{suffix} VALUES (5,'g','attn.kd','attn_fwd')")
    con.executemany(f"INSERT INTO rocpd_event{suffix} VALUES (?,?,?,?,?)", [(1, "g", 1, 41, 0), (2, "g", 1, 42, 0)])
    con.execute(f"INSERT INTO rocpd_region{suffix} VALUES (1,'g',1,77,78,1000,1100,2,1)")
    con.execute(f"INSERT INTO rocpd_kernel_dispatch{suffix} VALUES "
                f"(1,'g',1,77,78,1,5,1,3,1,1200,1900,0,512,256,1,1,4096,1,1,2,1)")
    con.execute(f"INSERT INTO rocpd_memory_allocate{suffix} VALUES "
                f"(1,'g',1,77,78,1,'ALLOC','REAL',900,950,{0x7F0000000000},65536,0,0,2)")
    con.commit()
    con.close()


def test_rocpd_database_through_views(tmp_path):
    _rocpd(tmp_path / "host_77_results.db")
    t = read_trace_paths([tmp_path])
    d = t.dispatches
    assert (d["kernel"].iloc[0], d["pid"].iloc[0], d["correlation_id"].iloc[0], d["agent_node"].iloc[0]) == \
        ("attn_fwd", 77, 41, 2)     # correlation from rocpd_event.stack_id, node from absolute_index
    assert t.api["function"].iloc[0] == "hipLaunchKernel" and t.api["correlation_id"].iloc[0] == 41
    assert t.allocations["address"].iloc[0] == 0x7F0000000000 and t.allocations["operation"].iloc[0] == "ALLOCATE"
    assert t.agents["name"].iloc[0] == "AMD Instinct MI300X"


def test_json_output(tmp_path):
    doc = {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 55},
        "agents": [{"id": {"handle": 111}, "type": 2, "node_id": 3, "logical_node_id": 1, "name": "gfx90a"}],
        "kernel_symbols": [{"kernel_id": 9, "formatted_kernel_name": "gemm_kernel"}],
        "buffer_records": {
            "kernel_dispatch": [{"thread_id": 56, "correlation_id": {"internal": 12}, "start_timestamp": 10,
                                 "end_timestamp": 20, "dispatch_info": {"agent_id": {"handle": 111},
                                 "queue_id": {"handle": 2}, "kernel_id": 9, "dispatch_id": 1,
                                 "workgroup_size": {"x": 64, "y": 1, "z": 1}, "grid_size": {"x": 64, "y": 1, "z": 1}}}],
            "memory_allocation": [{"operation": 1, "agent_id": {"handle": 111}, "address": "0x7f00",
                                   "allocation_size": 256, "correlation_id": {"internal": 3},
                                   "start_timestamp": 1, "end_timestamp": 2}]}}]}
    (tmp_path / "55_results.json").write_text(json.dumps(doc))
    t = read_trace_paths([tmp_path])
    d = t.dispatches
    assert (d["kernel"].iloc[0], d["agent_node"].iloc[0], d["pid"].iloc[0]) == ("gemm_kernel", 3, 55)
    assert t.allocations["address"].iloc[0] == 0x7F00


def test_pytorch_profiler_trace(tmp_path):
    doc = {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 900, "tid": 901, "ts": 1000.0,
         "dur": 5.0, "args": {"correlation": 77}},
        {"ph": "X", "cat": "kernel", "name": "gather_kernel", "pid": 0, "tid": 7, "ts": 1010.0, "dur": 20.0,
         "args": {"correlation": 77, "device": 0, "stream": 7, "grid": [1024, 1, 1], "block": [128, 1, 1]}},
        {"ph": "i", "name": "[memory]", "pid": 900, "tid": 901, "ts": 900.0,
         "args": {"Addr": 140000000000000, "Bytes": 4096, "Device Id": 0}}]}
    (tmp_path / "prof.json").write_text(json.dumps(doc))
    t = read_trace_paths([tmp_path])
    assert t.clock == "wall-ns" and t.dispatches["kernel"].iloc[0] == "gather_kernel"
    assert t.dispatches["start"].iloc[0] == 1_010_000 and t.dispatches["stream"].iloc[0] == 7
    assert t.api["correlation_id"].iloc[0] == 77 and t.allocations["size"].iloc[0] == 4096


# ---------------- scenario bundles ----------------

FAULT_NS = 1_000_000_000_000       # boottime of the fault line
MS = 1_000_000


def bundle(tmp_path, kernels=(), api=(), allocs=(), copies=(), address=0x7F0000001000, node=2, env=None):
    b = tmp_path / "b"
    (b / "rocprofv3" / "host").mkdir(parents=True)
    (b / "manifest.json").write_text(json.dumps({"schema": "faultkit.bundle/1", "command": "x", "start":
                                                 {"wall": 1.0, "monotonic_ns": 10, "boottime_ns": 10}}))
    line = (f"Memory access fault by GPU node-{node} (Agent handle: 0x55d1) on address 0x{address:x}. "
            f"Reason: Page not present or supervisor privilege.")
    (b / "server.log").write_text("starting\n" + line + "\n")
    (b / "server.times.tsv").write_text(f"1\t1.0\t{FAULT_NS - 5 * MS}\t{FAULT_NS - 5 * MS}\n"
                                        f"2\t2.0\t{FAULT_NS}\t{FAULT_NS}\n")
    r = b / "rocprofv3" / "host"
    (r / "4242_kernel_trace.csv").write_text(K70 + "\n" + "".join(x + "\n" for x in kernels))
    (r / "4242_hip_api_trace.csv").write_text(API + "\n" + "".join(x + "\n" for x in api))
    (r / "4242_memory_allocation_trace.csv").write_text(A64 + "\n" + "".join(x + "\n" for x in allocs))
    (r / "4242_memory_copy_trace.csv").write_text(M70 + "\n" + "".join(x + "\n" for x in copies))
    (r / "4242_agent_info.csv").write_text(AG + '\n0,0,"CPU","cpu","EPYC"\n2,1,"GPU","gfx942","MI300X"\n'
                                           '3,2,"GPU","gfx942","MI300X"\n')
    if env is not None:
        (b / "environ.json").write_text(json.dumps([{"pid": 4242, "gpu": True, "env": env, "cmdline": ["x"]}]))
    return b


def tri(b, env=None):
    inc = build(collect([str(b)]), TriageOptions(env=env))
    return inc, to_json(inc)


def alloc(op, addr, size, t, corr=1):
    agent = '"Agent 1"' if op == "ALLOCATE" else '""'
    return f'"MEMORY_ALLOCATION","MEMORY_ALLOCATION_{op}",{agent},{size},"0x{addr:016x}",{corr},{t},{t + 1000}'


def test_use_after_free_freed_3ms_before(tmp_path):
    b = bundle(tmp_path, allocs=[alloc("ALLOCATE", 0x7F0000000000, 1 << 20, FAULT_NS - 900 * MS),
                                 alloc("FREE", 0x7F0000000000, 0, FAULT_NS - 3 * MS, 2)])
    inc, doc = tri(b)
    a = doc["trace"]["address"]
    assert a["verdict"] == "freed" and "freed 3.000 ms before the fault" in a["text"]
    assert doc["trace"]["fault_time"]["boottime_ns"] == FAULT_NS and "stamped by capture" in \
        doc["trace"]["fault_time"]["source"]
    assert "use after free" in render_markdown(inc)


def test_overflow_by_16_bytes(tmp_path):
    b = bundle(tmp_path, address=0x7F1000001010,
               allocs=[alloc("ALLOCATE", 0x7F1000000000, 4096, FAULT_NS - 100 * MS)])
    a = tri(b)[1]["trace"]["address"]
    assert a["verdict"] == "past-end" and a["distance"] == 16 and "16 bytes past the end" in a["text"]


def test_past_the_end_is_one_rule_for_the_trace_and_the_agent(tmp_path):
    """analyze/placement.py: 3 MiB past a live 64 MiB allocation is past its end for the trace's
    history as for the agent's map (the trace said "none" beyond 1 MiB before the two were one);
    beyond 64 MiB it is in no allocation for both."""
    from faultkit.agent_model import AgentProcess, AllocEvent
    from faultkit.analyze.allocation_owner import locate as owner_of
    base, size = 0x7F2000000000, 64 << 20
    for over, verdict in ((3 << 20, "past-end"), ((64 << 20) + 16, "none")):
        b = bundle(tmp_path / str(over), address=base + size + over,
                   allocs=[alloc("ALLOCATE", base, size, FAULT_NS - 100 * MS)])
        a = tri(b)[1]["trace"]["address"]
        p = AgentProcess(4242, events=[AllocEvent(1, "segment_alloc", FAULT_NS - 100 * MS, base, size, 0, 0, 0, 1)])
        o = owner_of(p, base + size + over, FAULT_NS, "test")
        assert (a["verdict"], o.verdict) == (verdict, verdict)
        if verdict == "past-end":
            assert a["distance"] == over and o.offset == over


def test_cross_queue_overlap_and_ineffective_serialization(tmp_path):
    ks = [k70(1, 1, 1, 9, 1, "producer", 1, FAULT_NS - 50 * MS, FAULT_NS - 20 * MS),
          k70(1, 2, 2, 9, 2, "consumer", 2, FAULT_NS - 30 * MS, FAULT_NS - 10 * MS),
          k70(1, 1, 1, 9, 3, "same_queue_later", 3, FAULT_NS - 19 * MS, FAULT_NS - 15 * MS)]
    cp = ['"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",1,"Agent 0","Agent 1",9,' f"{FAULT_NS - 18 * MS},{FAULT_NS - 12 * MS}"]
    b = bundle(tmp_path, kernels=ks, copies=cp, env={"AMD_SERIALIZE_KERNEL": "3"})
    inc, doc = tri(b)
    o = doc["trace"]["overlaps"]
    assert o["kernel_kernel"] == 2 and o["copy_kernel"] == 2
    assert {(p["a"], p["b"]) for p in o["pairs"] if p["kind"] == "kernel-kernel"} == \
        {("producer", "consumer"), ("consumer", "same_queue_later")}
    s = o["serialization"]
    assert s["variables"] == {"AMD_SERIALIZE_KERNEL": "3"} and not s["effective"] and "did not take effect" in s["verdict"]
    # Given on the command line instead of the bundle's record:
    assert tri(b, {"HIP_LAUNCH_BLOCKING": "1"})[1]["trace"]["overlaps"]["serialization"]["from"] == "--env given to triage"


def test_faulting_kernel_absent_from_trace_but_launched(tmp_path):
    ks = [k70(1, 1, 1, 9, 1, "rmsnorm", 10, FAULT_NS - 40 * MS, FAULT_NS - 39 * MS),
          k70(2, 1, 1, 8, 2, "other_gpu_kernel", 11, FAULT_NS - 30 * MS, FAULT_NS - 29 * MS)]
    api = [f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",4242,9,10,{FAULT_NS - 41 * MS},{FAULT_NS - 40 * MS}',
           f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",4242,8,11,{FAULT_NS - 31 * MS},{FAULT_NS - 30 * MS}',
           f'"HIP_RUNTIME_API_EXT","hipModuleLaunchKernel",4242,9,12,{FAULT_NS - 2 * MS},{FAULT_NS - 2 * MS + 5000}']
    b = bundle(tmp_path, kernels=ks, api=api)
    inc, doc = tri(b)
    kinds = {s["kind"]: s for s in doc["trace"]["in_flight"]}
    launch = kinds["launch-without-dispatch"]
    assert launch["correlation_id"] == 12 and launch["thread"] == 9 and "rmsnorm" in launch["evidence"]
    assert launch["agent_node"] == 2            # 'Agent 1' = logical 1 = node 2 = the runtime's node-2
    assert doc["verdict"]["level"] == "candidates"
    assert doc["verdict"]["candidates"][0]["kernel"].startswith("kernel launched by thread 9")


def test_one_plausible_running_kernel_is_likely(tmp_path):
    ks = [k70(1, 1, 1, 9, 1, "paged_attention", 1, FAULT_NS - 3 * MS, FAULT_NS + 2 * MS),
          k70(2, 1, 1, 8, 2, "elsewhere", 2, FAULT_NS - 3 * MS, FAULT_NS + 2 * MS)]
    _, doc = tri(bundle(tmp_path, kernels=ks))
    assert (doc["verdict"]["level"], doc["verdict"]["kernel"]) == ("likely", "paged_attention")
    assert doc["trace"]["plausible_suspects"] == 1


def test_large_trace_is_read_from_the_window(tmp_path):
    rows = [k70(1, 1, 1, 9, i, f"k{i % 7}", i, FAULT_NS - (400_000 - i) * MS, FAULT_NS - (400_000 - i) * MS + 1000)
            for i in range(1, 400_001)]       # one dispatch a millisecond for 400 s
    b = bundle(tmp_path, kernels=rows)
    _, doc = tri(b)
    f = next(x for x in doc["trace"]["files"] if x["table"] == "dispatches")
    assert f["read_from_byte"] > 0 and 2_000 <= f["rows"] <= 2_600      # the 2 s window + 0.5 s slack
    assert doc["trace"]["rows"]["dispatches"] == f["rows"]


def test_fault_mid_trace_is_read_on_both_sides_of_the_window(tmp_path):
    """One rank faulted and the others ran on for 200 s: the rows long after the fault are not read."""
    rows = [k70(1, 1, 1, 9, i, f"k{i % 7}", i, FAULT_NS - (200_000 - i) * MS, FAULT_NS - (200_000 - i) * MS + 1000)
            for i in range(1, 400_001)]       # 200 s before the fault and 200 s after it
    b = bundle(tmp_path, kernels=rows)
    _, doc = tri(b)
    f = next(x for x in doc["trace"]["files"] if x["table"] == "dispatches")
    size = (b / "rocprofv3" / "host" / "4242_kernel_trace.csv").stat().st_size
    assert 0 < f["read_from_byte"] < f["read_to_byte"] < size // 2 + size // 10
    assert 2_000 <= f["rows"] <= 2_600 + 1_000 + 200        # the window, its slack, and 1 s after the fault


def test_locked_database_is_a_problem_not_a_hang(tmp_path):
    db = tmp_path / "7_results.db"
    _rocpd(db)
    holder = sqlite3.connect(db)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t = read_trace_paths([db])
    finally:
        holder.rollback()
        holder.close()
    assert len(t.dispatches) == 0 and any("database unreadable" in p.message for p in t.problems)


def test_kernel_log_time_mapped_with_capture_anchors(tmp_path):
    """dmesg stamps are CLOCK_MONOTONIC; the capture's anchors give BOOTTIME - MONOTONIC exactly."""
    b = tmp_path / "b"
    (b / "rocprofv3").mkdir(parents=True)
    offset = 7_000_000_000       # 7 s of suspend: BOOTTIME ran ahead of MONOTONIC
    (b / "manifest.json").write_text(json.dumps({"schema": "faultkit.bundle/1", "command": "x", "start": {
        "wall": 1.0, "monotonic_ns": 100_000_000_000, "boottime_ns": 100_000_000_000 + offset}}))
    (b / "kernel.log").write_text(
        "[  183.500000] amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:9 "
        "pasid:32801, for process python3 pid 48213 thread python3 pid 48291)\n"
        "[  183.500010] amdgpu 0000:c1:00.0: amdgpu:   in page starting at address 0x00007f3a2c400000 from IH "
        "client 0x1b (UTCL2)\n"
        "[  183.500020] amdgpu 0000:c1:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00901031\n")
    fault_boot = 183_500_000_000 + offset
    (b / "rocprofv3" / "1_kernel_trace.csv").write_text(
        K70 + "\n" + k70(1, 1, 1, 9, 1, "spans_fault", 1, fault_boot - 2 * MS, fault_boot + 1 * MS) + "\n")
    doc = to_json(build(collect([str(b)])))
    ft = doc["trace"]["fault_time"]
    assert ft["boottime_ns"] == fault_boot and "clock anchors" in ft["source"]
    assert doc["trace"]["in_flight"][0]["kernel"] == "spans_fault"
    assert doc["trace"]["address"]["verdict"] == "no-allocation-trace"      # said, not guessed


def _without_paths(doc):
    """The same evidence read from a folder and from its tarball differs only in where it lies."""
    import re

    if isinstance(doc, dict):
        return {k: _without_paths(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_without_paths(v) for v in doc]
    if isinstance(doc, str):
        return re.sub(r"\S*/b/|\S*\.tar\.gz:b/", "", doc)
    return doc


def test_bundle_and_its_tarball_give_the_same_report(tmp_path):
    import tarfile

    ks = [k70(1, 1, 1, 9, 1, "paged_attention", 1, FAULT_NS - 3 * MS, FAULT_NS + 2 * MS)]
    b = bundle(tmp_path, kernels=ks, allocs=[alloc("ALLOCATE", 0x7F0000000000, 1 << 20, FAULT_NS - 900 * MS),
                                             alloc("FREE", 0x7F0000000000, 0, FAULT_NS - 3 * MS, 2)],
               env={"AMD_SERIALIZE_KERNEL": "3"})
    # The boot's kernel log before the capture holds an old fault at another address: history only.
    (b / "kernel-before.log").write_text(
        "[   12.000000] amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:9 "
        "pasid:32770, for process old pid 1111 thread old pid 1111)\n"
        "[   12.000010] amdgpu 0000:c1:00.0: amdgpu:   in page starting at address 0x00000000dead0000 from IH "
        "client 0x1b (UTCL2)\n")
    (b / "kernel.log").write_text("")
    (b / "kernel-after.log").write_text((b / "kernel-before.log").read_text())
    tar = tmp_path / "b.tar.gz"
    with tarfile.open(tar, "w:gz") as t:
        t.add(b, arcname="b")
    # through triage(), which names copies out of the archive by their member path
    folder, packed = to_json(triage([str(b)])), to_json(triage([str(tar)]))
    assert _without_paths(folder) == _without_paths(packed)
    assert "faultkit-archive-" not in json.dumps(packed)
    assert [f["address"] for f in folder["faults"]] == ["0x7f0000001000"]     # not 0xdead0000
    assert folder["trace"]["fault_time"]["boottime_ns"] == FAULT_NS           # the arrival stamp, from both
    assert folder["trace"]["overlaps"]["serialization"]["variables"] == {"AMD_SERIALIZE_KERNEL": "3"}
    assert folder["trace"]["address"]["verdict"] == "freed"
    names = [i["name"] for i in packed["inputs"]]
    assert not any("times.tsv" in n or "kernel-before" in n or "environ.json" in n for n in names)


@pytest.mark.parametrize("names", [("gemm", "norm"), ('op<"x">(int, float)', "gemm")])
@pytest.mark.parametrize("since", [None, 5_000 * 1_000_000])
def test_a_large_read_in_parts_is_the_read_whole(tmp_path, monkeypatch, names, since):
    """The parts (parsed on several threads) give exactly the rows and types of one read, for the
    whole file and for a window, kernel names with quotes and commas included (those go to the
    lenient reader either way)."""
    from faultkit.ingest import rocprof
    from faultkit.trace_model import Trace
    path = tmp_path / "9_kernel_trace.csv"
    path.write_text(K70 + "\n" + "\n".join(k70(1, 1 + i % 3, 1, 9, i, names[i % 2] if i % 5 else f"k{i % 11}", i,
                                                    1_000_000 * i, 1_000_000 * i + 500) for i in range(1, 20_001)) + "\n")
    monkeypatch.setattr(rocprof, "WINDOW_MIN_BYTES", 0)
    monkeypatch.setattr(rocprof, "SLACK_NS", 0)
    monkeypatch.setattr(rocprof.os, "cpu_count", lambda: 4)      # parts whatever the machine
    answered = []
    real = rocprof._read_parts
    monkeypatch.setattr(rocprof, "_read_parts", lambda *a: answered.append(real(*a)) or answered[-1])

    def read(part_bytes):
        monkeypatch.setattr(rocprof, "PART_BYTES", part_bytes)
        t = Trace()
        rocprof.read_csv(path, t, since_ns=since)
        return t

    parts, whole = read(100_000), read(1 << 40)
    if '"' not in names[0]:
        assert answered[0] is not None and answered[1] is None        # in parts, then too small to part
    assert len(whole.dispatches) == (15_001 if since else 20_000)
    assert parts.dispatches.equals(whole.dispatches)
    assert list(parts.dispatches["kernel"].astype(str)[:3]) == list(whole.dispatches["kernel"].astype(str)[:3])


def test_parts_that_do_not_start_alike_are_read_whole(tmp_path, monkeypatch):
    from faultkit.ingest import rocprof
    monkeypatch.setattr(rocprof, "PART_BYTES", 4)
    monkeypatch.setattr(rocprof.os, "cpu_count", lambda: 2)
    path = tmp_path / "t.csv"
    path.write_bytes(b'"A",1\n"A",2\n"B",3\n"B",4\n')
    assert rocprof._read_parts(path, 0, path.stat().st_size, ["k", "v"], {"k": "category"}, ["k", "v"]) is None
    path.write_bytes(b'"A",1\n"A",2\n"A",3\n"A",4\n')
    df = rocprof._read_parts(path, 0, path.stat().st_size, ["k", "v"], {"k": "category"}, ["k", "v"])
    assert list(df["v"]) == [1, 2, 3, 4] and list(df["k"]) == ["A"] * 4


@pytest.mark.parametrize("table", ["dispatches", "copies", "allocations", "api", "agents"])
def test_an_empty_table_is_the_schema_with_no_rows(table):
    """trace_model.empty (every Trace starts with five): exactly the schema's columns in order, each of
    its dtype, a RangeIndex of length 0, and rows added by Trace.add keep those dtypes."""
    import pandas as pd

    from faultkit.trace_model import SCHEMAS, Trace, conform, empty
    df = empty(table)
    assert list(df.columns) == list(SCHEMAS[table]) and len(df) == 0
    assert [str(t) for t in df.dtypes] == list(SCHEMAS[table].values())
    assert isinstance(df.index, pd.RangeIndex) and df.index.equals(pd.RangeIndex(0))
    t = Trace()
    t.add(table, conform(pd.DataFrame([{"pid": 7}]), table))
    assert [str(x) for x in getattr(t, table).dtypes] == list(SCHEMAS[table].values())
    assert getattr(t, table)["pid"].tolist() == [7]
