"""faultkit timeline: Perfetto traces the checker accepts, with the expected tracks, slices, flows
and incident events; the Chrome JSON variant; the checker itself."""

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from faultkit.cli import main
from faultkit.export.pftrace import BEGIN, END, PftraceWriter
from faultkit.export.pftrace_check import check_trace

from .conftest import ROOT, TRACES
from .test_traces import FAULT_NS, K70, MS, alloc, bundle, k70


def run(*args):
    return CliRunner().invoke(main, ["timeline", *args])


def two_rank_bundle(tmp_path):
    ks = [k70(1, 1, 1, 9, 1, "producer", 1, FAULT_NS - 50 * MS, FAULT_NS - 20 * MS),
          k70(1, 2, 2, 9, 2, "consumer", 2, FAULT_NS - 30 * MS, FAULT_NS - 10 * MS),
          k70(1, 1, 1, 9, 4, "paged_attention", 4, FAULT_NS - 3 * MS, FAULT_NS + 2 * MS),
          k70(1, 1, 1, 9, 5, "long_ago", 5, FAULT_NS - 60_000 * MS, FAULT_NS - 59_999 * MS)]
    api = [f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",4242,9,1,{FAULT_NS - 51 * MS},{FAULT_NS - 50 * MS}',
           f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",4242,9,2,{FAULT_NS - 31 * MS},{FAULT_NS - 30 * MS}',
           f'"HIP_RUNTIME_API_EXT","hipModuleLaunchKernel",4242,9,12,{FAULT_NS - 2 * MS},{FAULT_NS - 2 * MS + 5000}']
    allocs = [alloc("ALLOCATE", 0x7F0000000000, 1 << 20, FAULT_NS - 900 * MS),
              alloc("FREE", 0x7F0000000000, 0, FAULT_NS - 3 * MS, 2)]
    b = bundle(tmp_path, kernels=ks, api=api, allocs=allocs)
    (b / "rocprofv3" / "host" / "4343_kernel_trace.csv").write_text(
        K70 + "\n" + k70(2, 1, 1, 7, 1, "rank1_gemm", 1, FAULT_NS - 8 * MS, FAULT_NS - 6 * MS) + "\n")
    return b


def test_two_rank_incident(tmp_path):
    b = two_rank_bundle(tmp_path)
    out = tmp_path / "t.pftrace"
    res = run(str(b), "-o", str(out))
    assert res.exit_code == 0, res.output
    r = check_trace(out.read_bytes())
    assert r.ok, r.errors
    names = set(r.track_names.values())
    assert {"process 4242", "process 4343", "GPU node 2 (gfx942, MI300X)", "GPU node 3 (gfx942, MI300X)", "stream 1", "stream 2",
            "thread 9", "incident", "allocations", "bytes live"} <= names
    by_name = {r.track_names[t]: v for t, v in r.names.items()}
    assert by_name["stream 2"] == ["consumer"] and "rank1_gemm" in sum(r.names.values(), [])
    assert "long_ago" not in sum(r.names.values(), [])            # outside the 30 s window
    # parents: the stream tracks hang under their GPU, the GPU under its process
    s1 = next(u for u, n in r.track_names.items() if n == "stream 2")
    assert r.track_names[r.parents[s1]] == "GPU node 2 (gfx942, MI300X)"
    assert r.track_names[r.parents[r.parents[s1]]] == "process 4242"
    incident = by_name["incident"]
    assert any(n.startswith("runtime: memory-access-fault") for n in incident)
    assert any(n.startswith("verdict: candidates") for n in incident)   # a launch, a Dispatch_Id hole, a running kernel
    assert r.flows >= 3          # two launches to their dispatches, suspects to the fault
    assert r.metadata["faultkit.verdict"] == "candidates" and "stamped by capture" in r.metadata["faultkit.fault_time"]
    assert any(n.startswith("free 0x7f0000000000") for n in by_name["allocations"])
    full = tmp_path / "all.pftrace"
    assert run(str(b), "-o", str(full), "--window", "all").exit_code == 0
    assert "long_ago" in sum(check_trace(full.read_bytes()).names.values(), [])


