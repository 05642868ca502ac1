"""compute-sanitizer's findings other than memcheck's access errors: racecheck's races and hazards,
initcheck's uninitialised accesses, synccheck's barrier errors, memcheck's hardware exceptions and
leaks. The debugger's grammar parses them (ingest/debugger.py: `DebuggerLog.sanitizer_findings`);
this source states them as faults of their kind, claims the kernel each names, and shows them.

A finding names the function where the access was: with no `Device Frame:` lines it may be a
device function the kernel called, so its claim is never an entry point (entry=None) and is at most
likely (judge.claims.BASES["sanitizer-finding"]): a race or an uninitialised read is a bug a tool
watched, but it did not end the kernel the way a memcheck access error or a GPU exception does.
"""

from __future__ import annotations

from ..analyze.sanitizer_entry import add_claims, sanitizer_entry
from ..judge import Claim, Identities
from ..model import Fault, SanitizerFinding
from .source import Source

MOST = 50                 # distinct findings kept as faults (a racecheck run can print thousands)


def _where(f: SanitizerFinding) -> str:
    at = f" at +0x{f.offset:x}" if f.offset is not None else ""
    return at + (f" ({f.file}:{f.line})" if f.file else "")


def _what(f: SanitizerFinding) -> str:
    """The finding in words, from its own fields."""
    if f.tool == "racecheck":
        hazards = f" [{f.hazards:,} hazards]" if f.hazards else ""
        between = " and ".join(a.lower() for a in f.accesses) if f.accesses else "accesses"
        space = f" on __{f.space}__" if f.space else ""
        return f"racecheck: a {f.kind.replace('-', ' ')} between {between}{space}{hazards}"
    if f.tool == "initcheck":
        return f"initcheck: {f.kind.replace('-', ' ')} of {f.size} bytes of __{f.space}__ memory"
    if f.tool == "synccheck":
        return "synccheck: a barrier error (divergent threads at a barrier)"
    return f"{f.tool}: {f.kind.replace('-', ' ')}"


def _distinct(inc) -> list[SanitizerFinding]:
    seen, out = set(), []
    for f in inc.debugger.sanitizer_findings:
        key = (f.tool, f.kind, f.kernel, f.file, f.line, f.offset)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out[:MOST]


def faults(inc) -> list[Fault]:
    out = []
    for f in _distinct(inc):
        detail = {"kernel": f.kernel, "offset": f"0x{f.offset:x}" if f.offset is not None else None,
                  "source": f"{f.file}:{f.line}" if f.file else None, "block": f.block, "thread": f.thread,
                  "size": f.size, "space": f.space, "accesses": f.accesses or None, "hazards": f.hazards,
                  "text": f.text}
        out.append(Fault(source="sanitizer", kind=f"{f.tool}-{f.kind}", address=f.address,
                         detail={k: v for k, v in detail.items() if v is not None},
                         meaning=f"{_what(f)} in {f.kernel or 'a kernel it did not name'}{_where(f)}.",
                         origin=f.origin, kernel=f.kernel, engine="shader"))
    return out


def claims(inc, setting) -> list[Claim]:
    out: list[Claim] = []
    for f in _distinct(inc):
        # the same reading as memcheck's (analyze/sanitizer_entry.py)
        add_claims(out, sanitizer_entry(f), f, _what(f), _where(f),
                   Identities(page=f.address >> 12 if f.address is not None else None, engine="shader"),
                   "sanitizer-finding", this="kernel" if f.device_frames else "function",
                   entry=True if f.device_frames else None)
    return out


def section(inc) -> dict | None:
    found = _distinct(inc)
    leaks = [e for e in inc.debugger.events if e.kind == "sanitizer-leak"]
    if not found and not leaks:
        return None
    rows = [[f.tool, f.kind, f.kernel or "", _where(f).strip(" ()") or "", ", ".join(f.accesses),
             f"{f.hazards:,}" if f.hazards else "", str(f.origin)] for f in found]
    bullets = [f"leak: {e.text} ({e.origin})" for e in leaks[:20]]
    return {"title": "compute-sanitizer findings", "bullets": bullets,
            "table": (["tool", "finding", "function", "where", "accesses", "hazards", "line"], rows) if rows else None}


def to_json(inc) -> dict:
    return {"sanitizer_findings": [
        {"tool": f.tool, "kind": f.kind, "kernel": f.kernel, "offset": f"0x{f.offset:x}" if f.offset is not None else None,
         "file": f.file, "line": f.line, "thread": f.thread, "block": f.block,
         "address": f"0x{f.address:x}" if f.address is not None else None, "size": f.size, "space": f.space,
         "accesses": f.accesses, "hazards": f.hazards, "text": f.text, "origin": str(f.origin)}
        for f in _distinct(inc)]}


SOURCE = Source("sanitizer-findings", "compute-sanitizer's races, uninitialised reads, barrier errors and leaks",
                faults=faults, claims=claims, section=section, to_json=to_json,
                json_keys=("sanitizer_findings",), sections=("compute-sanitizer findings",))
