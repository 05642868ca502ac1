"""`faultkit timeline` on a 10k-dispatch bundle: what the trace shows, decoded, is pinned (issue 35).

The speed work on the timeline (layout and export on arrays, the trace read beside the log
parsing) may change the bytes and the packet order; it must not change a track, a slice, an
annotation, a category, a flow, an instant or a counter value. The bundle has every kind of
record the timeline draws: kernels on three streams of two GPUs (one stream's long kernels
overlap the next ones: lanes), a second process whose 6.3 trace has queues and no streams,
launches with flows to their kernels, launches without a kernel (suspects), memory copies,
allocations with a live-bytes counter, a use-after-free at the fault address and kernels in flight
at the fault. Each slice is checked against the CSV row it came from; the whole decoded content
against its digest taken with the writer before that work (commit 7d0477a).
"""

import json
import re

import pytest
from click.testing import CliRunner

from faultkit.cli import main

from .test_traces import A64, API, FAULT_NS, K63, M70, MS, bundle
from .trace_content import content, digest

N = 10_000
T0 = FAULT_NS - 140 * MS              # the last ~7 ms of kernels run past the fault
KERNELS = ["_Z6gemm_kPfS_i", "rmsnorm_kernel(float*, int)", "paged_attention_ll4mi", "void fill<4>(int)"]
SHOWN = {"_Z6gemm_kPfS_i": "gemm_k(float*, float*, int)"}      # c++filt's reading; the others as written
# the decoded content of both traces below, as the writer before the speed work made it
DIGESTS = {"all": "72488cd8470762dcca4acd7d03c35fbc57d6f73d0fe91493195fc13d6b09856b",
           "0.02s": "12d164852c30bd6c2c1db2bf7e9207f9a84b1432a1f9a862004ba1f2260842b9"}


def dispatch(i: int) -> dict:
    stream = 1 + i % 3
    s = T0 + i * 15_000
    long_ = stream == 2 and i % 40 == 1           # runs across the next kernels on its stream
    return {"agent": 1 + (i % 7 == 0), "queue": stream, "stream": stream, "tid": 9 + i % 2, "did": i + 1,
            "kernel": KERNELS[i % 4], "corr": i + 1, "start": s, "end": s + (200_000 if long_ else 10_000),
            "lds": 512 * (i % 3), "scratch": 0, "vgpr": 32 + 8 * (i % 4), "sgpr": 16, "wg": 64 << (i % 3),
            "grid": 256 * (1 + i % 64)}


def k70_row(d: dict) -> str:
    return (f'"KERNEL_DISPATCH","Agent {d["agent"]}",{d["queue"]},{d["stream"]},{d["tid"]},{d["did"]},{10 + d["did"] % 4},'
            f'"{d["kernel"]}",{d["corr"]},{d["start"]},{d["end"]},{d["lds"]},{d["scratch"]},{d["vgpr"]},0,{d["sgpr"]},'
            f'{d["wg"]},1,1,{d["grid"]},1,1')


@pytest.fixture(scope="module")
def rich_bundle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("content")
    ds = [dispatch(i) for i in range(N)]
    api = [f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",4242,{d["tid"]},{d["corr"]},{d["start"] - 3000},'
           f'{d["start"] - 1000}' for d in ds if d["did"] % 2]
    api += [f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",4242,9,{5 * N + k},{FAULT_NS - (k + 1) * MS},'
            f'{FAULT_NS - (k + 1) * MS + 2000}' for k in range(3)]          # no kernel record: suspects
    api += [f'"HIP_RUNTIME_API_EXT","hipMemcpyAsync",4242,10,{2 * N + k},{T0 + k * 1_000_000},'
            f'{T0 + k * 1_000_000 + 500}' for k in range(100)]
    api.sort(key=lambda line: int(line.split(",")[5]))
    copies = [f'"MEMORY_COPY","MEMORY_COPY_{"HOST_TO_DEVICE" if k % 2 else "DEVICE_TO_HOST"}",{1 + k % 2},'
              f'"Agent {k % 2}","Agent {1 - k % 2}",{2 * N + k},{T0 + k * 1_000_000 + 800},{T0 + k * 1_000_000 + 9000}'
              for k in range(100)]
    allocs = []
    for k in range(150):
        addr, t = 0x7E0000000000 + k * (1 << 21), T0 + k * 700_000
        allocs.append(f'"MEMORY_ALLOCATION","MEMORY_ALLOCATION_ALLOCATE","Agent 1",{4096 << (k % 8)},"0x{addr:016x}",'
                      f'{3 * N + k},{t},{t + 1000}')
        if k % 3 == 0:
            allocs.append(f'"MEMORY_ALLOCATION","MEMORY_ALLOCATION_FREE","",0,"0x{addr:016x}",{3 * N + k},'
                          f'{t + 300_000},{t + 301_000}')
    uaf = 0x7F0000000000
    allocs += [f'"MEMORY_ALLOCATION","MEMORY_ALLOCATION_ALLOCATE","Agent 1",{1 << 20},"0x{uaf:016x}",1,'
               f'{T0 - 900 * MS},{T0 - 900 * MS + 1000}',
               f'"MEMORY_ALLOCATION","MEMORY_ALLOCATION_FREE","",0,"0x{uaf:016x}",2,{FAULT_NS - 3 * MS},'
               f'{FAULT_NS - 3 * MS + 1000}']
    allocs.sort(key=lambda line: int(line.split(",")[6]))
    b = bundle(tmp, [k70_row(d) for d in ds], api, allocs, copies)
    assert (b / "rocprofv3/host/4242_memory_allocation_trace.csv").read_text().startswith(A64)
    assert (b / "rocprofv3/host/4242_memory_copy_trace.csv").read_text().startswith(M70)
    assert (b / "rocprofv3/host/4242_hip_api_trace.csv").read_text().startswith(API)
    q = [f'"KERNEL_DISPATCH",2,{1 + k % 2},{77},{k + 1},{5},"rank1_kernel",{k + 1},{T0 + k * 250_000},'
         f'{T0 + k * 250_000 + (600_000 if k % 25 == 0 else 100_000)},16,0,64,1,1,1024,1,1' for k in range(500)]
    (b / "rocprofv3/host/4343_kernel_trace.csv").write_text(K63 + "\n" + "\n".join(q) + "\n")
    return b, ds


