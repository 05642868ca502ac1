"""The trace checker's bulk path against its packet-by-packet path: the same result on valid traces
(of faultkit's writer and of the perfetto protos), and on anything else either the same result or
a hand-over to the exact path, which names the errors."""

from __future__ import annotations

import random

import numpy as np
import pytest

from faultkit.export import pftrace_check_bulk
from faultkit.export.pftrace import BEGIN, COUNTER, END, INSTANT, PftraceWriter
from faultkit.export.pftrace_check import check_trace
from faultkit.export.pftrace_check_exact import check_exact
from faultkit.export.pftrace_check_bulk import check_bulk
from faultkit.export.wire import Malformed, frames
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def agree(data: bytes, keep_names: bool = True):
    """The bulk result (None: handed over) and the exact one; where the bulk path answers, it is the
    exact answer, and check_trace is the exact answer (or, where the protos cannot decode the
    trace, the check of its whole part)."""
    exact = check_exact(data, keep_names)
    bulk = check_bulk(data, keep_names)
    if bulk is not None:
        assert exact.ok and bulk == exact
    checked = check_trace(data, keep_names)
    if exact.packets == 0 and exact.errors[0].startswith("not a decodable") and checked.packets:
        assert checked.errors[0].startswith("the trace is cut")      # its whole part checked instead
    else:
        assert checked == exact
    return bulk, exact


def writer_trace(path, compress: bool) -> bytes:
    w = PftraceWriter(str(path), compress=compress)
    proc = w.track("process 7", pid=7)
    q1, q2 = w.track("queue 1", parent=proc), w.track("queue 2", parent=proc)
    meta = w.track("incident", parent=proc)
    w.metadata({"faultkit.verdict": "likely"})
    n = 300
    starts = 1_000_000 + np.arange(n, dtype=np.int64) * 1000
    rng = np.random.default_rng(1)
    w.slices(q1, starts, starts + 600, ["gemm", "norm", "attn"], np.arange(n) % 3,
             {"grid": np.where(np.arange(n) % 2 == 0, 256, 512), "dispatch": np.arange(n) + 7,
              "vgprs": rng.integers(-1, 3, n)},
             flow_in=np.where(np.arange(n) == 5, 99, 0), categories=np.arange(n) % 2 - 1, category_names=["copy"])
    w.slices(q2, starts + 100, starts + 300, ["copy"], np.zeros(n, np.int64), flow_out=np.where(np.arange(n) == 2, 99, 0))
    # events on the shared sequence: new names now and then (packets with interned data between
    # plain ones, so the bulk path checks many short runs)
    for i in range(60):
        ts = 2_000_000 + i * 50
        w.event(meta, ts, BEGIN, name=f"step {i // 5}", args={"i": i}, categories=("x",))
        w.event(meta, ts + 10, END)
    w.event(meta, 3_000_000, INSTANT, name="fault", args={"address": "0x7f00"})
    w.event(meta, 3_000_001, COUNTER, counter=5)
    w.close()
    return path.read_bytes()


@pytest.mark.parametrize("compress", [True, False])
def test_bulk_path_answers_for_the_writers_traces(tmp_path, compress):
    data = writer_trace(tmp_path / "t.pftrace", compress)
    bulk, exact = agree(data)
    assert bulk is not None and exact.ok
    assert (exact.slices, exact.instants, exact.counters, exact.flows) == (660, 1, 1, 1)
    assert (exact.compressed > 1) == compress      # a batch per slice track, and the rest
    by_name = {exact.track_names[t]: v for t, v in exact.names.items()}
    assert by_name["incident"][:6] == ["step 0"] * 5 + ["step 1"] and by_name["queue 1"][:4] == ["gemm", "norm", "attn", "gemm"]
    assert agree(data, keep_names=False)[0] is not None


def test_chunk_boundaries_anywhere(tmp_path, monkeypatch):
    data = writer_trace(tmp_path / "t.pftrace", compress=False)
    for chunk in (1, 7, 64):
        monkeypatch.setattr(pftrace_check_bulk, "CHUNK", chunk)
        assert agree(data)[0] is not None


