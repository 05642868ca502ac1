"""The trace checker's rules applied in bulk, for traces of millions of packets.

Most packets of a big trace are plain track events (a slice's begin or end: timestamp, sequence,
flags, a TrackEvent of scalar fields and annotations). Those are decoded from the wire in bulk
(`wire.decode`) and checked a run at a time: between two other packets nothing they depend on
changes (interned names, sequence defaults, clock snapshots, declared tracks). Every other packet,
and any plain-looking one with a field this module does not read, is decoded by the perfetto protos
and checked by the packet-by-packet `Checker`, which holds the state both paths share.

Only a clean result is answered here: on any rule broken, or bytes that do not decode, `check_bulk`
returns None and the caller runs the exact path, which names the errors in packet order.
"""

from __future__ import annotations

import zlib

import numpy as np

from . import wire
from .pftrace_check_exact import BEGIN, COUNTER, END, INSTANT, Checker, CheckResult, inflate_batch, pb
from .wire import I64, LEN, VARINT, Field, Malformed

# TracePacket fields a plain track event may carry: those the rules read, and scalars the Perfetto
# SDK adds that they do not (trusted uid and pid, previous_packet_dropped, first_packet_on_sequence,
# machine id); none is in the packet's `data` oneof, which decides what the packet is
P_TS, P_SEQ, P_FLAGS, P_CLOCK, P_EVENT = 8, 10, 13, 58, 11
PACKET = {P_TS: Field(VARINT), P_SEQ: Field(VARINT), P_FLAGS: Field(VARINT), P_CLOCK: Field(VARINT),
          P_EVENT: Field(LEN), **{number: Field(VARINT, read=False) for number in (3, 42, 79, 87, 98)}}
# TrackEvent fields: those the rules read, and scalars they do not (counter values, thread times,
# extra counters, source location iid, correlation id)
E_CATS, E_ANN, E_TYPE, E_NAME_IID, E_TRACK, E_NAME, E_FLOW, E_TERM = 3, 4, 9, 10, 11, 23, 47, 48
EVENT = {E_CATS: Field(VARINT, True), E_ANN: Field(LEN, True), E_TYPE: Field(VARINT), E_NAME_IID: Field(VARINT),
         E_TRACK: Field(VARINT), E_NAME: Field(LEN), E_FLOW: Field(I64, True), E_TERM: Field(I64, True),
         **{number: Field(VARINT, True, read=False) for number in (2, 12, 17, 30, 31, 34, 52)}}
# DebugAnnotation: name_iid or name, and a scalar or string value
A_NAME_IID, A_NAME = 1, 10
ANNOTATION = {A_NAME_IID: Field(VARINT), A_NAME: Field(LEN),
              **{number: Field(wt, read=False) for number, wt in ((2, VARINT), (3, VARINT), (4, VARINT), (5, I64),
                                                                 (6, LEN), (7, VARINT), (9, LEN))}}
CHUNK = 1 << 14                # packets decoded at a time: their arrays stay in the caches (2^18 took 1.6x as long)
U32 = np.uint64(1 << 32)
SAFE_TS = np.uint64(1 << 62)


class Unsure(Exception):
    """A rule is broken, or the input is beyond what the bulk path reads: check packet by packet."""


def check_bulk(data: bytes, keep_names: bool = True, progress=None) -> CheckResult | None:
    checker = Checker(keep_names)
    bulk = _Bulk(checker, progress)
    try:
        starts, ends = wire.frames(data)
        bulk.packets(np.frombuffer(data, np.uint8), starts, ends, outer=True)
        bulk.flush_flows()
    except (Malformed, Unsure):
        return None
    res = checker.finish()
    return res if res.ok else None


