"""The postmortem report in Markdown, self-contained HTML, and JSON (schema faultkit.triage/1).

Markdown and HTML render the same section list, so they cannot drift apart. JSON follows the
contract in issue 2; later additions only add keys.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field

from ..analyze.incident import Incident
from ..analyze.trace_claims import label
from ..durations import relative
from .last_moments import last_moments_svg
from .markup import authored, code, html_block, html_inline, kernel, md, md_code_block, strong
from .. import layout, redact, sources
from ..demangle import demangled, display_name
from ..codes import GPU_ERROR_BY_CODE, status_meaning, status_name
from ..judge.levels import CANDIDATES, CERTAIN, LEVELS, LIKELY, UNKNOWN
from ..manifest import Manifest
from ..model import hex_or_none
from .._signals import capture_exit_status, host_crash_signal

SCHEMA = "faultkit.triage/1"


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    table: tuple[list[str], list[list[str]]] | None = None
    code: list[str] = field(default_factory=list)


def to_json(inc: Incident) -> dict:
    """The report as JSON, every string redacted (evidence quoted in it may carry a secret: a kernel
    log's unstamped line read as the rest of an Xid message did). The one way a report's JSON is
    made: `-f json`, watch's report.json and the registry's intake read it."""
    return _redact_strings(_report_json(inc))


def _redact_strings(v):
    if isinstance(v, str):
        return redact.text(v)
    if isinstance(v, dict):
        return {k: _redact_strings(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_redact_strings(x) for x in v]
    return v


def _report_json(inc: Incident) -> dict:
    return _json_safe(_json_tree(inc))


def _json_tree(inc: Incident) -> dict:
    v = inc.verdict
    return {
        "schema": SCHEMA,
        "verdict": v.to_json() if v else {"level": UNKNOWN, "kernel": None, "candidates": [], "why": ""},
        "faults": [f.to_json() for f in inc.faults],
        "other_processes": {"faults": [f.to_json() for f in inc.other_faults],
                            "kernel_events": [_event_json(e) for e in inc.other_events]},
        "incidents": [g.to_json(inc.faults) for g in inc.groups],
        "report_points": [{"source": "runtime", "frame": r.frame, "kind": r.kind, "exception": r.exception,
                           "process": r.process_tag, "origin": str(r.origin)} for r in inc.report_points],
        "next_steps": inc.next_steps,
        "problems": [str(p) for p in inc.problems],
        "inputs": inc.inputs,
        "kernel_events": [_event_json(e) for e in inc.kernel_events],
        "wave_dumps": [{"wave": w.wave, "pc": hex_or_none(w.pc), "kernel": w.kernel, "reasons": w.reasons,
                        "generation": w.generation, "code_object": w.code_object,
                        "faulting_pc_marked": hex_or_none(w.marked_pc), "origin": str(w.origin)}
                       for w in inc.runtime.waves],
        "debugger_stops": [_stop_json(f) for f in inc.stops],
        "capture": capture_facts(inc.capture),
        "trace": inc.traces.to_json() if inc.traces else None,
        "cores": [c.to_json() for c in inc.cores],
        "running_at_dump": [r.to_json() for r in inc.running],
        "hang": inc.hang.to_json() if inc.hang else None,
        "queue_analysis": queue_analysis(inc),
        "core_dump_lines": [{"event": n.fields.get("event"), "failed": n.fields.get("failed"),
                             "file": n.fields.get("file"), "text": n.text, "origin": str(n.origin)}
                            for n in inc.runtime.notes if n.kind == "gpu-core-dump"][:200],
        "debugger": {"debugger": inc.debugger.debugger, "precise_memory": inc.debugger.precise_memory,
                     "dispatches": [{"id": d.id, "agent": d.agent, "queue": d.queue, "dispatch": d.dispatch,
                                     "kernel": d.kernel, "grid": d.grid, "workgroup": d.workgroup}
                                    for d in inc.debugger.dispatches],
                     "code_objects": [{"uri": c.uri, "low": hex_or_none(c.low), "high": hex_or_none(c.high)}
                                      for c in inc.debugger.code_objects],
                     "events": [{"kind": e.kind, "text": e.text, "origin": str(e.origin)}
                                for e in inc.debugger.events if e.kind not in ("fork",)][:200]},
        **sources.to_json(inc),
    }


def _event_json(e) -> dict:
    return {"kind": e.kind, "text": e.text, "time": e.stamp.raw if e.stamp else None, "gpu": e.pci,
            "fields": e.fields, "origin": str(e.origin)}


def _stop_json(f) -> dict:
    st = f.stop
    return {"kind": st.kind, "signal": st.signal, "exception": st.exception, "gpu": f.gpu, "thread": st.thread,
            "thread_name": st.thread_name, "systag": st.gpu.systag if st.gpu else st.host_systag,
            "kernel": f.kernel, "kernel_basis": f.kernel_basis, "function": f.function, "pc": hex_or_none(f.pc),
            "precise": f.precise, "precise_basis": f.precise_basis, "coordinates": f.coordinates, "source": f.source,
            "faulting_instruction": f.faulting.text if f.faulting else None,
            "resolved": f.resolved, "origin": str(st.origin), "file": f.file,
            "focused_lane_address": hex_or_none(f.lane_address), "focused_lane_address_basis": f.lane_address_basis}


def render_json(inc: Incident) -> str:
    return json.dumps(to_json(inc), indent=2, default=str) + "\n"


def _json_safe(v):
    """Strict JSON with the names shown as read: NaN and infinities (which json writes as bare
    words no other parser reads) become null; beside every mangled `kernel` its demangled
    `kernel_demangled`."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        out = {k: _json_safe(x) for k, x in v.items()}
        if isinstance(v.get("kernel"), str) and "kernel_demangled" not in v:
            shown = demangled(v["kernel"])
            if shown:
                out["kernel_demangled"] = shown
        return out
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def _incidents_section(inc: Incident) -> Section:
    s = Section("One incident per faulting process")
    s.paragraphs.append(f"The faults belong to {len(inc.groups)} processes; each is judged on its own evidence "
                        "(evidence without a pid goes with the first). The verdict above is the first one's.")
    rows = []
    for i, g in enumerate(inc.groups):
        v = g.verdict
        rows.append([str(i + 1), ", ".join(map(str, g.pids)) or "?", ", ".join(g.gpus), str(len(g.faults)),
                     v.level, kernel(v.kernel) if v.kernel else
                     (f"{kernel(v.candidates[0].kernel)} (candidate)" if v.candidates else ""), v.why])
    s.table = (["#", "pid", "GPU", "faults", "level", "kernel", "why"], rows)
    return s


def _evidence(v, c) -> str:
    """What each claim behind a candidate is and the level it was allowed."""
    return "; ".join(f"{x.basis.producer} {x.basis.kind}: {x.level}"
                     for x in map(v.claim, c.claims)) if c.claims else ""


def sections(inc: Incident) -> list[Section]:
    """The report's sections in reading order; a builder returns None where it has nothing to say."""
    built = [_verdict_section(inc), _incidents_section(inc) if len(inc.groups) > 1 else None,
             _facts_section(inc), _others_section(inc), _meaning_section(inc), _decoded_section(inc),
             _events_section(inc), _wave_section(inc), _queue_section(inc), _capture_section(inc.capture),
             _hang_section(inc), _cores_section(inc),
             *[Section(**p) for p in sources.sections(inc)],     # the sources that render themselves
             *[_stop_section(f) for f in inc.stops[:4]], *(_trace_sections(inc.traces) if inc.traces else []),
             _report_points_section(inc), _codes_section(inc), Section("Next steps", bullets=[authored(s) for s in inc.next_steps]),
             _inputs_section(inc)]
    return [s for s in built if s is not None]


def _verdict_section(inc: Incident) -> Section:
    v = inc.verdict
    s = Section("Verdict")
    if v.kernel:
        s.paragraphs.append(f"{strong(v.level)}: faulting kernel {kernel(v.kernel)}")
    else:
        s.paragraphs.append(f"{strong(v.level)}: " + ("no single kernel can be named" if v.candidates
                                                 else "the evidence names no kernel"))
        # where only device functions are visible, where the fault was is still said (never as the kernel)
        s.paragraphs += [f"The fault was in device function {kernel(f)} (a helper of an unnamed kernel)."
                         for f in dict.fromkeys(c.device_function for c in v.claims
                                                if not c.named and c.device_function)][:3]
    s.paragraphs.append(f"Why: {v.why}.")
    if not inc.faults and inc.capture is not None and not v.kernel \
            and (crash := host_crash_signal(inc.capture.exit_code)):
        # its exit status only: the kernel log's segfault records may be another program's
        s.paragraphs.append(f"The target crashed on the host, not on the GPU (it was killed by {crash}).")
    finding = v.decisive
    if finding:
        s.paragraphs.append(f"Decisive finding: {finding}.")
    if v.candidates:
        s.table = (["#", "candidate kernel", "score", "evidence: level allowed", "why"],
                   [[str(i + 1), kernel(c.kernel), f"{c.score:.2f}", _evidence(v, c), c.why]
                    for i, c in enumerate(v.candidates)])
    return s


def _facts_section(inc: Incident) -> Section:
    s = Section("Fault facts")
    if not inc.faults:
        s.paragraphs.append("No GPU fault was found in the inputs.")
        return s
    s.table = (["source", "kind", "address", "code", "GPU", "pid / process", "time", "group", "evidence"],
               [[f.source, f.kind, hex_or_none(f.address) or "", f.code_text() or "", f.gpu or "",
                 " ".join(x for x in (str(f.pid) if f.pid is not None else "", f.process or "") if x),
                 f.time or "", str(f.group or ""), str(f.origin or "")] for f in inc.faults])
    groups: dict[int, set] = {}
    for f in inc.faults:
        if f.group is not None:
            groups.setdefault(f.group, set()).add(f.source)
    joined = [g for g, srcs in groups.items() if len(srcs) > 1]
    if joined:
        s.paragraphs.append("Group(s) " + ", ".join(map(str, joined)) + ": the runtime's fault address lies "
                            "in a page the kernel log reports: the same event seen from both sides.")
    secondary = sum(1 for f in inc.faults if f.secondary)
    if secondary:
        s.paragraphs.append(f"{secondary} kernel-log block(s) had an all-zero status (faults latched behind an "
                            f"earlier one); their printed client is not meaningful.")
    return s


def _others_section(inc: Incident) -> Section | None:
    if not inc.other_faults and not inc.other_events:
        return None
    s = Section("Other processes on this machine")
    s.paragraphs.append("The kernel log also holds these records of processes the capture did not start or "
                        "follow (their pids are not in its process record): another job's, not evidence of this "
                        "incident.")
    s.bullets = [f"{f.kind} pid {f.pid}" + (f" ({f.process})" if f.process else "") + f" ({f.origin})"
                 for f in inc.other_faults[:50]]
    s.bullets += [f"{e.kind} pid {e.fields.get('pid')}: {e.text[:120]} ({e.origin})" for e in inc.other_events[:50]]
    return s


def _meaning_section(inc: Incident) -> Section | None:
    s = Section("What the faults mean")
    seen = set()
    for f in inc.faults:
        if f.meaning and f.meaning not in seen:
            seen.add(f.meaning)
            s.bullets.append(f"{f.source} ({f.origin}): {f.meaning}" + _sanitizer_where(f.detail or {}))
    return s if s.bullets else None


def _sanitizer_where(d: dict) -> str:
    """compute-sanitizer's thread, block and host launch frames (the JSON's detail), said in words."""
    fmt = lambda v: "(" + ",".join(map(str, v)) + ")"  # noqa: E731
    parts = []
    if d.get("thread") and d.get("block"):
        parts.append(f"by thread {fmt(d['thread'])} in block {fmt(d['block'])}")
    if d.get("host_frames"):
        parts.append(f"launched from {'; '.join(code(h) for h in d['host_frames'][:3])}")
    text = ", ".join(parts)
    return f" {text[0].upper()}{text[1:]}." if parts else ""


def _decoded_section(inc: Incident) -> Section | None:
    kfaults = [f for f in inc.faults if f.source == "kernel-log" and f.kind.startswith("page-fault")]
    if not kfaults:
        return None
    s = Section("Kernel-log faults, decoded")
    s.table = (["page", "GPU", "hub", "vmid", "pasid", "client", "access", "permission bits", "status",
                "process"],
               [[hex_or_none(f.address) or "", f.gpu or "", str(f.detail.get("hub", "")),
                 _blank(f.vmid), _blank(f.pasid),
                 "(secondary)" if f.secondary else (f.client or ""),
                 "" if f.secondary else {0: "read", 1: "write"}.get(f.detail.get("rw"), ""),
                 _perm(f.detail.get("permission_faults")), str(f.detail.get("status", "")),
                 f"{f.process or ''} {f.pid or ''}".strip()] for f in kfaults[:200]])
    if len(kfaults) > 200:
        s.paragraphs.append(f"{len(kfaults) - 200} more fault blocks are in the JSON report.")
    return s


def _events_section(inc: Incident) -> Section | None:
    if not inc.kernel_events:
        return None
    s = Section("Kernel-log events around the fault")
    s.paragraphs.append("Timeouts, MES/HWS failures and resets within seconds after a fault are usually its "
                        "consequences, not separate causes.")
    s.table = (["time", "GPU", "kind", "message"],
               [[e.stamp.raw if e.stamp else "", e.pci or "", e.kind, e.text[:160]] for e in inc.kernel_events[:60]])
    return s


def _wave_section(inc: Incident) -> Section | None:
    waves = [w for w in inc.runtime.waves if w.generation != "v1" and (w.disassembly or w.kernel)]
    if not waves:
        return None
    w = next((w for w in waves if w.disassembly), waves[0])
    s = Section("Stopped wave (rocm-debug-agent)")
    s.paragraphs.append(f"wave {w.wave} stopped at pc 0x{w.pc:x} in {kernel(w.kernel)} ({', '.join(w.reasons)})"
                        if w.pc is not None else f"wave in {kernel(w.kernel)}")
    if w.code_object:
        s.paragraphs.append(f"code object: {w.code_object}")
    s.code = w.disassembly[:40]
    return s


QUEUE_STATES = {
    "packet": "the packet at its read pointer (in flight when rptr < wptr)",
    "idle": "idle: every packet done, so not the queue that faulted",
    "barrier": "a barrier packet at its read pointer (waiting on a signal, no kernel)",
    "no-kernel": "ROCclr found the packet, not its kernel",
    "no-hang-packet": "ROCclr found no packet to show",
}


def queue_analysis(inc: Incident) -> list[dict]:
    """ROCclr's look at each queue when the process aborted, in the order printed."""
    out = [(d.origin, {"queue": d.hw_queue, "state": "packet", "kernel": d.kernel or d.kernel_obj,
                       "rptr": d.rptr, "wptr": d.wptr, "origin": str(d.origin)})
           for d in inc.runtime.dispatches if d.source == "hang-analysis"]
    out += [(n.origin, {"queue": n.fields["queue"], "state": n.fields["state"], "kernel": None,
                        "rptr": n.fields["rptr"], "wptr": n.fields["wptr"], "origin": str(n.origin)})
            for n in inc.runtime.notes if n.kind == "queue-state"]
    return [q for _, q in sorted(out, key=lambda x: (x[0].file, x[0].line or 0))][:64]


def _queue_section(inc: Incident) -> Section | None:
    queues = queue_analysis(inc)
    if not queues:
        return None
    s = Section("ROCclr's queue analysis at the abort")
    s.bullets = [f"queue {q['queue'] or '?'}: {QUEUE_STATES[q['state']]}"
                 + (f": {kernel(q['kernel'])}" if q["kernel"] else "")
                 + (f" (rptr={q['rptr']}, wptr={q['wptr']})" if q["rptr"] is not None else "") + f" ({q['origin']})"
                 for q in queues]
    return s


def _report_points_section(inc: Incident) -> Section:
    s = Section("Report points (where the host noticed, not where the GPU faulted)")
    if inc.report_points:
        s.bullets = [f"{r.kind}: {r.frame}" + (f" — {r.exception}" if r.exception else "")
                     + (f" [{r.process_tag}]" if r.process_tag else "") + f" ({r.origin})"
                     for r in inc.report_points]
        s.paragraphs.append("Kernels run asynchronously: these frames are where an error was reported, never the "
                            "faulting site.")
    elif (host := next((f for f in inc.stops if not f.gpu), None)) is not None and inc.debugger.backtrace:
        # a host crash under a debugger: its backtrace is the host stack (the crash site itself)
        s.paragraphs.append(f"The debugger's backtrace of the host thread that stopped on {host.stop.signal} "
                            f"({host.stop.origin}): a CPU crash, so this is where it happened.")
        s.code = [f.text for f in inc.debugger.first_backtrace()[:40]]
    elif inc.black_box is not None and inc.black_box.threads:
        # the in-process agent wrote every thread's stack at the abort: said above, not missing
        s.paragraphs.append("No report point in the logs: the black box above holds every thread's stack at the "
                            "abort, the thread that received the signal marked.")
    elif inc.hang is not None and inc.hang.processes:
        # stack dumps of a hang: every thread's stack is in the hang analysis, nothing is missing
        s.paragraphs.append("No report point in the logs: the hang analysis above holds every thread's stack.")
    else:
        s.paragraphs.append("No host stack was found.")
    return s


def _codes_section(inc: Incident) -> Section | None:
    codes = sorted({f.hsa_code for f in inc.faults if f.hsa_code is not None})
    errors = sorted({f.code for f in inc.faults if f.decimal_code and f.code in GPU_ERROR_BY_CODE})
    if not codes and not errors:
        return None
    return Section("What the status codes mean",
                   bullets=[f"0x{c:x} {status_name(c) or ''}: {status_meaning(c)}" for c in codes]
                   + [f"{c} {GPU_ERROR_BY_CODE[c].runtime}: {GPU_ERROR_BY_CODE[c].message}" for c in errors])


def _inputs_section(inc: Incident) -> Section:
    s = Section("Inputs and problems")
    s.bullets = [f"{i['name']}: {', '.join(i['kinds'])}" for i in inc.inputs]
    s.bullets += [f"problem: {p}" for p in inc.problems[:100]]
    if len(inc.problems) > 100:
        s.bullets.append(f"... {len(inc.problems) - 100} more problems in the JSON report")
    return s


def _list(v) -> list:
    """A manifest's open records (coredump, env_check) keep their writer's shape unchecked: in a file
    edited by hand or cut, a list there may be anything."""
    return v if isinstance(v, list) else []


def capture_facts(m: Manifest | None) -> dict | None:
    """What the capture's manifest says about the run, as the report states it (JSON and text)."""
    if m is None:
        return None
    arming = m.coredump or {}
    check = m.env_check
    follow = m.kernel_log.follow if m.kernel_log else None
    readable = m.kernel_log.readable if m.kernel_log and m.kernel_log.readable is not None else (
        None if follow is None else follow == layout.KERNEL_FOLLOW)
    return {
        "state": m.state, "command": m.command, "backend": m.backend,
        "ended_by": m.ended_by, "interrupted_by": m.interrupted_by,
        # exit_code: what `faultkit capture` exited with (124 at a timeout or a hang, like the CLI);
        # target_exit_code: the target's own status (negative: the signal that ended it)
        "exit": m.exit, "exit_code": capture_exit_status(m) if m.state == "finished" else None,
        "target_exit_code": m.exit_code,
        "armed": {"cuda_coredump": bool(arming.get("cuda")), "rocm_coredump": bool(arming.get("rocm")),
                  "full_core": bool(arming.get("full")),
                  "notes": [n for n in _list(arming.get("notes")) if isinstance(n, str)]},
        "env_requested": m.env_requested or {},
        "env_check": None if check is None else {
            "verified": check.get("ok") is True, "scope": check.get("scope"),
            "checked_pids": check.get("checked") if isinstance(check.get("checked"), list) else [],
            "mismatches": [x for x in _list(check.get("mismatches")) if isinstance(x, dict)]},
        "kernel_log": {"readable": readable,
                       "problem": None if readable is not False else (follow if isinstance(follow, str) else None)},
        "note": m.note, "warnings": list(m.warnings or []),
        # where and when it ran: the registry files a report by them as it files the bundle itself
        "host": (m.system or {}).get("host") if isinstance(m.system, dict) else None,
        "start": m.start.wall if m.start else None,
        "job": _job_of(m.launch),
    }


def _job_of(launch) -> str | None:
    from ..launch_env import Launch       # here: a text-only triage (no manifest) does not import the launcher model
    return Launch.from_json(launch).job


def _capture_section(m: Manifest | None) -> Section | None:
    c = capture_facts(m)
    if not c:
        return None
    s = Section("Capture")
    if c["state"] == "running":
        s.paragraphs.append(f"The capture was cut: its manifest still says {code('running')} (faultkit, or the machine, "
                            "died during the capture); the bundle holds what was written until then.")
    elif c["state"] == "cut":
        s.paragraphs.append("The capture was cut: faultkit itself was killed; its watchdog killed the target's "
                            "processes. The bundle holds what was written until then.")
    armed = [w for w, on in (("CUDA core dump", c["armed"]["cuda_coredump"]),
                             ("ROCm core dump", c["armed"]["rocm_coredump"])) if on]
    env = c["env_check"]
    env_text = None if env is None else (
        f"verified in /proc for pid(s) {', '.join(map(str, env['checked_pids']))}" if env["verified"] else
        f"NOT verified: {len(env['mismatches'])} process/variable pair(s) differ or could not be read "
        f"(pid(s) {', '.join(sorted({str(x.get('pid')) for x in env['mismatches']}))})")
    klog = c["kernel_log"]
    klog_text = None if klog["readable"] is None else "read during the capture" if klog["readable"] else \
        f"NOT readable ({klog['problem'] or 'no reason recorded'})"
    facts = [("command", code(c["command"]) if c["command"] else None), ("watched with", c["backend"]),
             ("ended by", c["ended_by"]), ("interrupted by", c["interrupted_by"]), ("target", c["exit"]),
             ("armed", ", ".join(armed) or "nothing"), ("requested environment", env_text),
             ("kernel log", klog_text), ("note", c["note"])]
    s.bullets = [f"{k}: {v}" for k, v in facts if v] + [f"warning: {w}" for w in c["warnings"]]
    return s


def _hang_section(inc: Incident) -> Section | None:
    """The stacks a capture sampled at its hang or timeout, and which rank is behind."""
    h = inc.hang
    if h is None:
        return None
    s = Section("Hang analysis")
    s.paragraphs.append(strong(h.state) + (f" ({h.level})" if h.level else "") + f": {h.summary}")
    s.bullets += [*h.waits_on, *(lag.why for lag in h.lags if lag.why != h.summary)]   # (not the summary twice)
    if h.processes:
        s.table = (["process", "state", "threads waiting (what on, where)"],
                   [[p.label, p.state, "; ".join(f"{t.label}: {t.wait.on}" + (f" at {t.wait.where.where}"
                                                                              if t.wait.where else "")
                                                 + (" STUCK" if t.stuck else "")
                                                 for t in p.threads if not t.wait.background)]
                    for p in h.processes])
    return s


def _cores_section(inc: Incident) -> Section | None:
    lines = [n for n in inc.runtime.notes if n.kind == "gpu-core-dump"]
    armed = (inc.capture.coredump if inc.capture else None) or {}
    if not inc.cores and not lines and not armed.get("cuda") and not armed.get("rocm"):
        return None
    s = Section("GPU core dumps")
    if inc.cores:
        s.table = (["core", "platform", "pid", "size", "opened with", "transcript / how to open"],
                   [[c.path, c.platform, _blank(c.pid), f"{c.size:,}" if c.size is not None else "",
                     c.analysed_with or "not opened", c.transcript or c.open_with or ""] for c in inc.cores])
        for c in inc.cores:
            s.bullets += [f"{c.path}: {p}" for p in c.problems]
    elif armed.get("cuda") or armed.get("rocm"):
        s.paragraphs.append("Core dumps were armed, and no process wrote one: no GPU exception reached a runtime "
                            "(a host-side crash, a hang without a --timeout/--hang-after trigger, or a process "
                            "killed first).")
    s.bullets += [f"{n.text} ({n.origin})" for n in lines if n.fields.get("failed")][:20]
    if inc.running:
        s.paragraphs.append("Running when the dumps were taken (no exception: a snapshot of a hung or busy GPU):")
        s.bullets += [f"pid {r.pid}: {kernel(r.kernel)}" + (f" at {r.where}" if r.where else "") + f" ({r.origin})"
                      for r in inc.running]
    # the CUDA driver's behaviour matters where CUDA was in play (a CUDA core, a CUDA fault), never
    # on a host-only crash
    cuda_seen = any(c.platform == "cuda" for c in inc.cores) or any(
        f.kind == "cuda-error" or f.kind.startswith("xid-") for f in inc.faults)
    if armed.get("cuda") and cuda_seen:
        s.paragraphs.append("With the CUDA core dump armed, the driver aborts the faulting process right after "
                            "writing the core (exit 134): the Python error (AcceleratorError) and its traceback "
                            "never appear; atexit and Python-level signal handlers do not run, while faulthandler's "
                            "C-level handler (the agent's) still writes every thread's Python stack.")
    for note in armed.get("notes") or []:
        if "NOT armed" in note:
            s.bullets.append(note)
    return s


def _trace_sections(t) -> list[Section]:
    s = Section("Trace: what ran before the fault")
    ft = t.time
    when = ft.on(t.trace.clock)
    s.paragraphs.append(f"Fault time: {when if when is not None else 'unknown'} ({t.trace.clock}), from "
                        f"{ft.source}" + (f"; could be off by up to {ft.uncertainty_ns / 1e6:g} ms"
                                          if ft.uncertainty_ns else "") + (f". {ft.note}" if ft.note else "") + ".")
    rows = {k: len(getattr(t.trace, k)) for k in ("dispatches", "copies", "allocations", "api")}
    s.paragraphs.append("Read: " + ", ".join(f"{v} {k}" for k, v in rows.items())
                        + f" (window {t.window_ns / 1e9:g} s before the fault for large traces).")
    if t.suspects:
        s.paragraphs.append(f"In flight at the fault ({t.plausible} plausible): rocprofv3 records a kernel only when "
                            f"it completes, so the faulting one is inferred from what has no record.")
        s.table = (["#", "suspect", "kind", "started", "score", "why", "evidence"],
                   [[str(i + 1), display_name(label(x)), x.kind,
                     relative(x.start - when) if x.start is not None and when is not None else "", f"{x.score:.2f}",
                     x.why, x.evidence] for i, x in enumerate(t.suspects[:20])])
    else:
        s.paragraphs.append("Nothing was found in flight at the fault time.")
    out = [s]
    o = t.overlaps
    if o is not None:
        s = Section("Trace: overlaps before the fault")
        s.paragraphs.append(f"{o.kernel_kernel} kernel-kernel overlap(s) across queues/streams and {o.copy_kernel} "
                            f"copy-kernel overlap(s) in the window.")
        if o.serialization:
            s.paragraphs.append(f"Serialization check ({o.serialization['from']}): {o.serialization['verdict']}.")
        if o.pairs:
            s.table = (["kind", "first", "second", "overlap (µs)"],
                       [[p["kind"], display_name(p["a"]), display_name(p["b"]), f"{p['overlap_ns'] / 1e3:.1f}"] for p in o.pairs[:20]])
        out.append(s)
    if t.address is not None:
        out.append(Section("Trace: the fault address", paragraphs=[t.address.text + "."]))
    return out


def _stop_section(f) -> Section:
    st = f.stop
    s = Section(f"Debugger stop ({'GPU' if f.gpu else 'host thread'}, {f.file})")
    s.paragraphs.append(f"{code(st.text)} ({st.origin})")
    facts = [("kernel", f"{kernel(f.kernel)} (from {f.kernel_basis})" if f.kernel else ""),
             ("function at the stop", code(display_name(f.function)) if f.function and f.function != f.kernel else ""),
             ("PC", f"0x{f.pc:x}" if f.pc is not None else ""),
             ("where on the GPU", f.coordinates or ""), ("source", code(f.source) if f.source else ""),
             ("PC exact?", ("yes: " if f.precise else "no: " if f.precise is False else "unknown: ") + f.precise_basis
              if f.gpu else ""),
             ("code object", f.resolved or ""),
             ("address operand", f"0x{f.lane_address:x}: {f.lane_address_basis}" if f.lane_address is not None else "")]
    s.bullets = [f"{k}: {v}" for k, v in facts if v]
    if f.disassembly:
        s.code = [line.text + ("    <-- faulting instruction" if line is f.faulting else "")
                  for line in f.disassembly[:48]]
        if f.faulting is None and f.gpu and not f.precise:
            s.paragraphs.append("The faulting instruction is not marked: without precise memory the PC can be "
                                "several instructions past it.")
    return s


def _perm(bits) -> str:
    if bits is None:
        return ""
    names = [n for b, n in ((1, "invalid"), (2, "no-read"), (4, "no-write"), (8, "no-exec")) if bits & b]
    return f"0x{bits:x}" + (f" ({', '.join(names)})" if names else "")


def render_markdown(inc: Incident) -> str:
    lines = ["# faultkit triage report", ""]
    for s in sections(inc):
        lines += [f"## {md(s.title)}", ""]
        for p in s.paragraphs:
            lines += [md(p, block=True), ""]
        if s.table:
            head, rows = s.table
            lines.append("| " + " | ".join(md(h, cell=True) for h in head) + " |")
            lines.append("|" + "---|" * len(head))
            for r in rows:
                lines.append("| " + " | ".join(md(c, cell=True) for c in r) + " |")
            lines.append("")
        for b in s.bullets:
            lines.append(f"- {md(b, block=True)}")
        if s.bullets:
            lines.append("")
        if s.code:
            lines += md_code_block(s.code) + [""]
    return "\n".join(lines)


LEVEL_COLOURS = {CERTAIN: "#1b7f3b", LIKELY: "#2f6fb3", CANDIDATES: "#b07a00", UNKNOWN: "#777"}
CSS = ("body{font-family:system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#222}"
       "table{border-collapse:collapse;font-size:.9rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;"
       "vertical-align:top;text-align:left}code,pre{background:#f4f4f4}pre{padding:.5rem;overflow:auto}"
       ".level{display:inline-block;font-size:1.2rem;font-weight:600;padding:.2rem .7rem;border-radius:.4rem;"
       "color:#fff}" + "".join(f".level-{lv}{{background:{LEVEL_COLOURS[lv]}}}" for lv in LEVELS) +
       ".wide{overflow-x:auto;max-width:100%}td{max-width:40rem;overflow-wrap:break-word;line-height:1.45}"
       "li,p{overflow-wrap:anywhere}")   # a mangled C++ name is one word of hundreds of letters


def render_html(inc: Incident) -> str:
    out = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\"><title>faultkit triage report</title>",
           f"<style>{CSS}</style></head><body>", "<h1>faultkit triage report</h1>"]
    v = inc.verdict
    if v is not None:
        # The verdict first, as a badge coloured by how sure it is.
        shown = f" {html_inline(kernel(v.kernel))}" if v.kernel else ""
        out.append(f'<p><span class="level level-{html.escape(v.level)}">{html.escape(v.level)}</span>{shown}</p>')
    svg = last_moments_svg(inc)
    for i, s in enumerate(sections(inc)):
        if i == 1 and svg:
            out.append("<h2>The last moments before the fault</h2>")
            out.append(f'<div class="wide">{svg}</div>')
        out.append(f"<h2>{html_inline(s.title)}</h2>")
        for p in s.paragraphs:
            out.append(f"<p>{html_inline(p)}</p>")
        if s.table:
            head, rows = s.table
            out.append('<div class="wide"><table><tr>' + "".join(f"<th>{html_inline(h)}</th>" for h in head) + "</tr>")
            for r in rows:
                out.append("<tr>" + "".join(f"<td>{html_inline(c)}</td>" for c in r) + "</tr>")
            out.append("</table></div>")
        if s.bullets:
            out.append("<ul>" + "".join(f"<li>{html_inline(b)}</li>" for b in s.bullets) + "</ul>")
        if s.code:
            out.append("<pre>" + html_block(s.code) + "</pre>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _redacted(render):
    """A text renderer whose every line is redacted: what a report quotes of the evidence is shown
    with its secrets hidden, whatever section quotes it."""
    return lambda inc: redact.text(render(inc))


RENDERERS = {"md": _redacted(render_markdown), "markdown": _redacted(render_markdown), "html": _redacted(render_html),
             "json": render_json}


def _blank(v) -> str:
    return "" if v is None else str(v)