def test_json_format(tmp_path):
    b = two_rank_bundle(tmp_path)
    out = tmp_path / "t.json"
    assert run(str(b), "-o", str(out), "--format", "json").exit_code == 0
    doc = json.loads(out.read_text())
    evs = doc["traceEvents"]
    assert {e["name"] for e in evs if e["ph"] == "X"} >= {"producer", "consumer", "paged_attention", "hipLaunchKernel"}
    starts = {e["id"] for e in evs if e["ph"] == "s"}
    ends = {e["id"] for e in evs if e["ph"] == "f"}
    assert ends and ends <= starts
    assert doc["metadata"]["faultkit.verdict"] == "candidates"
    assert {e.get("cat") for e in evs if e["name"] == "paged_attention"} == {"suspect"}


def test_logs_only_bundle(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("server.log", "dmesg.txt"):
        (logs / name).write_bytes((TRACES / "sglang-tp2-mi300x" / name).read_bytes())
    out = tmp_path / "t.pftrace"
    res = run(str(logs), "-o", str(out))
    assert res.exit_code == 0, res.output
    r = check_trace(out.read_bytes())
    assert r.ok and r.slices == 0
    incident = [n for t, ns in r.names.items() for n in ns if r.track_names[t] == "incident"]
    assert any("kernel-log" in n for n in incident) and any(n.startswith("verdict: candidates") for n in incident)


def test_bundled_sample_has_slices(tmp_path):
    out = tmp_path / "t.pftrace"
    assert run(str(TRACES / "sglang-tp2-mi300x"), "-o", str(out), "--window", "all").exit_code == 0
    r = check_trace(out.read_bytes())
    assert r.ok and r.slices > 150 and r.flows >= 1


def test_truncated_trace(tmp_path):
    b = bundle(tmp_path, kernels=[k70(1, 1, 1, 9, 1, "whole", 1, FAULT_NS - 5 * MS, FAULT_NS - 4 * MS)])
    f = b / "rocprofv3" / "host" / "4242_kernel_trace.csv"
    f.write_text(f.read_text() + '"KERNEL_DISPATCH","Agent 1",1,1,9,2,7,"half')
    out = tmp_path / "t.pftrace"
    assert run(str(b), "-o", str(out)).exit_code == 0
    r = check_trace(out.read_bytes())
    assert r.ok and sum(r.names.values(), []).count("whole") == 1


def test_overlapping_records_on_one_queue_get_lanes(tmp_path):
    ks = [k70(1, 1, 1, 9, i, f"k{i}", i, FAULT_NS - (10 - i) * MS, FAULT_NS - (10 - i) * MS + 3 * MS)
          for i in range(1, 6)]
    out = tmp_path / "t.pftrace"
    assert run(str(bundle(tmp_path, kernels=ks)), "-o", str(out)).exit_code == 0
    r = check_trace(out.read_bytes())
    assert r.ok and any("(lane 2)" in n for n in r.track_names.values())


def test_checker_rejects_broken_traces(tmp_path):
    w = PftraceWriter(str(tmp_path / "bad.pftrace"))
    t = w.track("q")
    w.event(t, 10, END)                      # an end without a begin
    w.event(t, 20, BEGIN, "never_ended")
    w.event(999999, 30, BEGIN, "nowhere")    # an undeclared track
    w.close()
    r = check_trace((tmp_path / "bad.pftrace").read_bytes())
    text = " | ".join(r.errors)
    assert "without a begin" in text and "never ended" in text and "undeclared track" in text
    res = run("--check", str(tmp_path / "bad.pftrace"))
    assert res.exit_code == 1 and "error:" in res.output
    assert not check_trace(b"\x0a\xff\xff garbage").ok


@pytest.mark.parametrize("compress", [False, True])
def test_bulk_slices_roundtrip(tmp_path, compress):
    """The numpy encoder against the protos: timestamps (incremental clock), names, annotations
    including 64-bit values and left-out ones, and terminating flows; the same packets inside
    deflate-compressed `compressed_packets` batches (inflated as trace_processor does)."""
    n = 5000
    rng = np.random.default_rng(1)
    starts = np.cumsum(rng.integers(1, 1 << 30, n))
    ends = starts + rng.integers(0, 1 << 20, n)
    ends = np.minimum(ends, np.append(starts[1:], starts[-1] + (1 << 20)))
    p = tmp_path / "x.pftrace"
    w = PftraceWriter(str(p), compress=compress)
    t = w.track("q")
    w.slices(t, starts, ends, ["a", "b"], np.arange(n) % 2,
             {"big": np.full(n, 1 << 40), "gap": np.where(np.arange(n) % 2 == 0, -1, 7)},
             flow_in=np.where(np.arange(n) == 3, 99, 0))
    w.close()
    import perfetto.protos.perfetto.trace.perfetto_trace_pb2 as pb
    import zlib
    packets = []
    for x in pb.Trace.FromString(p.read_bytes()).packet:
        if x.HasField("compressed_packets"):
            packets += list(pb.Trace.FromString(zlib.decompress(x.compressed_packets)).packet)
        else:
            packets.append(x)
    if compress:
        assert check_trace(p.read_bytes()).compressed >= 1
    evs = [x for x in packets if x.HasField("track_event")]
    assert len(evs) == 2 * n
    ts = starts[0] + np.cumsum([x.timestamp for x in evs])
    assert (ts[0::2] == starts).all() and (ts[1::2] == ends).all()
    names = {e.iid: e.name for x in packets if x.HasField("interned_data") for e in x.interned_data.event_names}
    assert [names[e.track_event.name_iid] for e in evs[0:4:2]] == ["a", "b"]
    assert [a.int_value for a in evs[0].track_event.debug_annotations] == [1 << 40]
    assert [a.int_value for a in evs[2].track_event.debug_annotations] == [1 << 40, 7]
    assert list(evs[6].track_event.terminating_flow_ids) == [99]
    assert check_trace(p.read_bytes()).errors == ["1 flow(s) end without a start"]
    # the path for slices without annotations (the bulk of bare tracks)
    q = tmp_path / "bare.pftrace"
    w = PftraceWriter(str(q), compress=False)
    t = w.track("bare")
    w.slices(t, starts, ends, ["x"], np.zeros(n, dtype=np.int64), flow_out=np.where(np.arange(n) == 5, 7, 0))
    w.close()
    evs = [x for x in pb.Trace.FromString(q.read_bytes()).packet if x.HasField("track_event")]
    ts = starts[0] + np.cumsum([x.timestamp for x in evs])
    assert (ts[0::2] == starts).all() and (ts[1::2] == ends).all()
    assert list(evs[10].track_event.flow_ids) == [7] and not evs[10].track_event.debug_annotations


def test_timeline_cli_usage():
    res = run()
    assert res.exit_code == 2 and "-o FILE" in res.output


def test_capture_bundle_without_a_trace_times_every_evidence_line(tmp_path):
    """The live H200 bundle has no trace: its faults still sit at their real CLOCK_BOOTTIME (the
    capture's arrival stamps and clock anchors), one track per process or log, not 1 ns apart."""
    out = tmp_path / "t.json"
    assert run(str(ROOT / "tests/data/live_h200_coredump/fault"), "-o", str(out)).exit_code == 0
    doc = json.loads(out.read_text())
    faults = [e for e in doc["traceEvents"] if e.get("ph") in ("i", "I") and e.get("cat") == "fault"]
    ts = sorted(e["ts"] for e in faults)
    assert len(faults) >= 3 and ts[-1] - ts[0] > 100_000          # spread over real time (µs), > 100 ms
    names = {e["name"] for e in faults}
    assert {"kernel-log: xid-13", "kernel-log: xid-31"} <= names
    assert "the first fault line's capture stamp" in doc["metadata"]["faultkit.fault_time"]


def test_check_reads_chrome_json_too(tmp_path):
    out = tmp_path / "t.json"
    assert run(str(TRACES / "sglang-tp2-mi300x"), "-o", str(out), "--window", "all").exit_code == 0
    res = run("--check", str(out))
    assert res.exit_code == 0 and re.search(r"\d+ packets, \d+ tracks, [1-9]\d* slices", res.output)
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "f", "ts": 2, "id": 9}]}')
    res = run("--check", str(bad))
    assert res.exit_code == 1 and "slice without a non-negative dur" in res.output and "flow 9" in res.output


