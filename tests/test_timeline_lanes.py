"""faultkit timeline on work that overlaps on one queue: lanes in one bulk pass, whatever their number.

Issue 36: 20k fully overlapping dispatches took 49-68 s, because every lane was a track written by
its own bulk call (and lanes were found by a scan of every lane per record). The work is bounded
here by counting (encoder calls, heap steps), not by timing; every expected value comes from the
input rows these tests write.
"""

import heapq
import os
import shutil
import zlib

import numpy as np
import pytest
from click.testing import CliRunner

from faultkit.cli import main
from faultkit.export import pftrace, timeline
from faultkit.export.pftrace_check import check_trace

from .test_traces import FAULT_NS, MS, bundle, k70


def decode(data: bytes) -> list[tuple[str, str, int, int]]:
    """Every slice of a trace as (track name, slice name, start, end), read with the perfetto
    package's protos: per sequence its default track, its incremental clock and its interned names."""
    import perfetto.protos.perfetto.trace.perfetto_trace_pb2 as pb
    packets = []
    for x in pb.Trace.FromString(data).packet:
        if x.HasField("compressed_packets"):
            packets += list(pb.Trace.FromString(zlib.decompress(x.compressed_packets)).packet)
        else:
            packets.append(x)
    tracks = {x.track_descriptor.uuid: x.track_descriptor.name for x in packets if x.HasField("track_descriptor")}
    clock, default, names = {}, {}, {}
    open_: dict[int, list] = {}
    out = []
    for x in packets:
        s = x.trusted_packet_sequence_id
        if x.sequence_flags & 1:
            names[s] = {}
        for e in x.interned_data.event_names:
            names[s][e.iid] = e.name
        if x.HasField("trace_packet_defaults"):
            default[s] = x.trace_packet_defaults.track_event_defaults.track_uuid
        if x.HasField("clock_snapshot"):
            clock[s] = x.timestamp
            continue
        if not x.HasField("track_event"):
            continue
        te = x.track_event
        track = te.track_uuid or default.get(s)
        ts = clock[s] + x.timestamp if s in clock else x.timestamp
        if s in clock:
            clock[s] = ts
        if te.type == 1:
            open_.setdefault(track, []).append((names[s].get(te.name_iid, te.name), ts))
        elif te.type == 2:
            name, start = open_[track].pop()
            out.append((tracks[track], name, start, ts))
    return out


def deepest_overlap(starts, ends) -> int:
    """The most records running at once (a sweep over the input's own times)."""
    ev = sorted([(s, 1) for s in starts] + [(e, -1) for e in ends], key=lambda t: (t[0], t[1]))
    depth = best = 0
    for _, d in ev:
        depth += d
        best = max(best, depth)
    return best


