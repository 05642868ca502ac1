"""The incident as a timeline: tracks, slices, flows and the fault, then Perfetto or Chrome JSON.

`build_timeline` lays out what an Incident holds: a process track per pid; under it one track per
GPU agent and, under each agent, one per stream (7.x) or queue, split into lanes where records
overlap; memory copies on their own tracks; API calls on their threads' tracks with a flow from
each launch to its dispatch; allocations as instants with a bytes-live counter; and an "incident"
track with the fault evidence. Suspects and overlapping work carry a category and a flow to the
fault. `write_pftrace` and `write_json` render the same model.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import redact
from ..analyze.incident import Incident
from ..analyze.in_flight import LAUNCH
from ..trace_model import MISSING
from ..demangle import display_name
from ..private_files import PrivateFile
from .black_box import timeline_points
from .pftrace import BOOTTIME, COUNTER, INSTANT, REALTIME, PftraceWriter
from .row_groups import group_rows

CATEGORIES = ["suspect", "overlap"]


@dataclass
class Track:
    key: str
    name: str
    parent: str | None = None
    pid: int | None = None
    tid: int | None = None
    counter: bool = False
    starts: np.ndarray | None = None
    ends: np.ndarray | None = None
    names: list[str] = field(default_factory=list)
    name_idx: np.ndarray | None = None
    args: dict[str, np.ndarray] = field(default_factory=dict)
    flow_in: np.ndarray | None = None
    flow_out: np.ndarray | None = None
    cats: np.ndarray | None = None
    # A queue whose records overlap: its rows all stay here, row i drawn on lanes[lane[i]] (lane 0 is
    # this track; the others are tracks of their own, without rows), all written in one bulk pass
    lane: np.ndarray | None = None
    lanes: list[str] = field(default_factory=list)


@dataclass
class Point:
    track: str
    ts: int
    kind: int                  # INSTANT or COUNTER
    name: str | None = None
    args: dict = field(default_factory=dict)
    categories: tuple[str, ...] = ()
    flows_in: tuple[int, ...] = ()
    value: int | None = None
    flows_out: tuple[int, ...] = ()


@dataclass
class Timeline:
    tracks: dict[str, Track] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    clock: int = BOOTTIME
    to_fault: list[int] = field(default_factory=list)     # flows from suspects to the fault instant

    def add(self, t: Track) -> Track:
        self.tracks.setdefault(t.key, t)
        return self.tracks[t.key]


def _lanes(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Greedy interval partitioning of records sorted by start: each takes the lowest-numbered lane
    free at its start, so a track only holds slices that do not overlap, in as many lanes as the
    deepest overlap needs. O(n log n): free lanes and busy lanes' ends are heaps, and a record that
    starts after everything before it has ended (most of them) takes lane 0 without a heap step."""
    n = len(starts)
    lane = np.zeros(n, dtype=np.int64)
    if n < 2:
        return lane
    reach = np.maximum.accumulate(ends)
    fresh = np.ones(n, dtype=bool)                  # nothing earlier still running when it starts
    fresh[1:] = starts[1:] >= reach[:-1]
    alone = fresh & np.append(fresh[1:], True)      # ... and nothing starts inside it either
    if alone.all():
        return lane
    busy: list[tuple[int, int]] = []                # (end, lane) of the lanes in use
    free: list[int] = []
    opened = 0
    todo = np.flatnonzero(~alone)
    for i, s, e, new in zip(todo.tolist(), starts[todo].tolist(), ends[todo].tolist(), fresh[todo].tolist()):
        if new:                                     # a new cluster: every lane is free again
            busy, free, opened = [], [], 0
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            k = heapq.heappop(free)
        else:
            k, opened = opened, opened + 1
        lane[i] = k
        heapq.heappush(busy, (e, k))
    return lane