def proto_trace() -> bytes:
    """A trace as the perfetto protos write it: absolute timestamps, inline names and annotation
    names, a 64-bit track uuid, flows by id, no sequence defaults."""
    t = pb.Trace()
    big = (1 << 64) - 5
    for uuid, name in ((big, "thread"), (11, "other")):
        p = t.packet.add()
        p.track_descriptor.uuid, p.track_descriptor.name = uuid, name
    for i in range(40):
        for kind, ts in ((pb.TrackEvent.TYPE_SLICE_BEGIN, 1000 + i * 10), (pb.TrackEvent.TYPE_SLICE_END, 1005 + i * 10)):
            p = t.packet.add()
            p.timestamp, p.trusted_packet_sequence_id = ts, 3
            # what the Perfetto SDK adds, which no rule reads
            p.trusted_pid, p.previous_packet_dropped, p.first_packet_on_sequence = 77, int(i == 0), i == 0
            p.track_event.thread_time_absolute_us = 5 + i
            p.track_event.type, p.track_event.track_uuid = kind, big if i % 2 else 11
            if kind == pb.TrackEvent.TYPE_SLICE_BEGIN:
                p.track_event.name = f"slice {i}"
                a = p.track_event.debug_annotations.add()
                a.name, a.string_value = "where", "here"
                if i == 3:
                    p.track_event.flow_ids.append(1 << 63)
                if i == 9:
                    p.track_event.terminating_flow_ids.append(1 << 63)
    return t.SerializeToString()


def test_bulk_path_answers_for_the_protos_traces(monkeypatch):
    from faultkit.export.pftrace_check_exact import Checker
    one_by_one = []
    real = Checker.packet
    monkeypatch.setattr(Checker, "packet", lambda self, p, n: one_by_one.append(n) or real(self, p, n))
    assert check_bulk(proto_trace()) is not None
    assert len(one_by_one) == 2              # the track descriptors; every event was read in bulk
    monkeypatch.undo()
    bulk, exact = agree(proto_trace())
    assert bulk is not None
    assert exact.slices == 40 and exact.flows == 1
    assert exact.names[(1 << 64) - 5][:2] == ["slice 1", "slice 3"]


def _broken(tmp_path, how: str) -> bytes:
    w = PftraceWriter(str(tmp_path / f"{how}.pftrace"), compress=False)
    q = w.track("queue")
    starts = np.arange(10, dtype=np.int64) * 100 + 1000
    if how == "overlap":
        w.slices(q, starts, starts + 50, ["k"], np.zeros(10, np.int64))
        w.event(q, 900, BEGIN, name="late")              # its own sequence: fine, but never ended
    elif how == "end without begin":
        w.event(q, 5, END)
    elif how == "undeclared track":
        w.slices(q + 77, starts, starts + 50, ["k"], np.zeros(10, np.int64))
    elif how == "dangling flow":
        w.slices(q, starts, starts + 50, ["k"], np.zeros(10, np.int64), flow_in=np.full(10, 4))
    w.close()
    return (tmp_path / f"{how}.pftrace").read_bytes()


@pytest.mark.parametrize("how", ["overlap", "end without begin", "undeclared track", "dangling flow"])
def test_broken_traces_are_named_by_the_exact_path(tmp_path, how):
    data = _broken(tmp_path, how)
    bulk, exact = agree(data)
    assert bulk is None and exact.errors


def test_rules_on_plain_packets_hand_over(tmp_path):
    """Each rule broken inside a run of plain packets, which only the bulk path reads in bulk."""
    def trace(mutate) -> bytes:
        t = pb.Trace()
        p = t.packet.add()
        p.track_descriptor.uuid, p.track_descriptor.name = 5, "q"
        p = t.packet.add()
        p.trusted_packet_sequence_id, p.sequence_flags = 2, pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        p.interned_data.event_names.add(iid=1, name="k")
        p.trace_packet_defaults.timestamp_clock_id = 64
        p.trace_packet_defaults.track_event_defaults.track_uuid = 5
        c = p.clock_snapshot.clocks.add()
        c.clock_id, c.timestamp, c.is_incremental = 64, 100, True
        for i in range(20):
            for kind in (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END):
                p = t.packet.add()
                p.timestamp, p.trusted_packet_sequence_id, p.sequence_flags = 3, 2, 2
                p.track_event.type = kind
                if kind == pb.TrackEvent.TYPE_SLICE_BEGIN:
                    p.track_event.name_iid = 1
                mutate(i, kind, p)
        return t.SerializeToString()

    def ok(i, kind, p):
        pass

    def unknown_iid(i, kind, p):
        if i == 13 and kind == pb.TrackEvent.TYPE_SLICE_BEGIN:
            p.track_event.name_iid = 4

    def backwards(i, kind, p):
        if i == 13:
            p.timestamp_clock_id = 6                    # an absolute clock: 3 ns, long before

    def unknown_clock(i, kind, p):
        if i == 13:
            p.timestamp_clock_id = 70

    def stray_end(i, kind, p):
        if i == 13:
            p.track_event.type = pb.TrackEvent.TYPE_SLICE_END

    def category(i, kind, p):
        if i == 13:
            p.track_event.category_iids.append(3)

    def annotation(i, kind, p):
        if i == 13:
            p.track_event.debug_annotations.add(name_iid=9, int_value=1)

    def other_track(i, kind, p):
        if i == 13:
            p.track_event.track_uuid = 6

    assert agree(trace(ok))[0] is not None
    for mutate in (unknown_iid, backwards, unknown_clock, stray_end, category, annotation, other_track):
        bulk, exact = agree(trace(mutate))
        assert bulk is None and exact.errors, mutate.__name__


