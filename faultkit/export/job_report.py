"""The report of one job's incident across nodes: Markdown and JSON (`faultkit.job/1`), with the
first mover's own triage report after it."""

from __future__ import annotations

import json

from .report import render_markdown, to_json

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
    return str(text).replace("|", "\\|").replace("\n", " ").replace("`", "'")


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


JOB_RENDERERS = {"md": render_job_markdown, "markdown": render_job_markdown, "json": render_job_json}