def _slices_into(tl: Timeline, cols, key: str, name: str, parent: str, names, args: dict[str, str],
                 flow_in=None, flow_out=None, cats=None, pid=None, tid=None) -> None:
    """Slices of records onto a track (and lanes where they overlap). `cols`: a DataFrame or a dict
    of arrays holding start, end and the `args` columns; `names`: the records' names, a Series or
    (categories, codes)."""
    col = (lambda c: cols[c].to_numpy()) if isinstance(cols, pd.DataFrame) else cols.__getitem__
    categories, codes = names if isinstance(names, tuple) else _categories(names)
    # only the names these records use are interned
    used = np.bincount(codes[codes >= 0], minlength=len(categories)) > 0
    # (a lane whose slices are all unnamed has no category at all: nothing to renumber)
    renumber = np.cumsum(used) - 1
    codes = np.where(codes >= 0, renumber[np.maximum(codes, 0)], -1) if len(renumber) else np.full(len(codes), -1)
    categories = [str(c) for c, u in zip(categories, used) if u]
    starts_all = col("start")
    ordered = (np.diff(starts_all) >= 0).all()
    order = slice(None) if ordered else np.argsort(starts_all, kind="stable")
    starts = starts_all[order]
    ends = np.maximum(col("end")[order], starts)
    codes = codes[order]
    lanes = _lanes(starts, ends)
    t = tl.add(Track(f"{key}#0", name, parent, pid, tid))
    t.starts, t.ends = starts, ends
    t.names, t.name_idx = categories, codes.astype(np.int64, copy=False)
    t.args = {a: col(c)[order].astype(np.int64, copy=False) for a, c in args.items() if c in cols}
    t.flow_in = None if flow_in is None else np.asarray(flow_in)[order]
    t.flow_out = None if flow_out is None else np.asarray(flow_out)[order]
    t.cats = None if cats is None else np.asarray(cats)[order]
    if lanes.any():
        t.lane, t.lanes = lanes, [t.key]
        for k in range(1, int(lanes.max()) + 1):
            t.lanes.append(tl.add(Track(f"{key}#{k}", f"{name} (lane {k + 1})", parent, pid, tid)).key)


def _categories(names: pd.Series) -> tuple[list, np.ndarray]:
    """A categorical column (kernel names are read as one) is used as it is: no per-row strings."""
    cat = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    return list(cat.cat.categories), cat.cat.codes.to_numpy()


def _in_spans(starts: np.ndarray, ends: np.ndarray, spans: set[tuple[int, int]]) -> np.ndarray:
    if not spans:
        return np.zeros(len(starts), dtype=bool)
    hit = np.isin(starts, [a for a, _ in spans]) & np.isin(ends, [b for _, b in spans])
    for i in np.flatnonzero(hit):        # few: confirm the exact pair
        hit[i] = (int(starts[i]), int(ends[i])) in spans
    return hit


