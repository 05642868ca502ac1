"""`faultkit dump` output: every thread's stack with what it waits on, then the hang verdict
(text like `py-spy dump`, or JSON)."""

from __future__ import annotations

import json

from ..analyze.hang import ONE_SAMPLE, HangFinding
from ..hang_model import ProcessStacks
from ..terminal import clean

DUMP_SCHEMA = "faultkit.dump/1"
# the kernel's scheduler states (/proc/PID/task/TID/stat)
STATE_WORDS = {"R": "on a CPU", "S": "sleeping", "D": "in the kernel, uninterruptible", "T": "stopped",
               "t": "stopped by a tracer", "Z": "exited"}


def render_text(hf: HangFinding, last: list[ProcessStacks], max_frames: int = 40) -> str:
    out = []
    found = {p.pid: p for p in hf.processes}
    for ps in last:
        pf = found.get(ps.pid)
        # a faulthandler dump prints no pid: its record's pid is 0, which no process has
        head = (f"Process {ps.pid}" if ps.pid else "Process (pid not in the dump)") + \
               (f" (rank {ps.rank})" if ps.rank is not None else "") + \
               (f": {clean(ps.command)}" if ps.command else "")
        out.append(head)
        out.append(f"  stacks from {ps.source}; {pf.state if pf else '?'}")
        for p in ps.problems:
            out.append(f"  note: {clean(p)}")
        judged = {(t.tid, t.name): t for t in (pf.threads if pf else [])}
        for t in ps.threads:
            tf = judged.get((t.tid, t.name))
            tag = ""
            if tf is not None:
                w = tf.wait
                tag = f"  [{w.on}" + (", idle" if w.idle else "") + (", STUCK" if tf.stuck else "") + \
                      ("" if tf.unchanged is None else ", unchanged" if tf.unchanged else ", moved") + "]"
            state = f" ({STATE_WORDS.get(t.state, t.state)})" if t.state else ""
            out.append(f'\nThread {t.tid if t.tid is not None else "?"}{state}' + (f' "{clean(t.name)}"' if t.name else "")
                       + tag)
            for f in t.frames[:max_frames]:
                loc = f"{f.file}:{f.line}" if f.file and f.line else (f.library or f.file or "")
                out.append(f"    {clean(f.function or '??')}" + (f" ({clean(loc)})" if loc else ""))
            if len(t.frames) > max_frames:
                out.append(f"    ... {len(t.frames) - max_frames} more frames")
        out.append("")
    out.append(verdict_text(hf))
    return "\n".join(out) + "\n"


def verdict_text(hf: HangFinding) -> str:
    level = hf.level or ("not hung" if hf.state in ("idle", "busy") else None)
    lines = [f"verdict: {hf.state}" + (f" ({level})" if level else "") + f": {hf.summary}"]
    for t in hf.stuck[1:]:
        lines.append(f"  also stuck: pid {t.pid} {t.describe()}")
    lines += [f"  {w}" for w in hf.waits_on]
    lines += [f"  collectives: {lag.why}" for lag in hf.lags[1:] if hf.state == "hung"]
    if hf.samples < 2 and hf.state != ONE_SAMPLE:     # a one-sample finding says how in its summary
        lines.append("  one sample: take two (--samples 2) to tell a stuck wait from a slow one")
    return "\n".join(lines)


def render_json(hf: HangFinding, samples: list[list[ProcessStacks]]) -> str:
    return json.dumps({"schema": DUMP_SCHEMA, "verdict": hf.to_json(),
                       "samples": [[p.to_json() for p in s] for s in samples]}, indent=2) + "\n"
