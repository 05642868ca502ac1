"""The report of one job's incident across nodes: Markdown and JSON (`faultkit.job/1`), with the
first mover's own triage report after it."""

from __future__ import annotations

import html
import json
import re

from .markup import md
from .report import render_html, render_markdown, to_json

SCHEMA = "faultkit.job/1"


def _event(e) -> dict | None:
    return None if e is None else {"kind": e.kind, "cause": e.cause, "text": e.text, "origin": e.origin,
                                   "wall_s": e.wall_s}


def job_json(r) -> dict:
    v = r.verdict
    return {
        "schema": SCHEMA, "job": v.job, "reference_clock": v.reference, "first_mover": v.first_mover,
        "first_event": _event(v.first_event), "why": v.why,
        "nodes": [{"node": n.name, "bundle": n.bundle, "rank": n.rank,
                   "clock_offset_s": v.alignment[n.name].offset_s,
                   "clock_uncertainty_s": v.alignment[n.name].uncertainty_s,
                   "clock_basis": v.alignment[n.name].basis, "alignment_points": v.alignment[n.name].points,
                   "verdict": {"level": n.verdict_level, "kernel": n.verdict_kernel},
                   "first_cause": _event(n.first(True))} for n in r.nodes],
        "consequences": [{"node": node, "after_s": after, **_event(e)} for node, e, after in v.consequences],
        "problems": r.problems,
        "incident": to_json(r.incidents[v.first_mover[0]]) if len(v.first_mover) == 1 else None,
    }


def render_job_json(r) -> str:
    return json.dumps(job_json(r), indent=2) + "\n"


def _cell(text) -> str:
    """Evidence in a table cell or a line: escaped for Markdown (markup.md), never interpreted."""
    return md(str(text).replace("\n", " "), cell=True)


def render_job_markdown(r) -> str:
    v = r.verdict
    out = [f"# faultkit job report{f': {_cell(v.job)}' if v.job else ''}", "", "## The incident", "",
           f"**first mover**: {', '.join(v.first_mover) or 'none found'}", "", f"Why: {_cell(v.why)}", "",
           "## Nodes, on one clock", "",
           "| node | rank | clock offset | uncertainty | aligned by | first cause | verdict |", "|---|---|---|---|---|---|---|"]
    for n in r.nodes:
        a, c = v.alignment[n.name], n.first(True)
        out.append(f"| {_cell(n.name)} | {n.rank if n.rank is not None else ''} | {a.offset_s:+.3f} s | "
                   + (f"± {a.uncertainty_s:.3f} s" if a.uncertainty_s is not None else "unknown")
                   + f" | {_cell(a.basis)} | {_cell(f'{c.kind} ({c.origin})') if c else ''} | "
                   f"{n.verdict_level}{f' {_cell(n.verdict_kernel)}' if n.verdict_kernel else ''} |")
    if v.consequences:
        out += ["", "## Consequences (not verdicts of their own)", "", "| node | after the first cause | what | evidence |",
                "|---|---|---|---|"]
        for node, e, after in v.consequences[:200]:
            out.append(f"| {_cell(node)} | {after:+.3f} s | {_cell(e.kind)}: {_cell(e.text[:120])} | {_cell(e.origin)} |")
    for p in r.problems:
        out.append(f"- problem: {_cell(p)}")
    out.append("")
    if len(v.first_mover) == 1:
        out += [f"## The first mover's own report ({_cell(v.first_mover[0])})", "",
                render_markdown(r.incidents[v.first_mover[0]]).replace("\n# ", "\n### ")]
    return "\n".join(out) + "\n"


def render_job_html(r) -> str:
    """The same parts as the Markdown, every piece of evidence escaped, the first mover's own HTML
    report after them."""
    v, e = r.verdict, lambda x: html.escape(str(x))  # noqa: E731
    out = ["<!DOCTYPE html>", '<html><head><meta charset="utf-8"><title>faultkit job report</title></head><body>',
           f"<h1>faultkit job report{': ' + e(v.job) if v.job else ''}</h1>", "<h2>The incident</h2>",
           f"<p><strong>first mover</strong>: {e(', '.join(v.first_mover) or 'none found')}</p>", f"<p>Why: {e(v.why)}</p>",
           "<h2>Nodes, on one clock</h2>", "<table><tr><th>node</th><th>rank</th><th>clock offset</th>"
           "<th>uncertainty</th><th>aligned by</th><th>first cause</th><th>verdict</th></tr>"]
    for n in r.nodes:
        a, c = v.alignment[n.name], n.first(True)
        unc = f"± {a.uncertainty_s:.3f} s" if a.uncertainty_s is not None else "unknown"
        cells = [n.name, "" if n.rank is None else n.rank, f"{a.offset_s:+.3f} s", unc, a.basis,
                 f"{c.kind} ({c.origin})" if c else "", n.verdict_level + (f" {n.verdict_kernel}" if n.verdict_kernel
                                                                           else "")]
        out.append("<tr>" + "".join(f"<td>{e(x)}</td>" for x in cells) + "</tr>")
    out.append("</table>")
    if v.consequences:
        out += ["<h2>Consequences (not verdicts of their own)</h2>",
                "<table><tr><th>node</th><th>after the first cause</th><th>what</th><th>evidence</th></tr>"]
        for node, ev, after in v.consequences[:200]:
            out.append(f"<tr><td>{e(node)}</td><td>{after:+.3f} s</td><td>{e(ev.kind)}: {e(ev.text[:120])}</td>"
                       f"<td>{e(ev.origin)}</td></tr>")
        out.append("</table>")
    if r.problems:
        out.append("<ul>" + "".join(f"<li>problem: {e(p)}</li>" for p in r.problems) + "</ul>")
    if len(v.first_mover) == 1:
        own = render_html(r.incidents[v.first_mover[0]])
        body = re.search(r"<body>(.*)</body>", own, re.S)
        out += [f"<h2>The first mover's own report ({e(v.first_mover[0])})</h2>",
                (body.group(1) if body else "").replace("<h1>", "<h3>").replace("</h1>", "</h3>")]
    out.append("</body></html>")
    return "\n".join(out) + "\n"


JOB_RENDERERS = {"md": render_job_markdown, "markdown": render_job_markdown, "html": render_job_html,
                 "json": render_job_json}