def _flow_id(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    return np.where(corr > 0, (pid.astype(np.int64) & 0x3FFFFFFF) << 32 | (corr.astype(np.int64) & 0xFFFFFFFF) | 1 << 62, 0)


def build_timeline(inc: Incident, window_ns: int | None) -> Timeline:
    tl = Timeline()
    v = inc.verdict
    tl.metadata = {"faultkit.verdict": v.level if v else "unknown", "faultkit.kernel": (v.kernel or "") if v else ""}
    tl.add(Track("incident", "incident"))
    _black_box_points(tl, inc)
    tf = inc.traces
    fault_at = tf.time.on(tf.trace.clock) if tf else None
    if tf is not None:
        tl.clock = REALTIME if tf.trace.clock.startswith("wall") else BOOTTIME
        _trace_tracks(tl, inc, fault_at, window_ns)
        tl.metadata["faultkit.fault_time"] = f"{fault_at} ({tf.time.source})"
    if tf is None and inc.log_clock is not None and _stamped_points(tl, inc):
        return tl
    _incident_points(tl, inc, fault_at)
    return tl


def _black_box_points(tl: Timeline, inc: Incident) -> None:
    """The agent's allocator events as instants on each process's memory track (CLOCK_BOOTTIME)."""
    for pid, ts, name, args in timeline_points(inc):
        key = f"p{pid}:memory"
        if key not in tl.tracks:
            tl.add(Track(f"p{pid}", f"process {pid}", pid=pid))
            tl.add(Track(key, "device memory (agent)", parent=f"p{pid}", pid=pid))
        tl.points.append(Point(key, ts, INSTANT, name, args, ("allocation",)))


def _stamped_points(tl: Timeline, inc: Incident) -> bool:
    """Without a trace, a capture bundle still times every evidence line: faults, report points and
    kernel events at their real CLOCK_BOOTTIME on one track per process (or per log)."""
    clock = inc.log_clock
    kernel_stamps = {str(v.origin): v.stamp for v in list(inc.kernel.faults) + list(inc.kernel.xids)}
    kernel_stamps.update({str(e.origin): e.stamp for e in inc.kernel.events})

    def when(origin, source: str) -> int | None:
        if origin is None:
            return None
        if source == "kernel-log":
            st = kernel_stamps.get(str(origin))
            return clock.of_monotonic(st.seconds) if st is not None and st.clock == "monotonic" else None
        return clock.of_line(origin.file, origin.line)

    def track(pid: int | None, origin) -> str:
        key = f"p{pid}" if pid is not None else f"log:{origin.file if origin else '?'}"
        if key not in tl.tracks:
            tl.add(Track(key, f"process {pid}" if pid is not None else f"log {origin.file if origin else '?'}",
                         pid=pid or 0))
        return key
    placed = []
    for f in inc.faults:
        ts = when(f.origin, f.source)
        if ts is not None:
            placed.append(Point(track(f.pid, f.origin), ts, INSTANT, f"{f.source}: {f.kind}", _fault_args(f),
                                ("fault",)))
    for r in inc.report_points[:50]:
        ts = when(r.origin, "runtime")
        if ts is not None:
            placed.append(Point(track(None, r.origin), ts, INSTANT, redact.text(f"report point: {r.frame}"[:200]),
                                {"evidence": str(r.origin)}, ("report-point",)))
    for e in inc.kernel_events[:500]:
        ts = when(e.origin, "kernel-log")
        if ts is not None:
            placed.append(Point(track(e.fields.get("pid") if isinstance(e.fields.get("pid"), int) else None,
                                      e.origin), ts, INSTANT, f"kernel: {e.kind}", {"text": redact.text(e.text[:300])}))
    if not placed:
        return False
    tl.clock = BOOTTIME
    tl.points += placed
    first = min([p.ts for p in placed if "fault" in p.categories] or [p.ts for p in placed])
    if inc.verdict:
        tl.points.append(_verdict_point(inc.verdict, first))
    tl.metadata["faultkit.fault_time"] = f"{first} (the first fault line's capture stamp)"
    return True


# a kernel slice's annotations: name in the trace -> column of the dispatch records
DISPATCH_ARGS = {"dispatch_id": "dispatch_id", "correlation_id": "correlation_id", "grid_x": "grid_x",
                 "grid_y": "grid_y", "grid_z": "grid_z", "workgroup_x": "wg_x", "workgroup_y": "wg_y",
                 "workgroup_z": "wg_z", "vgpr": "vgpr", "sgpr": "sgpr", "lds_bytes": "lds", "scratch_bytes": "scratch"}


def _trace_tracks(tl: Timeline, inc: Incident, fault_at: int | None, window_ns: int | None) -> None:
    tf = inc.traces
    tr = tf.trace
    lo = fault_at - window_ns if fault_at is not None and window_ns is not None else None

    def clip(df):
        if lo is not None:
            df = df[df["end"] >= lo]
        return df
    d, c, a, al = clip(tr.dispatches), clip(tr.copies), clip(tr.api), tr.allocations
    start = d["start"].to_numpy()
    if len(d) > 1 and not (start[1:] >= start[:-1]).all():     # the trace model sorts by start: a guard
        d = d.sort_values("start", kind="stable", ignore_index=True)
    groups = _queue_groups(d)
    gfx = {int(r.node_id): ", ".join(str(x) for x in (r.gfx, r.name) if x not in (None, "", "0"))
           for r in tr.agents.itertuples()} if len(tr.agents) else {}
    suspect_keys = {(s.pid, s.correlation_id) for s in tf.suspects if s.correlation_id is not None}
    overlap_spans = {(p["a_start"], p["a_end"]) for p in (tf.overlaps.pairs if tf.overlaps else [])} | \
                    {(p["b_start"], p["b_end"]) for p in (tf.overlaps.pairs if tf.overlaps else [])}
    to_fault = []                     # flow ids from suspects to the fault instant
    launch_flows: set[int] = set()
    queue_tracks: list[tuple[_QueueGroup, list[str]]] = []     # each queue's track and lane keys, in order
    for pid in np.unique(np.concatenate([x["pid"].to_numpy(np.int64) for x in (d, c, a, al)])).tolist():
        ptrack = tl.add(Track(f"p{pid}", f"process {pid}" if pid != MISSING else "process (pid not recorded)",
                              pid=int(pid) if pid != MISSING else 0))
        ap = a[a["pid"] == pid]
        if len(ap):
            fn = ap["function"].astype("category")
            launch_cats = [c for c in fn.cat.categories if LAUNCH.match(str(c))]
            is_launch = fn.isin(launch_cats).to_numpy()
            corr = ap["correlation_id"].to_numpy()
            dp_corr = d["correlation_id"].to_numpy()[d["pid"].to_numpy() == pid]
            matched = np.isin(corr, dp_corr) & is_launch
            fo = np.where(matched, _flow_id(np.full(len(ap), pid), corr), 0)
            launch_flows |= set(fo[fo > 0].tolist())
            susp = np.isin(corr, [k for p_, k in suspect_keys if p_ == pid])
            fo = np.where(susp & (fo == 0), _flow_id(np.full(len(ap), pid), corr) ^ (1 << 61), fo)
            to_fault += [x for x in fo[susp].tolist() if x]
            for tid in sorted(set(ap["thread"])):
                sel = (ap["thread"] == tid).to_numpy()
                _slices_into(tl, ap[sel], f"p{pid}t{tid}", f"thread {tid}", ptrack.key, ap[sel]["function"].astype(str),
                             {"correlation_id": "correlation_id"}, flow_out=fo[sel],
                             cats=np.where(susp[sel], 0, -1), pid=int(pid) if pid != MISSING else 0, tid=int(tid))
        mine = [g for g in groups if g.pid == pid]
        for node in sorted({g.node for g in mine} | set(c[c["pid"] == pid]["dst_node"])):
            label = f"GPU node {node}" + (f" ({gfx[node]})" if gfx.get(node) else "") if node != MISSING else "GPU"
            atrack = tl.add(Track(f"p{pid}a{node}", label, ptrack.key))
            for g in mine:
                if g.node == node:
                    key, name = f"{atrack.key}{g.lane_col}{g.q}", f"{g.lane_col} {g.q}"
                    keys = [tl.add(Track(f"{key}#0", name, atrack.key)).key]
                    keys += [tl.add(Track(f"{key}#{k}", f"{name} (lane {k + 1})", atrack.key)).key
                             for k in range(1, g.lanes_needed)]
                    queue_tracks.append((g, keys))
            cn = c[(c["pid"] == pid) & (c["dst_node"] == node)]
            if len(cn):
                _slices_into(tl, cn, f"{atrack.key}copies", "memory copies", atrack.key,
                             "copy " + cn["direction"].astype(str), {"correlation_id": "correlation_id",
                                                                    "bytes": "bytes"},
                             cats=np.where(_in_spans(cn["start"].to_numpy(), cn["end"].to_numpy(), overlap_spans),
                                           1, -1).astype(np.int64))
        ap_ = al[al["pid"] == pid].sort_values("start")
        if len(ap_):
            mt = tl.add(Track(f"p{pid}mem", "allocations", ptrack.key))
            ct = tl.add(Track(f"p{pid}live", "bytes live", ptrack.key, counter=True))
            live, sizes = 0, {}
            for r in ap_.itertuples(index=False):
                free = "FREE" in str(r.operation).upper()
                if free:
                    live -= sizes.pop(int(r.address), 0)
                else:
                    sizes[int(r.address)] = int(r.size)
                    live += int(r.size)
                if lo is not None and r.start < lo:
                    continue
                tl.points.append(Point(mt.key, int(r.start), INSTANT, f"{'free' if free else 'alloc'} 0x{int(r.address):x}",
                                       {"bytes": int(r.size) if not free else None}))
                tl.points.append(Point(ct.key, int(r.start), COUNTER, value=live))
    if queue_tracks:
        to_fault += _dispatch_rows(tl, d, queue_tracks, launch_flows, suspect_keys, overlap_spans)
    tl.to_fault = to_fault


@dataclass
class _QueueGroup:
    """The dispatches drawn on one queue's track (a stream's, else a queue's) and its lanes."""
    pid: int
    node: int
    lane_col: str                 # "stream" or "queue"
    q: int
    rows: np.ndarray              # row numbers in the dispatch table, ascending
    lane: np.ndarray              # each row's lane (0: the queue's own track)

    @property
    def lanes_needed(self) -> int:
        return int(self.lane.max()) + 1 if len(self.lane) else 1


def _queue_groups(d: pd.DataFrame) -> list[_QueueGroup]:
    """The dispatch table's rows by (process, GPU, stream or else queue), sorted as the tracks are
    laid out, each with its lanes: hash passes and one radix sort of the group ids, no sort of the
    rows' keys and no copy of the table per queue (a 1M-dispatch trace's layout)."""
    n = len(d)
    if not n:
        return []
    stream = d["stream"].to_numpy()
    by_stream = stream >= 0
    q = np.where(by_stream, stream, d["queue"].to_numpy())
    cols = [d["pid"].to_numpy(), d["agent_node"].to_numpy(), by_stream, q]
    gid, first = group_rows(cols)
    count = len(first)
    # a stable sort keeps each group's rows ascending; a 16-bit key sorts by radix
    order = np.argsort(gid.astype(np.uint16) if count <= 1 << 16 else gid, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(gid, minlength=count))])
    start = d["start"].to_numpy()
    end = np.maximum(d["end"].to_numpy(), start)
    out = []
    for g, row in enumerate(first.tolist()):
        rows = order[bounds[g]:bounds[g + 1]]
        out.append(_QueueGroup(int(cols[0][row]), int(cols[1][row]), "stream" if cols[2][row] else "queue",
                               int(cols[3][row]), rows, _lanes(start[rows], end[rows])))
    out.sort(key=lambda g: (g.pid, g.node, g.lane_col, g.q))
    return out


