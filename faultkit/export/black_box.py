"""The report's and the timeline's view of the in-process agent's findings (analyze/allocation_owner)."""

from __future__ import annotations

from ..analyze.incident import Incident
from .markup import code as code_mark, strong

TIMELINE_EVENTS = 5000          # the last allocator events per process drawn on its track


def section_parts(inc: Incident) -> dict | None:
    """The report section's parts (title, paragraphs, bullets, code), or None without agent files."""
    bb = inc.black_box
    if bb is None:
        return None
    paragraphs, bullets, code = [], [], []
    for o in bb.owners[:6]:
        paragraphs.append(f"{strong(o.verdict)}: {o.text}. Address from {o.address_basis}.")
        bullets += o.notes
    if not bb.owners:
        paragraphs.append("No fault address in the evidence to look up in the agent's allocation map "
                          f"(a GPU core's registers, ROCm's {code_mark('on address')} line or a kernel-log page give one).")
    bullets += bb.notes
    for p in bb.processes:
        what = p.get("allocations") or "no allocation map"
        ring = p.get("ring") or {}
        bullets.append(f"pid {p['pid']}" + (f" (parent {p['ppid']})" if p.get("ppid") else "") + f": {what}"
                       + (f", {p['mode']}" if p.get("mode") else "") + f", {p['events']} events, {p['sites']} sites"
                       + (f", {ring.get('torn')} torn record(s) dropped" if ring.get("torn") else "")
                       + (f"; {p['note']}" if p.get("note") else "")
                       + (f"; failed: {'; '.join(p['failures'])}" if p.get("failures") else ""))
    for pid, views in bb.threads.items():
        code.append(f"pid {pid}: {bb.dumps.get(pid)}")
        for t in views:
            code.append(f"  thread {t.thread}" + (f"  <== {t.mark}" if t.mark else ""))
            code += [f"    {f}" for f in t.frames[:12]]
    return {"title": "Black box: the fault address's owner and every thread at the abort",
            "paragraphs": paragraphs, "bullets": bullets, "code": code}


def timeline_points(inc: Incident) -> list[tuple[int, int, str, dict]]:
    """(pid, CLOCK_BOOTTIME ns, name, args) of each process's last allocator events."""
    bb = inc.black_box
    out = []
    if bb is None or not getattr(bb, "log", None):
        return out
    for pid, p in bb.log.processes.items():
        for e in p.events[-TIMELINE_EVENTS:]:
            site = p.sites.get(e.site)
            out.append((pid, e.t_ns, f"{e.kind} {e.size:,} B", {"address": f"0x{e.address:x}", "size": e.size,
                                                                 "stream": f"0x{e.stream:x}",
                                                                 "site": site.where if site else ""}))
    return out
