"""An inline SVG of the last moments before the fault: one lane per GPU queue or stream with its
dispatches and copies, the suspects highlighted, frees as ticks, the fault as a line; times are
relative to the fault. Self-contained (no script, no network) and escaped (markup.html_text:
controls removed too); kernel names demangled."""

from __future__ import annotations

from ..analyze.incident import Incident
from ..durations import relative
from ..demangle import display_name
from .markup import html_text

WIDTH, LEFT, LANE, TOP = 1180, 230, 22, 28
MAX_LANES = 16
SPANS_NS = (1_000_000, 5_000_000, 20_000_000, 100_000_000, 500_000_000, 2_000_000_000)
MAX_ITEMS = 2000             # rectangles drawn: the SVG stays small whatever the trace


def last_moments_svg(inc: Incident) -> str | None:
    tf = inc.traces
    if tf is None:
        return None
    from ..trace_model import MISSING       # only an incident with traces loads the trace model (pandas)
    at = tf.time.on(tf.trace.clock)
    d, c = tf.trace.dispatches, tf.trace.copies
    if at is None or (not len(d) and not len(c)):
        return None
    span = _span(d, c, at)
    lo = at - span
    d = d[(d["end"] >= lo) & (d["start"] <= at + span // 10)]
    c = c[(c["end"] >= lo) & (c["start"] <= at + span // 10)]
    lanes: dict[tuple, list] = {}
    for df, kind in ((d, "dispatch"), (c, "copy")):
        lane_col = df["stream"].where(df["stream"] >= 0, df["queue"]) if kind == "dispatch" else df["stream"]
        node = df["agent_node"] if kind == "dispatch" else df["dst_node"]
        for pid, n, q, s, e, name, corr in zip(df["pid"], node, lane_col, df["start"], df["end"],
                                               df["kernel"] if kind == "dispatch" else "copy " + df["direction"].astype(str),
                                               df["correlation_id"]):
            lanes.setdefault((int(pid), int(n), int(q), kind), []).append((int(s), int(e), str(name), int(corr)))
    if not lanes:
        return None
    keys = sorted(lanes, key=lambda k: -max(e for _, e, _, _ in lanes[k]))[:MAX_LANES]
    keys.sort()
    suspects = {(s.pid, s.correlation_id) for s in tf.suspects if s.correlation_id is not None}
    suspect_names = {s.kernel for s in tf.suspects if s.kernel}
    scale = (WIDTH - LEFT - 20) / (span * 1.1)
    x_of = lambda t: LEFT + (t - lo) * scale                       # noqa: E731
    fx_at = x_of(at)
    height = TOP + LANE * len(keys) + 44
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" '
           f'aria-label="last {html_text(relative(-span))} before the fault, per GPU queue" font-size="11" '
           f'font-family="system-ui,sans-serif">']
    for i in range(6):                                                  # axis, relative to the fault
        t = lo + span * i // 5
        x = x_of(t)
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{height - 36}" stroke="#eee"/>'
                   f'<text x="{x:.1f}" y="{height - 22}" text-anchor="middle">{html_text(relative(t - at))}</text>')
    drawn = 0
    for row, key in enumerate(keys):
        pid, node, q, kind = key
        y = TOP + row * LANE
        where = f"GPU node {node}" if node != MISSING else None
        lane = f"{'copy stream' if kind == 'copy' else 'queue'} {q}" if q != MISSING else kind
        label = " · ".join(x for x in (f"pid {pid}", where, lane) if x)
        out.append(f'<text x="{LEFT - 6}" y="{y + 14}" text-anchor="end">{html_text(label)}</text>')
        for s, e, name, corr in lanes[key][-MAX_ITEMS // len(keys):]:
            hot = (pid, corr) in suspects or name in suspect_names
            fill = "#c0392b" if hot else "#3d8b5a" if kind == "copy" else "#6b8fb8"
            x0, x1 = x_of(max(s, lo)), x_of(min(e, at + span // 10))
            title = f"{display_name(name)}: {relative(s - at)} to {relative(e - at)}" + (" (suspect)" if hot else "")
            out.append(f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 1.5):.1f}" height="{LANE - 7}" '
                       f'fill="{fill}"><title>{html_text(title)}</title></rect>')
            drawn += 1
        # Work in flight at the fault has no completion record: drawn from its launch to the fault.
        for x in tf.suspects:
            mine = x.pid == pid and kind == "dispatch" and x.start is not None and x.end != x.start and \
                (x.agent_node in (None, node)) and (x.queue in (None, q))
            if mine and x.kind in ("launch-without-dispatch", "running-at-fault"):
                x0 = x_of(max(x.start, lo))
                title = f"{display_name(x.kernel) or 'launch with no completion record'}: from {relative(x.start - at)} (suspect)"
                out.append(f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(fx_at - x0, 2):.1f}" height="{LANE - 7}" '
                           f'fill="#c0392b" fill-opacity=".75"><title>{html_text(title)}</title></rect>')
    frees = tf.trace.allocations
    if len(frees):
        f = frees[frees["operation"].astype(str).str.upper().str.contains("FREE") & (frees["start"] >= lo)
                  & (frees["start"] <= at)]
        for t, addr in zip(f["start"][-200:], f["address"][-200:]):
            x = x_of(int(t))
            out.append(f'<line x1="{x:.1f}" y1="{TOP - 8}" x2="{x:.1f}" y2="{TOP - 1}" stroke="#d68910" '
                       f'stroke-width="2"><title>{html_text(f"free 0x{int(addr):x} at {relative(int(t) - at)}")}'
                       f'</title></line>')
    out.append(f'<line x1="{fx_at:.1f}" y1="{TOP - 10}" x2="{fx_at:.1f}" y2="{height - 36}" stroke="#c0392b" '
               f'stroke-width="2"/><text x="{fx_at + 4:.1f}" y="{TOP - 12}" fill="#c0392b">fault</text>')
    out.append(f'<text x="{LEFT}" y="{height - 6}">red: suspects in flight at the fault; blue: kernels; green: '
               f'copies; orange ticks: frees. {drawn} item(s), {len(keys)} of {len(lanes)} lane(s).</text>')
    out.append("</svg>")
    return "".join(out)


def _span(d, c, at: int) -> int:
    """The shortest of the usual spans that holds some work before the fault (a few dozen items)."""
    import numpy as np
    ends = np.concatenate([d["end"].to_numpy(), c["end"].to_numpy()]) if len(c) else d["end"].to_numpy()
    for span in SPANS_NS:
        if np.count_nonzero(ends >= at - span) >= 20:
            return span
    return SPANS_NS[-1]