def _dispatch_rows(tl: Timeline, d: pd.DataFrame, queue_tracks, launch_flows: set[int], suspect_keys,
                   overlap_spans) -> list[int]:
    """Every dispatch as a slice, all held by the first queue's track and each drawn on its queue's
    track or lane (Track.lane): columns are the table's own arrays, written in one bulk pass.
    Returns the flow ids from suspects to the fault."""
    start, end = d["start"].to_numpy(), d["end"].to_numpy()
    lane_keys: list[str] = []
    track_of = np.empty(len(d), np.int64)
    for g, keys in queue_tracks:
        track_of[g.rows] = len(lane_keys) + g.lane
        lane_keys += keys
    pid, corr = d["pid"].to_numpy(), d["correlation_id"].to_numpy()
    fid = _flow_id(pid, corr)
    fin = np.where(np.isin(fid, list(launch_flows)), fid, 0) if launch_flows else np.zeros(len(d), np.int64)
    suspect = np.zeros(len(d), bool)
    for p in {p_ for p_, _ in suspect_keys}:
        suspect |= (pid == p) & np.isin(corr, [k for p_, k in suspect_keys if p_ == p])
    cats = np.where(suspect, 0, np.where(_in_spans(start, end, overlap_spans), 1, -1)).astype(np.int64)
    fout = np.where(cats == 0, fid ^ (1 << 60), 0)
    kernels, codes = _categories(d["kernel"])
    kernels = [display_name(k) for k in kernels]      # slices are read by people: demangled, once per name
    used = np.bincount(codes[codes >= 0], minlength=len(kernels)) > 0    # only the names used are interned
    renumber = np.cumsum(used) - 1
    codes = np.where(codes >= 0, renumber[np.maximum(codes, 0)], -1) if len(renumber) else np.full(len(d), -1)
    t = tl.tracks[lane_keys[0]]
    t.starts, t.ends = start, np.maximum(end, start)
    t.names, t.name_idx = [str(k) for k, u in zip(kernels, used) if u], codes.astype(np.int64, copy=False)
    t.args = {a: d[c].to_numpy().astype(np.int64, copy=False) for a, c in DISPATCH_ARGS.items() if c in d}
    t.flow_in, t.flow_out, t.cats = fin, fout, cats
    if len(lane_keys) > 1:
        t.lane, t.lanes = track_of, lane_keys
    return fout[fout != 0].tolist()