class _Bulk:
    def __init__(self, checker: Checker, progress):
        self.c = checker
        self.progress = progress
        self.flows: list[np.ndarray] = []
        self.terms: list[np.ndarray] = []

    def packets(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, outer: bool) -> None:
        for lo in range(0, len(starts), CHUNK):
            self._chunk(buf, starts[lo:lo + CHUNK], ends[lo:lo + CHUNK], outer)

    def flush_flows(self) -> None:
        res = self.c.res
        for arrays, into in ((self.flows, res.flow_ids), (self.terms, res.terminating)):
            if arrays:
                into.update(np.concatenate(arrays).tolist())
            arrays.clear()

    def _chunk(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, outer: bool) -> None:
        m = len(starts)
        d = wire.decode(buf, starts, ends, PACKET)
        flags, sid, clock, ts = d.value[P_FLAGS], d.value[P_SEQ], d.value[P_CLOCK], d.value[P_TS]
        odd = d.odd | (flags & np.uint64(1)).astype(bool) | (flags >= U32) | (sid >= U32) | (clock >= U32)
        odd |= ts >= SAFE_TS
        candidates = np.flatnonzero(d.has[P_EVENT] & ~odd)
        events = _Events(buf, d.lo[P_EVENT][candidates], d.hi[P_EVENT][candidates], self.c.keep_names)
        odd[candidates[events.odd]] = True
        plain = np.flatnonzero(d.has[P_EVENT] & ~odd)
        # packets with only a timestamp, sequence and flags (no clear) change nothing a rule reads
        rare = np.flatnonzero(odd)
        events.keep(~events.odd, runs=len(rare) + 1)
        self.c.res.packets += m - len(rare)      # the rare ones are counted where they are checked
        done = 0
        for r in [*rare.tolist(), m]:
            a, b = np.searchsorted(plain, [done, r])
            if b > a:
                self._run(events, a, b, plain[a:b], sid, clock, ts)
            if r < m:
                self._rare(buf, int(starts[r]), int(ends[r]), outer)
            done = r + 1
        if self.progress is not None:
            self.progress.add(m)

    def _rare(self, buf: np.ndarray, lo: int, hi: int, outer: bool) -> None:
        try:
            p = pb.TracePacket.FromString(buf[lo:hi].tobytes())
        except Exception:  # noqa: BLE001 - protobuf's DecodeError and others
            raise Unsure from None
        if outer and p.HasField("compressed_packets"):
            try:
                inner = inflate_batch(p.compressed_packets, self.c.res)
            except zlib.error:
                raise Unsure from None
            if inner is None:
                raise Unsure             # past the bounds: the exact path says so
            self.c.res.compressed += 1
            starts, ends = wire.frames(inner)
            self.packets(np.frombuffer(inner, np.uint8), starts, ends, outer=False)
            return
        self.c.packet(p, 0)              # no packet index: any error hands the trace to the exact path,
        if self.c.res.errors:            # whose messages number the packets
            raise Unsure

    def _run(self, ev: "_Events", a: int, b: int, packets: np.ndarray, sid: np.ndarray, clock: np.ndarray,
             ts: np.ndarray) -> None:
        """Plain track events a..b of the chunk's plain list (`packets`), in order, with no other
        packet between them."""
        c, res = self.c, self.c.res
        sids = sid[packets]
        tracks = np.zeros(b - a, np.uint64)
        # grouped by sequence once (sorts, not a pass over the run per sequence: a trace of 20k
        # one-slice lanes has 20k sequences in one run)
        order = np.argsort(sids, kind="stable")
        groups = np.split(order, np.flatnonzero(np.diff(sids[order])) + 1)
        by_seq = {}
        for attr in ("cat", "ann"):
            of, vals = ev.rows(attr, a, b)
            keys = sids[of - a]
            o = np.argsort(keys, kind="stable")
            by_seq[attr] = (keys[o], vals[o])
        for mine in groups:
            s = int(sids[mine[0]])
            seq = c.seq(s)
            self._times(seq, clock[packets[mine]], ts[packets[mine]])
            t = ev.track[a:b][mine]
            if seq.default_track is None:
                if (t == 0).any():
                    raise Unsure
            else:
                t = np.where(t == 0, np.uint64(seq.default_track), t)
            tracks[mine] = t
            iids = ev.name_iid[a:b][mine]
            _interned(iids[iids != 0], seq.names)
            for attr, table in (("cat", seq.cats), ("ann", seq.anns)):
                keys, vals = by_seq[attr]
                lo, hi = np.searchsorted(keys, np.array([s, s + 1], keys.dtype))
                if hi > lo:
                    vals = vals[lo:hi]
                    _interned(vals[vals != 0] if table is seq.anns else vals, table)
        if not np.isin(tracks, np.fromiter(res.track_names, np.uint64, len(res.track_names))).all():
            raise Unsure
        for attr, into in (("flow", self.flows), ("term", self.terms)):
            into.append(ev.rows(attr, a, b)[1])
        types = ev.type[a:b]
        begins, ends = types == BEGIN, types == END
        res.slices += int(begins.sum())
        res.instants += int((types == INSTANT).sum())
        res.counters += int((types == COUNTER).sum())
        self._balance(tracks, begins, ends)
        if c.keep_names:
            named = np.flatnonzero(begins | (types == INSTANT))
            for i in named.tolist():
                iid = int(ev.name_iid[a + i])
                seq = c.seqs[int(sids[i])]
                res.names.setdefault(int(tracks[i]), []).append(seq.names[iid] if iid else ev.names.get(a + i, ""))

    @staticmethod
    def _times(seq, clocks: np.ndarray, raw: np.ndarray) -> None:
        """The exact path's timestamp rules: incremental clocks add up, a sequence clock needs its
        snapshot, and nothing goes back on a sequence."""
        default = -1 if seq.clock is None else seq.clock
        eff = np.where(clocks != 0, clocks.astype(np.int64), default)
        out = raw.astype(np.int64)
        for cv in np.unique(eff).tolist():
            mask = eff == cv
            if cv in seq.incremental:
                base = seq.incremental[cv]
                part = raw[mask].astype(np.int64)
                if base >= 1 << 62 or int(part.max()) * len(part) >= (1 << 62):
                    raise Unsure                     # Python's integers do not overflow; int64 could
                total = base + np.cumsum(part)
                out[mask] = total
                seq.incremental[cv] = int(total[-1])
            elif cv >= 64:
                raise Unsure
        if (seq.last_ts is not None and out[0] < seq.last_ts) or (np.diff(out) < 0).any():
            raise Unsure
        seq.last_ts = int(out[-1])

    def _balance(self, tracks: np.ndarray, begins: np.ndarray, ends: np.ndarray) -> None:
        step = begins.astype(np.int64) - ends
        moved = step != 0
        if not moved.any():
            return
        for t in np.unique(tracks[moved]).tolist():
            stack = self.c.open_slices.setdefault(t, [])
            depth = len(stack) + np.cumsum(step[tracks == t])
            if depth.min() < 0:
                raise Unsure
            final = int(depth[-1])
            if final > len(stack):
                stack.extend([""] * (final - len(stack)))   # names only matter to an error's message
            else:
                del stack[final:]


