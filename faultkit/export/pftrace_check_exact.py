"""Check a Perfetto trace packet by packet, with the perfetto package's own protos.

Every TrackEvent must name a declared track (its own track_uuid or its sequence's default),
parents must be declared, begin/end must balance per track, timestamps must not go backwards on
a sequence, and every interned id must resolve on its sequence since the last state clear.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from .. import limits

MAX_ERRORS = 50
BEGIN, END, INSTANT, COUNTER = (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END,
                                pb.TrackEvent.TYPE_INSTANT, pb.TrackEvent.TYPE_COUNTER)


@dataclass
class CheckResult:
    packets: int = 0
    compressed: int = 0              # packets holding compressed_packets
    inflated: int = 0                # their bytes, inflated (bounded by limits.INFLATED)
    tracks: int = 0
    slices: int = 0
    instants: int = 0
    counters: int = 0
    flows: int = 0
    errors: list[str] = field(default_factory=list)
    names: dict[int, list[str]] = field(default_factory=dict)     # track uuid -> slice/instant names
    track_names: dict[int, str] = field(default_factory=dict)
    parents: dict[int, int] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    flow_ids: set = field(default_factory=set)
    terminating: set = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, text: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(text)


@dataclass
class _Seq:
    names: dict[int, str] = field(default_factory=dict)
    cats: dict[int, str] = field(default_factory=dict)
    anns: dict[int, str] = field(default_factory=dict)
    default_track: int | None = None
    clock: int | None = None
    incremental: dict[int, int] = field(default_factory=dict)     # clock id -> last value
    last_ts: int | None = None
    cleared: bool = False


def inflate_batch(blob: bytes, res: CheckResult) -> bytes | None:
    """A `compressed_packets` batch inflated within the bounds (limits.INFLATE per batch,
    limits.INFLATED in all); None, with the error said, past them. Raises zlib.error."""
    room = min(limits.INFLATE, limits.INFLATED - res.inflated)
    got = limits.inflate(blob, max(room, 0) + 1)
    res.inflated += len(got.data)
    if got.over or len(got.data) > room:
        res.error(f"compressed packets inflate past {room:,} bytes (a batch may hold {limits.INFLATE:,}, a trace "
                  f"{limits.INFLATED:,}): not checked")
        return None
    return got.data


def _packets(trace, res: CheckResult):
    """Every packet in order, the ones inside `compressed_packets` inflated in place (as
    trace_processor does)."""
    for p in trace.packet:
        if p.HasField("compressed_packets"):
            try:
                got = inflate_batch(p.compressed_packets, res)
                if got is None:
                    continue
                inner = pb.Trace.FromString(got)
            except Exception as exc:  # noqa: BLE001 - zlib.error, protobuf DecodeError
                res.error(f"compressed packets that do not inflate to packets: {exc}")
                continue
            res.compressed += 1
            yield from inner.packet
        else:
            yield p


def check_exact(data: bytes, keep_names: bool = True, progress=None) -> CheckResult:
    checker = Checker(keep_names)
    try:
        trace = pb.Trace.FromString(data)
    except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError and others
        checker.res.error(f"not a decodable Perfetto trace: {exc}")
        return checker.res
    for n, p in enumerate(_packets(trace, checker.res)):
        if progress is not None and not n & 0xFFFF:
            progress.add(0x10000)
        checker.packet(p, n)
    return checker.finish()


class Checker:
    """The rules, one packet at a time; its state is what the bulk path carries between the
    packets it checks in bulk and the rare ones it hands here."""

    def __init__(self, keep_names: bool = True):
        self.res = CheckResult()
        self.keep_names = keep_names
        self.seqs: dict[int, _Seq] = {}
        self.open_slices: dict[int, list[str]] = {}

    def seq(self, sid: int) -> _Seq:
        seq = self.seqs.get(sid)
        if seq is None:
            seq = self.seqs[sid] = _Seq()
        return seq

    def packet(self, p, n: int) -> None:
        res = self.res
        res.packets += 1
        sid = p.trusted_packet_sequence_id
        seq = self.seq(sid)
        flags = p.sequence_flags
        if flags & 1:
            seq.names, seq.cats, seq.anns, seq.incremental = {}, {}, {}, {}
            seq.cleared = True
        kind = p.WhichOneof("data")
        if kind != "track_event" or flags & 1 or p.HasField("trace_packet_defaults"):
            _rare(p, kind, n, sid, seq, res)
        if kind != "track_event":
            return
        if p.HasField("interned_data"):
            _interned(p, n, sid, seq, res)
        ev = p.track_event
        clock = p.timestamp_clock_id or seq.clock
        ts = p.timestamp
        if clock in seq.incremental:
            ts = seq.incremental[clock] + ts
            seq.incremental[clock] = ts
        elif clock is not None and clock >= 64:
            res.error(f"packet {n}: sequence clock {clock} used without a clock snapshot")
        if seq.last_ts is not None and ts < seq.last_ts:
            res.error(f"packet {n}: timestamp {ts} goes back on sequence {sid} (after {seq.last_ts})")
        seq.last_ts = ts
        track = ev.track_uuid or seq.default_track
        if track is None or track not in res.track_names:
            res.error(f"packet {n}: event on undeclared track {track}")
            return
        name = ev.name or None
        iid = ev.name_iid
        if iid:
            name = seq.names.get(iid)
            if name is None:
                res.error(f"packet {n}: name iid {iid} not interned on sequence {sid}")
        for c in ev.category_iids:
            if c not in seq.cats:
                res.error(f"packet {n}: category iid {c} not interned on sequence {sid}")
        for a in ev.debug_annotations:
            if a.name_iid and a.name_iid not in seq.anns:
                res.error(f"packet {n}: annotation name iid {a.name_iid} not interned on sequence {sid}")
        if ev.flow_ids:
            res.flow_ids.update(ev.flow_ids)
        if ev.terminating_flow_ids:
            res.terminating.update(ev.terminating_flow_ids)
        t = ev.type
        if t == BEGIN:
            self.open_slices.setdefault(track, []).append(name or "")
            res.slices += 1
            if self.keep_names:
                res.names.setdefault(track, []).append(name or "")
        elif t == END:
            if not self.open_slices.get(track):
                res.error(f"packet {n}: slice end without a begin on track {res.track_names[track]}")
            else:
                self.open_slices[track].pop()
        elif t == INSTANT:
            res.instants += 1
            if self.keep_names:
                res.names.setdefault(track, []).append(name or "")
        elif t == COUNTER:
            res.counters += 1

    def finish(self) -> CheckResult:
        res = self.res
        for track, stack in self.open_slices.items():
            if stack:
                res.error(f"track {res.track_names.get(track)}: {len(stack)} slice(s) never ended ({stack[-1]})")
        res.flows = len(res.flow_ids & res.terminating)
        dangling = res.terminating - res.flow_ids
        if dangling:
            res.error(f"{len(dangling)} flow(s) end without a start")
        return res


def _rare(p, kind: str | None, n: int, sid: int, seq: _Seq, res: CheckResult) -> None:
    """Sequence defaults, clock snapshots, interned data, track descriptors and metadata."""
    if p.HasField("trace_packet_defaults"):
        d = p.trace_packet_defaults
        seq.clock = d.timestamp_clock_id if d.HasField("timestamp_clock_id") else None
        seq.default_track = d.track_event_defaults.track_uuid if d.HasField("track_event_defaults") else None
    if kind == "clock_snapshot":
        for c in p.clock_snapshot.clocks:
            if c.is_incremental:
                seq.incremental[c.clock_id] = c.timestamp
    if kind != "track_event" and p.HasField("interned_data"):
        _interned(p, n, sid, seq, res)
    if kind == "track_descriptor":
        t = p.track_descriptor
        if t.uuid in res.track_names:
            res.error(f"packet {n}: track {t.uuid} declared twice")
        if t.HasField("parent_uuid"):
            if t.parent_uuid not in res.track_names:
                res.error(f"packet {n}: track {t.uuid} ({t.name}) has undeclared parent {t.parent_uuid}")
            res.parents[t.uuid] = t.parent_uuid
        res.track_names[t.uuid] = t.name
        res.tracks += 1
    elif kind == "chrome_events":
        for m in p.chrome_events.metadata:
            res.metadata[m.name] = m.string_value


def _interned(p, n: int, sid: int, seq: _Seq, res: CheckResult) -> None:
    if p.sequence_flags & 2 and not seq.cleared:
        res.error(f"packet {n}: interned data on sequence {sid} before any state clear")
    d = p.interned_data
    for e in d.event_names:
        seq.names[e.iid] = e.name
    for e in d.event_categories:
        seq.cats[e.iid] = e.name
    for e in d.debug_annotation_names:
        seq.anns[e.iid] = e.name