def _incident_points(tl: Timeline, inc: Incident, fault_at: int | None) -> None:
    to_fault = tuple(tl.to_fault)
    at = fault_at if fault_at is not None else 0
    note = "" if fault_at is not None else " (no common clock: placed in input order)"
    step = 0
    for f in inc.faults:
        ts = at + step if fault_at is None else at
        step += 1000
        tl.points.append(Point("incident", ts, INSTANT, f"{f.source}: {f.kind}{note}",
                               {"source": f.source, **_fault_args(f), "time_as_printed": f.time}, ("fault",),
                               flows_in=to_fault if f is inc.faults[0] else ()))
    for r in inc.report_points[:20]:
        tl.points.append(Point("incident", at + step if fault_at is None else at, INSTANT,
                               redact.text(f"report point: {r.frame}"[:200]), {"evidence": str(r.origin)}, ("report-point",)))
        step += 1000
    if not inc.faults and to_fault:
        tl.points.append(Point("incident", at, INSTANT, "fault time", {}, ("fault",), flows_in=to_fault))
    if inc.verdict:
        tl.points.append(_verdict_point(inc.verdict, at + step if fault_at is None else at))


def _fault_args(f) -> dict:
    return {"address": f"0x{f.address:x}" if f.address is not None else None, "gpu": f.gpu,
            "evidence": str(f.origin) if f.origin else None, "meaning": redact.text(f.meaning) if f.meaning else f.meaning}