def _interned(iids: np.ndarray, table: dict[int, str]) -> None:
    if len(iids) <= 64:                  # a short lane's few: a set look-up costs less than np.isin's setup
        if not all(i in table for i in iids.tolist()):
            raise Unsure
    elif not np.isin(iids, np.fromiter(table, np.uint64, len(table))).all():
        raise Unsure


class _Events:
    """The TrackEvents of a chunk's plain candidates, decoded in bulk; `odd[i]` marks one this
    module does not read (an unknown field, a repeated scalar, a packed list, an unknown type)."""

    def __init__(self, buf: np.ndarray, lo: np.ndarray, hi: np.ndarray, keep_names: bool):
        d = wire.decode(buf, lo, hi, EVENT)
        self.type, self.name_iid, self.track = d.value[E_TYPE], d.value[E_NAME_IID], d.value[E_TRACK]
        odd = d.odd | (self.type > np.uint64(4)) | (d.has[E_NAME] & d.has[E_NAME_IID])   # a oneof set twice
        self.names: dict[int, str] = {}
        if keep_names:
            for i in np.flatnonzero(d.has[E_NAME]).tolist():
                try:
                    self.names[i] = buf[d.lo[E_NAME][i]:d.hi[E_NAME][i]].tobytes().decode("utf-8")
                except UnicodeDecodeError:
                    odd[i] = True
        ann_of, _, ann_lo, ann_hi = d.rows[E_ANN]
        a = wire.decode(buf, ann_lo, ann_hi, ANNOTATION)
        odd[ann_of[a.odd | (a.has[A_NAME] & a.has[A_NAME_IID])]] = True
        self.odd = odd
        self.cat_of, self.cat = d.rows[E_CATS][:2]
        self.ann_of, self.ann = ann_of, a.value[A_NAME_IID]
        self.flow_of, self.flow = d.rows[E_FLOW][:2]
        self.term_of, self.term = d.rows[E_TERM][:2]

    def keep(self, mask: np.ndarray, runs: int) -> None:
        """Only the events `mask` selects, renumbered in order (the plain ones of the chunk), to be
        read in `runs` runs: with many, each field's rows are sorted by event once."""
        new = np.cumsum(mask) - 1
        self.type, self.name_iid, self.track = self.type[mask], self.name_iid[mask], self.track[mask]
        self.names = {int(new[i]): v for i, v in self.names.items() if mask[i]}
        self.events = int(mask.sum())
        self.sorted = runs > 4
        for attr in ("cat", "ann", "flow", "term"):
            of, values = getattr(self, attr + "_of"), getattr(self, attr)
            sel = np.flatnonzero(mask[of])
            if self.sorted:
                sel = sel[np.argsort(of[sel], kind="stable")]
            setattr(self, attr + "_of", new[of[sel]])
            setattr(self, attr, values[sel])

    def rows(self, attr: str, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows of field `attr` ("cat", "ann", "flow", "term") of events a..b: events, values."""
        of, values = getattr(self, attr + "_of"), getattr(self, attr)
        if a == 0 and b == self.events:
            return of, values
        if self.sorted:
            lo, hi = np.searchsorted(of, [a, b])
            return of[lo:hi], values[lo:hi]
        sel = (of >= a) & (of < b)
        return of[sel], values[sel]