def test_checker_says_when_compressed_packets_do_not_inflate(tmp_path):
    from faultkit.export.pftrace import f_bytes
    bad = tmp_path / "bad.pftrace"
    bad.write_bytes(f_bytes(1, f_bytes(50, b"not zlib at all")))
    r = check_trace(bad.read_bytes())
    assert not r.ok and "do not inflate" in r.errors[0]


def test_progress_shows_only_on_a_terminal_and_only_for_long_steps():
    import io
    import time

    from faultkit.progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True
    long = Tty()
    with Progress(long, after_s=0.1) as p:
        p.stage("writing", "slices")
        p.add(250_000)
        time.sleep(0.4)
    assert "] writing: 250,000 slices" in long.getvalue() and long.getvalue().endswith("\r\x1b[K")
    quick = Tty()
    with Progress(quick, after_s=5):
        pass
    assert quick.getvalue() == ""
    pipe = io.StringIO()
    with Progress(pipe, after_s=0):
        time.sleep(0.2)
    assert pipe.getvalue() == ""


def test_slices_across_encoder_chunks_decode_the_same(tmp_path, monkeypatch):
    """Chunks are encoded independently (in parallel): each must pick up the clock where the one
    before ended, and annotations must read the same whichever way they were encoded."""
    import perfetto.protos.perfetto.trace.perfetto_trace_pb2 as pb
    from faultkit.export import pftrace
    n = 300
    starts = np.arange(n, dtype=np.int64) * 1000 + 5_000_000
    args = {"grid": np.where(np.arange(n) % 3 == 0, 256, 512), "dispatch": np.arange(n) + 1}

    def decoded(chunk, part=1 << 14):
        monkeypatch.setattr(pftrace, "MAX_CHUNK", chunk)
        monkeypatch.setattr(pftrace, "ENCODE_ROWS", part)        # a chunk's parts, encoded one after another
        p = tmp_path / f"c{chunk}-{part}.pftrace"
        w = PftraceWriter(str(p), compress=False)
        w.slices(w.track("q"), starts, starts + 400, ["a", "b"], np.arange(n) % 2, args)
        w.close()
        trace = pb.Trace.FromString(p.read_bytes())
        names = {e.iid: e.name for x in trace.packet for e in x.interned_data.debug_annotation_names}
        t, out = 0, []
        for x in trace.packet:
            if x.HasField("clock_snapshot"):
                t = x.timestamp
            if x.HasField("track_event"):
                t += x.timestamp
                out.append((t, x.track_event.type, x.track_event.name_iid,
                            sorted((names[a.name_iid], a.int_value) for a in x.track_event.debug_annotations)))
        return out

    small, whole, parts = decoded(7), decoded(1 << 16), decoded(64, 5)
    assert small == whole == parts and len(whole) == 2 * n
    assert whole[2] == (5_001_000, BEGIN, 2, [("dispatch", 2), ("grid", 512)]) and whole[3][:2] == (5_001_400, END)