def _verdict_point(v, ts: int) -> Point:
    return Point("incident", ts, INSTANT, f"verdict: {v.level}" + (f" {display_name(v.kernel)}" if v.kernel else ""),
                 {"why": redact.text(v.why[:500])}, ("verdict",))      # it quotes the evidence


# ---------------- renderers ----------------

def write_pftrace(tl: Timeline, path: str, progress=None) -> int:
    w = PftraceWriter(path, progress=progress)
    try:
        _write_tracks(w, tl)
    except BaseException:
        w.discard()
        raise
    w.close()
    return w.bytes


def _write_tracks(w: PftraceWriter, tl: Timeline) -> None:
    uuids: dict[str, int] = {}
    for t in tl.tracks.values():
        parent = uuids.get(t.parent) if t.parent else None
        uuids[t.key] = w.track(t.name, parent, pid=t.pid, tid=t.tid, counter=t.counter)
    w.metadata(tl.metadata)
    for t in tl.tracks.values():
        if t.starts is None or not len(t.starts):
            continue
        w.slices(uuids[t.key] if t.lane is None else t.lane, t.starts, t.ends, t.names, t.name_idx, t.args,
                 t.flow_in, t.cats, CATEGORIES, tl.clock, t.flow_out,
                 lanes=None if t.lane is None else [uuids[k] for k in t.lanes])
    for p in sorted(tl.points, key=lambda x: x.ts):
        w.event(uuids[p.track], p.ts, p.kind, p.name, p.categories, p.args, flow_ids=p.flows_out,
                terminating_flow_ids=p.flows_in, counter=p.value)