def timeline(tmp_path, b, *args) -> dict:
    out = tmp_path / "t.pftrace"
    res = CliRunner().invoke(main, ["timeline", str(b), "-o", str(out), *args])
    assert res.exit_code == 0, res.output
    check = CliRunner().invoke(main, ["timeline", "--check", str(out)])
    assert check.exit_code == 0, check.output
    return content(out.read_bytes())


def test_every_dispatch_is_its_rows_slice(tmp_path, rich_bundle):
    """Each kernel slice from the row that wrote it: track (GPU node, stream, a lane of it where the
    stream's kernels overlap), times, shown name and every annotation."""
    b, ds = rich_bundle
    c = timeline(tmp_path, b, "--window", "all")
    assert c["unclosed"] == 0
    node = {1: "GPU node 2 (gfx942, MI300X)", 2: "GPU node 3 (gfx942, MI300X)"}       # agent_info: logical -> node
    got = {}
    for track, start, end, name, args, cats, fin, fout in c["slices"]:
        m = re.fullmatch(r"process 4242/(GPU node \d \(gfx942, MI300X\))/stream (\d)(?: \(lane (\d+)\))?", track)
        if m:
            got[dict(args)["dispatch_id"]] = (m.group(1), int(m.group(2)), start, end, name, dict(args), cats, fin)
    assert len(got) == N
    lanes = {t[0] for t in c["tracks"] if "(lane" in t[0]}
    g = "GPU node 2 (gfx942, MI300X)"          # 4343's 6.3 Agent_Id is the node id itself
    assert lanes == {f"process 4242/{g}/stream 2 (lane 2)", f"process 4343/{g}/queue 1 (lane 2)",
                     f"process 4343/{g}/queue 2 (lane 2)"}
    flows = 0
    for d in ds:
        gpu, stream, start, end, name, args, cats, fin = got[d["did"]]
        assert (gpu, stream, start, end, name) == (node[d["agent"]], d["stream"], d["start"], d["end"],
                                                   SHOWN.get(d["kernel"], d["kernel"]))
        assert args == {"dispatch_id": d["did"], "correlation_id": d["corr"], "grid_x": d["grid"], "grid_y": 1,
                        "grid_z": 1, "workgroup_x": d["wg"], "workgroup_y": 1, "workgroup_z": 1, "vgpr": d["vgpr"],
                        "sgpr": d["sgpr"], "lds_bytes": d["lds"], "scratch_bytes": 0}
        flows += bool(fin)
        assert bool(fin) == bool(d["did"] % 2)         # the odd ones were launched in the API trace
        if d["start"] <= FAULT_NS < d["end"]:
            assert "suspect" in cats
    assert flows == N // 2
    threads = [s for s in c["slices"] if s[0].startswith("process 4242/thread")]
    assert sum(s[3] == "hipLaunchKernel" and bool(s[7]) for s in threads) == N // 2 + 3  # to kernels, to the fault
    assert {s[0] for s in c["slices"] if s[3] == "rank1_kernel"} == \
        {f"process 4343/{g}/queue {q}{lane}" for q in (1, 2) for lane in ("", " (lane 2)")}
    assert sum(s[3].startswith("copy ") for s in c["slices"]) == 100
    assert len(c["counters"]) == 152 + 50 and any(i[2].startswith("free 0x7f0000000000") for i in c["instants"])


@pytest.mark.parametrize("window", ["all", "0.02s"])
def test_content_is_what_it_was(tmp_path, rich_bundle, window):
    """The whole decoded trace (tracks, slices, instants, counters, metadata) against its digest from
    the writer before the speed work; a legitimate change of what the trace shows updates DIGESTS."""
    c = timeline(tmp_path, rich_bundle[0], "--window", window)
    assert "<inputs>" not in json.dumps(c)
    if DIGESTS[window] is None:
        print(json.dumps({"window": window, "digest": digest(c, str(rich_bundle[0]))}))
        pytest.skip("no digest pinned")
    assert digest(c, str(rich_bundle[0])) == DIGESTS[window], {k: v if isinstance(v, int) else len(v) for k, v in c.items()}