def test_overlapping_dispatches_keep_names_and_times_on_lanes(tmp_path):
    """A small queue whose kernels overlap partly: each slice comes back with its input name,
    start and end; no lane holds two slices at once; the lanes are as many as the deepest overlap."""
    rows = [(1, "gemm", 0, 10), (2, "rmsnorm", 2, 4), (3, "silu", 3, 12), (4, "rope", 5, 6),
            (5, "attn", 11, 13), (6, "gemm", 12, 14), (7, "tail", 20, 21)]
    ks = [k70(1, 1, 1, 9, i, name, i, FAULT_NS - 30 * MS + s * MS, FAULT_NS - 30 * MS + e * MS)
          for i, name, s, e in rows]
    out = tmp_path / "t.pftrace"
    res = CliRunner().invoke(main, ["timeline", str(bundle(tmp_path, kernels=ks)), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert check_trace(out.read_bytes()).ok
    got = [s for s in decode(out.read_bytes()) if s[0].startswith("stream 1")]
    want = sorted((name, FAULT_NS - 30 * MS + s * MS, FAULT_NS - 30 * MS + e * MS) for _, name, s, e in rows)
    assert sorted(g[1:] for g in got) == want
    by_lane: dict[str, list] = {}
    for track, _, s, e in got:
        by_lane.setdefault(track, []).append((s, e))
    for spans in by_lane.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    assert len(by_lane) == deepest_overlap([r[2] for r in rows], [r[3] for r in rows]) == 3


def test_twenty_thousand_fully_overlapping_dispatches_in_one_bulk_pass(tmp_path, monkeypatch):
    """Issue 36's case: 20k dispatches on two queues of one GPU, all running at once. Each queue is
    10k lanes deep, all written by one encoder call per queue (it was one per lane), and lanes are
    found with a bounded number of heap steps per record. (The overlap analysis of the same shape,
    10k x 10k pairs counted in O(n log n), is test_overlaps' duplicated-rows test.)"""
    n = 20_000
    ks = [k70(1, 1 + i % 2, 1 + i % 2, 9, i, f"k{i % 7}", i, FAULT_NS - 100 * MS + i, FAULT_NS - MS)
          for i in range(n)]
    b = bundle(tmp_path, kernels=ks)
    calls = {"encode": 0, "heap": 0}
    for name in ("_encode_slices", "_encode_bare"):
        real = getattr(pftrace, name)

        def counted(*a, _real=real, **k):
            calls["encode"] += 1
            return _real(*a, **k)
        monkeypatch.setattr(pftrace, name, counted)

    class CountingHeap:
        def heappush(self, h, x):
            calls["heap"] += 1
            heapq.heappush(h, x)

        def heappop(self, h):
            calls["heap"] += 1
            return heapq.heappop(h)
    monkeypatch.setattr(timeline, "heapq", CountingHeap())
    out = tmp_path / "t.pftrace"
    res = CliRunner().invoke(main, ["timeline", str(b), "-o", str(out), "--window", "all"])
    assert res.exit_code == 0, res.output
    per_queue = n // 2
    assert calls["encode"] <= 2 * (per_queue // pftrace.MAX_CHUNK + 1)        # was 20,000
    assert calls["heap"] <= 3 * n            # a push per record, a pop and push per lane it frees
    r = check_trace(out.read_bytes())
    assert r.ok and r.slices == n
    lanes = [t for t in r.track_names.values() if t.startswith("stream ")]
    assert len(lanes) == n and f"stream 1 (lane {per_queue})" in lanes and f"stream 1 (lane {per_queue + 1})" \
        not in lanes
    # every slice name the input wrote, as often as it wrote it
    names = sorted(x for v in r.names.values() for x in v if x.startswith("k"))
    assert names == sorted(f"k{i % 7}" for i in range(n))


def test_lanes_take_the_lowest_free_lane_and_skip_records_alone():
    """The partitioning itself: records that overlap nothing take lane 0 without any heap step;
    overlapping ones take the lowest-numbered lane free at their start (input times)."""
    starts = np.array([0, 10, 11, 12, 30, 31, 40])
    ends = np.array([5, 20, 13, 14, 35, 32, 41])
    lane = timeline._lanes(starts, ends)
    assert lane.tolist() == [0, 0, 1, 2, 0, 1, 0]
    bare = np.arange(0, 100, 10)
    assert not timeline._lanes(bare, bare + 10).any()


def trace_processor_shell() -> str | None:
    path = os.environ.get("FAULTKIT_TRACE_PROCESSOR") or shutil.which("trace_processor_shell") \
        or shutil.which("trace_processor")
    return path if path and os.access(path, os.X_OK) else None


@pytest.mark.skipif(trace_processor_shell() is None,
                    reason="no trace_processor_shell here (set FAULTKIT_TRACE_PROCESSOR to one; the perfetto "
                           "package would download it, which this machine cannot)")
def test_trace_processor_reads_lanes_names_and_times(tmp_path):
    """Perfetto's own trace processor on the bulk writer's output: slice count, names and
    timestamps as the input wrote them, the lanes as tracks."""
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    rows = [(1, "gemm", 0, 10), (2, "rmsnorm", 2, 4), (3, "silu", 3, 12), (4, "attn", 11, 13)]
    ks = [k70(1, 1, 1, 9, i, name, i, FAULT_NS - 30 * MS + s * MS, FAULT_NS - 30 * MS + e * MS)
          for i, name, s, e in rows]
    out = tmp_path / "t.pftrace"
    assert CliRunner().invoke(main, ["timeline", str(bundle(tmp_path, kernels=ks)), "-o", str(out)]).exit_code == 0
    tp = TraceProcessor(trace=str(out), config=TraceProcessorConfig(bin_path=trace_processor_shell()))
    try:
        got = sorted((r.name, r.ts, r.ts + r.dur) for r in tp.query(
            "select s.name, s.ts, s.dur from slice s join track t on s.track_id = t.id "
            "where t.name like 'stream 1%'"))
        lanes = {r.name for r in tp.query("select distinct t.name from slice s join track t on s.track_id = t.id "
                                          "where t.name like 'stream 1%'")}
    finally:
        tp.close()
    assert got == sorted((name, FAULT_NS - 30 * MS + s * MS, FAULT_NS - 30 * MS + e * MS) for _, name, s, e in rows)
    assert lanes == {"stream 1", "stream 1 (lane 2)", "stream 1 (lane 3)"}