def write_json(tl: Timeline, path: str) -> int:
    """Chrome trace-event JSON (microseconds), streamed event by event."""
    tids = {k: i + 1 for i, k in enumerate(tl.tracks)}
    root = {}
    for t in tl.tracks.values():
        p = t
        while p.parent:
            p = tl.tracks[p.parent]
        root[t.key] = p.pid or 0
    n = 0
    with PrivateFile(path) as fh:                # 0600, in place only when complete
        fh.write('{"displayTimeUnit": "ns", "metadata": ' + json.dumps(tl.metadata) + ', "traceEvents": [\n')

        def emit(ev):
            nonlocal n
            fh.write(("," if n else "") + json.dumps(ev, separators=(",", ":")) + "\n")
            n += 1
        for t in tl.tracks.values():
            emit({"ph": "M", "name": "thread_name", "pid": root[t.key], "tid": tids[t.key], "args": {"name": t.name}})
        for t in tl.tracks.values():
            if t.starts is None:
                continue
            row_tids = (np.full(len(t.starts), tids[t.key]) if t.lane is None else
                        np.array([tids[k] for k in t.lanes])[t.lane]).tolist()
            for i in range(len(t.starts)):
                tid = row_tids[i]
                ev = {"ph": "X", "name": t.names[t.name_idx[i]], "pid": root[t.key], "tid": tid,
                      "ts": t.starts[i] / 1e3, "dur": (t.ends[i] - t.starts[i]) / 1e3,
                      "args": {k: int(v[i]) for k, v in t.args.items() if v[i] >= 0}}
                if t.cats is not None and t.cats[i] >= 0:
                    ev["cat"] = CATEGORIES[t.cats[i]]
                emit(ev)
                if t.flow_out is not None and t.flow_out[i] > 0:
                    emit({"ph": "s", "id": int(t.flow_out[i]), "name": "flow", "pid": root[t.key], "tid": tid,
                          "ts": t.starts[i] / 1e3})
                if t.flow_in is not None and t.flow_in[i] > 0:
                    emit({"ph": "f", "bp": "e", "id": int(t.flow_in[i]), "name": "flow", "pid": root[t.key],
                          "tid": tid, "ts": t.starts[i] / 1e3})
        for p in sorted(tl.points, key=lambda x: x.ts):
            if p.kind == COUNTER:
                emit({"ph": "C", "name": tl.tracks[p.track].name, "pid": root[p.track], "ts": p.ts / 1e3,
                      "args": {"value": p.value}})
                continue
            emit({"ph": "i", "s": "t", "name": p.name, "cat": ",".join(p.categories), "pid": root[p.track],
                  "tid": tids[p.track], "ts": p.ts / 1e3, "args": {k: v for k, v in p.args.items() if v is not None}})
            for fid in p.flows_out:
                emit({"ph": "s", "id": fid, "name": "flow", "pid": root[p.track], "tid": tids[p.track],
                      "ts": p.ts / 1e3})
            for fid in p.flows_in:
                emit({"ph": "f", "bp": "e", "id": fid, "name": "flow", "pid": root[p.track], "tid": tids[p.track],
                      "ts": p.ts / 1e3})
        fh.write("]}\n")
    return n

