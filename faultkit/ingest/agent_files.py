"""The in-process agent's files: per-process headers, allocation rings, site tables and faulthandler
dumps, into typed records. A ring's torn records are dropped and counted; a cut line is dropped."""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

from ..agent import files as names
from ..agent import ring
from ..agent_model import AgentLog, AgentProcess, AllocEvent, Site, StackDump, ThreadStack
from ..limits import MAX_FIELD, fits_int, small_int
from ..model import Problem

THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[[^\]]*\])? \(most recent call first\):")
FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<func>\S.*)$')


def parse_agent(inputs: list[tuple[str, bytes]]) -> AgentLog:
    out = AgentLog()
    for name, data in inputs:
        parsed = names.split(PurePosixPath(name.replace("\\", "/")).name)
        if parsed is None:
            continue
        pid, kind = parsed
        p = out.processes.setdefault(pid, AgentProcess(pid))
        p.files.append(name)
        if kind == names.HEADER:
            try:
                h = json.loads(data[:MAX_HEADER].decode("utf-8", "replace"))
            except (ValueError, RecursionError) as exc:
                out.problems.append(Problem(name, f"agent header unreadable ({str(exc)[:200]})"))
                continue
            p.header, dropped = typed_header(h)
            if dropped:
                out.problems.append(Problem(name, f"agent header: {', '.join(dropped)} of the wrong type or size, "
                                                  f"not read"))
        elif kind == names.ALLOC_RING:
            _ring(p, name, data, out)
        elif kind == names.SITES:
            _sites(p, data)
        elif kind == names.STACKS:
            p.dumps += parse_stacks(data.decode("utf-8", "replace"), name)
    return out


MAX_HEADER = 1 << 20        # an agent header is a few hundred bytes
MAX_ITEMS = 256
# The header's fields as the agent writes them (agent/runtime.py), each with the type it must have.
_HEADER_FIELDS = {"pid": "int", "ppid": "int", "executable": "str", "python": "str", "mode": "str",
                  "started": "dict", "armed": "strs", "failures": "strs", "alloc": "dict"}
_ALLOC_FIELDS = {"mechanism": "str", "mode": "str", "note": "str", "sites_note": "str", "attached": "dict"}


def _typed(v, kind: str):
    """`v` when it has the kind (bounded), else None. Nested dicts keep scalar values only."""
    if kind == "int":
        return v if fits_int(v) else None
    if kind == "str":
        return v[:MAX_FIELD] if isinstance(v, str) else None
    if kind == "strs":
        return [x[:MAX_FIELD] for x in v[:MAX_ITEMS] if isinstance(x, str)] if isinstance(v, list) else None
    if kind == "dict" and isinstance(v, dict):
        return {str(k)[:200]: x if fits_int(x) or isinstance(x, (float, bool)) or x is None else
                (x[:MAX_FIELD] if isinstance(x, str) else None) for k, x in list(v.items())[:MAX_ITEMS]}
    return None


def typed_header(h) -> tuple[dict, list[str]]:
    """The header's known fields, typed and bounded; the names of those that were not."""
    if not isinstance(h, dict):
        return {}, ["the whole header"]
    out, dropped = {}, []
    for key, kind in _HEADER_FIELDS.items():
        if key not in h:
            continue
        v = _typed(h[key], kind)
        if key == "alloc" and isinstance(h[key], dict):
            v = {k: _typed(h[key][k], t) for k, t in _ALLOC_FIELDS.items() if k in h[key]}
            dropped += [f"alloc.{k}" for k, x in v.items() if x is None]
            v = {k: x for k, x in v.items() if x is not None}
        if v is None:
            dropped.append(key)
        else:
            out[key] = v
    return out, dropped


# Clock readings fit 62 bits (146 years of nanoseconds): past that a ring's anchor is damaged.
MAX_NS = 1 << 62


def _ring(p: AgentProcess, name: str, data: bytes, out: AgentLog) -> None:
    head, problem = ring.read_header(data)
    if head is None:
        out.problems.append(Problem(name, problem or "not a ring"))
        return
    recs, torn = ring.read_records(data, head["capacity"])
    boot, mono = head["boottime_ns"], head["monotonic_ns"]
    offset = boot - mono if 0 < boot < MAX_NS and 0 <= mono < MAX_NS else 0
    if boot and not offset and boot != mono:
        out.problems.append(Problem(name, "the ring's clock anchor is out of range: times kept on the monotonic clock"))
        head["boottime_ns"] = 0
    p.events = [AllocEvent(r[0], ring.KIND_NAMES.get(r[2], f"kind-{r[2]}"), r[4] + offset, r[5], r[6], r[7], r[3],
                           r[8], r[9], r[10]) for r in recs]
    first = recs[0][0] if recs else None
    p.ring = {"file": name, "capacity": head["capacity"], "producer": head["producer"], "torn": torn,
              "first_seq": first, "last_seq": recs[-1][0] if recs else None, "wrapped": bool(first and first > 1),
              "clock": "boottime" if head["boottime_ns"] else "monotonic"}
    if torn:
        out.problems.append(Problem(name, f"{torn} torn record(s) dropped (a write cut by the process's end)"))


def _sites(p: AgentProcess, data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    rows = text.split("\n")
    for row in rows[:-1]:                 # the last piece has no newline: cut, dropped
        parts = row.split("\t")
        site = small_int(parts[0]) if len(parts) >= 3 and parts[0].isascii() and parts[0].isdigit() else None
        if site is not None:                 # `²` is a digit to str.isdigit, not to int()
            p.sites[site] = Site(site, parts[1][:MAX_FIELD], parts[2][:MAX_FIELD])


def parse_stacks(text: str, name: str) -> list[StackDump]:
    """faulthandler's dumps: each fatal one starts with its `Fatal Python error:` line; dumps asked
    for have none, and a new one starts where a thread already listed appears again."""
    dumps: list[StackDump] = []
    cur: StackDump | None = None
    thread: ThreadStack | None = None
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith("Fatal Python error:"):
            cur = StackDump(line.strip(), [], f"{name}:{i}")
            dumps.append(cur)
            thread = None
            continue
        m = THREAD.match(line)
        if m:
            if cur is None or any(t.thread == m[2] for t in cur.threads):
                cur = StackDump(None, [], f"{name}:{i}")
                dumps.append(cur)
            thread = ThreadStack(m[2], m[1] == "Current thread")
            cur.threads.append(thread)
            continue
        f = FRAME.match(line)
        if f and thread is not None:
            thread.frames.append(f"{f['file']}:{f['line']} {f['func']}")
        elif not line.strip() or line.startswith("Extension modules"):
            thread = None
    return [d for d in dumps if d.threads or d.fatal]