def test_damaged_bytes_never_pass_the_bulk_path(tmp_path):
    """Random damage to a valid trace: the bulk path either gives the exact result or hands over."""
    data = writer_trace(tmp_path / "t.pftrace", compress=False)
    rng = random.Random(15)
    handed_over = 0
    for _ in range(250):
        b = bytearray(data)
        how = rng.randrange(3)
        at = rng.randrange(len(b))
        if how == 0:
            b[at] ^= 1 << rng.randrange(8)
        elif how == 1:
            del b[at:at + rng.randrange(1, 4)]
        else:
            b = b[:at]
        bulk, exact = agree(bytes(b))
        handed_over += bulk is None
    assert handed_over > 100                      # most damage breaks a rule or the format


def test_frames_reads_what_protobuf_reads():
    data = proto_trace()
    starts, ends = frames(data)
    assert len(starts) == len(pb.Trace.FromString(data).packet)
    assert pb.TracePacket.FromString(data[starts[2]:ends[2]]).track_event.name == "slice 0"
    # a field other than the packets among them: read by the slow pass, the same ranges
    odd = data[:int(ends[0])] + b"\x10\x05" + data[int(ends[0]):]
    s2, e2 = frames(odd)
    assert list(s2[1:] - 2) == list(starts[1:]) and s2[0] == starts[0]
    with pytest.raises(Malformed):
        frames(data[:-1])


def _raw_trace(*events: bytes) -> bytes:
    """A declared track 5 and the given TrackEvent bodies as packets on sequence 2 (absolute times)."""
    from faultkit.export.pftrace import f_bytes, f_int
    out = f_bytes(1, f_bytes(60, f_int(1, 5) + f_bytes(2, "q")))
    for ts, body in events:
        out += f_bytes(1, f_int(8, ts) + f_int(10, 2) + f_bytes(11, body))
    return out


def test_timestamps_beyond_int64_are_not_wrapped():
    from faultkit.export.pftrace import f_int
    instant = f_int(9, INSTANT) + f_int(11, 5)
    bulk, exact = agree(_raw_trace(((1 << 64) - 1, instant), (5, instant)))
    assert bulk is None and "goes back" in exact.errors[0]


def test_nested_annotation_values_are_decoded_exactly():
    """An annotation holding a nested message is left to the protos, which see a damaged one."""
    from faultkit.export.pftrace import f_bytes, f_int
    good = f_int(9, INSTANT) + f_int(11, 5) + f_bytes(4, f_bytes(10, "n") + f_int(4, 3))
    nested = f_int(9, INSTANT) + f_int(11, 5) + f_bytes(4, f_bytes(10, "n") + f_bytes(11, b"\xff\xff"))
    assert agree(_raw_trace((10, good)))[0] is not None
    bulk, exact = agree(_raw_trace((10, good), (20, nested)))
    assert bulk is None and "not a decodable" in exact.errors[0]


def test_frames_of_a_message_too_big_for_a_copy_are_found_in_python(tmp_path, monkeypatch):
    from faultkit.export import wire
    # small packets, and packets of compressed batches (multi-byte lengths)
    for data in (proto_trace(), writer_trace(tmp_path / "t.pftrace", compress=True)):
        fast = frames(data)
        monkeypatch.setattr(wire, "SPLIT_IN_C", 10)
        slow = frames(data)
        monkeypatch.undo()
        assert [list(x) for x in slow] == [list(x) for x in fast] and len(fast[0]) > 3
        assert check_trace(data) == check_exact(data)


@pytest.mark.parametrize("compress", [True, False])
def test_a_cut_trace_is_checked_up_to_its_last_whole_packet(tmp_path, compress):
    """A writer killed mid-write leaves a trace whose last packet is cut: what is whole is checked,
    and the first error says where it was cut."""
    data = writer_trace(tmp_path / "t.pftrace", compress)
    cut = data[:len(data) - 7]
    res = check_trace(cut)
    assert not res.ok and res.errors[0].startswith("the trace is cut: its last")
    assert 0 < res.packets < check_trace(data).packets and res.tracks == 4
    from faultkit.export.wire import whole_prefix
    assert whole_prefix(data) == len(data) and 0 < whole_prefix(cut) < len(cut)
    assert not check_trace(b"\x0a\x05\x08\x01").packets            # nothing whole: nothing to salvage
