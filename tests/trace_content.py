"""What a .pftrace shows, decoded with the perfetto package's protos into a form that does not
depend on how the writer laid the packets out: tracks by their path of names (not uuids), slices
with their absolute times, names, annotations, categories and flows (not per-sequence iids,
incremental clocks or packet order), instants, counter values and the metadata table.

Two traces with the same `content()` show the same thing in the UI; a faster writer may change the
bytes, sequences and packet order, never this.
"""

from __future__ import annotations

import hashlib
import json
import zlib


def packets(data: bytes) -> list:
    import perfetto.protos.perfetto.trace.perfetto_trace_pb2 as pb
    out = []
    for x in pb.Trace.FromString(data).packet:
        if x.HasField("compressed_packets"):
            out += list(pb.Trace.FromString(zlib.decompress(x.compressed_packets)).packet)
        else:
            out.append(x)
    return out


def _value(a) -> object:
    for f in ("int_value", "string_value", "uint_value", "double_value", "bool_value"):
        if a.HasField(f):
            return getattr(a, f)
    return None


def content(data: bytes) -> dict:
    """tracks: [path, pid, tid, counter]; slices: [track path, start, end, name, args, categories,
    flows in, flows out] sorted; instants: [track path, ts, name, args, categories, flows in, flows
    out]; counters: [track path, ts, value]; metadata: {name: value}."""
    ps = packets(data)
    desc = {x.track_descriptor.uuid: x.track_descriptor for x in ps if x.HasField("track_descriptor")}

    def path(uuid: int) -> str:
        parts = []
        while uuid in desc:
            parts.append(desc[uuid].name)
            uuid = desc[uuid].parent_uuid if desc[uuid].HasField("parent_uuid") else None
        return "/".join(reversed(parts))
    tracks = sorted([path(u), d.process.pid if d.HasField("process") else d.thread.pid if d.HasField("thread")
                     else None, d.thread.tid if d.HasField("thread") else None, d.HasField("counter")]
                    for u, d in desc.items())
    names, cats, anns, clock, default = {}, {}, {}, {}, {}
    open_: dict[int, list] = {}
    slices, instants, counters = [], [], []
    for x in ps:
        s = x.trusted_packet_sequence_id
        if x.sequence_flags & 1:
            names[s], cats[s], anns[s] = {}, {}, {}
        for table, field in ((names, "event_names"), (cats, "event_categories"), (anns, "debug_annotation_names")):
            for e in getattr(x.interned_data, field):
                table.setdefault(s, {})[e.iid] = e.name
        if x.HasField("trace_packet_defaults"):
            default[s] = x.trace_packet_defaults.track_event_defaults.track_uuid
        if x.HasField("clock_snapshot"):
            clock[s] = x.timestamp
            continue
        if not x.HasField("track_event"):
            continue
        te = x.track_event
        track = te.track_uuid or default.get(s)
        ts = x.timestamp
        if s in clock:               # a sequence on its own incremental clock
            ts = clock[s] = clock[s] + x.timestamp
        name = names.get(s, {}).get(te.name_iid, te.name) if te.name_iid else te.name
        args = sorted((anns[s][a.name_iid] if a.name_iid else a.name, _value(a)) for a in te.debug_annotations)
        categories = sorted(cats[s][c] for c in te.category_iids)
        flows = [sorted(te.terminating_flow_ids), sorted(te.flow_ids)]
        if te.type == 1:
            open_.setdefault(track, []).append((ts, name, args, categories, flows))
        elif te.type == 2:
            start, name, args, categories, flows = open_[track].pop()
            slices.append([path(track), start, ts, name, args, categories, *flows])
        elif te.type == 3:
            instants.append([path(track), ts, name, args, categories, *flows])
        elif te.type == 4:
            counters.append([path(track), ts, te.counter_value])
    metadata = {m.name: m.string_value for x in ps if x.HasField("chrome_events") for m in x.chrome_events.metadata}
    return {"tracks": tracks, "slices": sorted(slices), "instants": sorted(instants), "counters": sorted(counters),
            "metadata": metadata, "unclosed": sum(len(v) for v in open_.values())}


def digest(c: dict, folder: str) -> str:
    """sha256 of the content, with `folder` (where the inputs lay: evidence lines name it) as <inputs>."""
    text = json.dumps(c, sort_keys=True, separators=(",", ":")).replace(json.dumps(folder)[1:-1], "<inputs>")
    return hashlib.sha256(text.encode()).hexdigest()
