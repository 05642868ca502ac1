"""The in-process agent's files: per-process headers, allocation rings, site tables and faulthandler
dumps, into typed records. A ring's torn records are dropped and counted; a cut line is dropped."""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

from ..agent import files as names
from ..agent import ring
from ..agent_model import AgentLog, AgentProcess, AllocEvent, Site, StackDump, ThreadStack
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
                h = json.loads(data.decode("utf-8", "replace"))
                p.header = h if isinstance(h, dict) else {}
            except ValueError as exc:
                out.problems.append(Problem(name, f"agent header unreadable ({exc})"))
        elif kind == names.ALLOC_RING:
            _ring(p, name, data, out)
        elif kind == names.SITES:
            _sites(p, data)
        elif kind == names.STACKS:
            p.dumps += parse_stacks(data.decode("utf-8", "replace"), name)
    return out


def _ring(p: AgentProcess, name: str, data: bytes, out: AgentLog) -> None:
    head, problem = ring.read_header(data)
    if head is None:
        out.problems.append(Problem(name, problem or "not a ring"))
        return
    recs, torn = ring.read_records(data, head["capacity"])
    offset = head["boottime_ns"] - head["monotonic_ns"] if head["boottime_ns"] else 0
    p.events = [AllocEvent(r[0], ring.KIND_NAMES.get(r[2], f"kind-{r[2]}"), r[4] + offset, r[5], r[6], r[7], r[3],
                           r[8], r[9]) for r in recs]
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
        if len(parts) >= 3 and parts[0].isdigit():
            p.sites[int(parts[0])] = Site(int(parts[0]), parts[1], parts[2])


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
