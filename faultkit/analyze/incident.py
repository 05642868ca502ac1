"""The correlated incident: every input parsed, faults grouped, verdict and next steps decided."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..bundle import Inputs
from ..ingest.code_object import BUNDLE_MAGIC, code_objects_in
from ..ingest.debugger import parse_debugger
from ..ingest.detect import detect_kinds
from ..ingest.kernel_log import parse_kernel_log
from ..ingest.runtime_log import parse_runtime_log
from ..ingest.text import decode
from ..model import DebuggerLog, Fault, KernelEvent, KernelLog, Problem, ReportPoint, RuntimeLog, Verdict
from .debug_stop import StopFinding, examine, resolve_with, sanitizer_fault, stop_fault
from .faults import collect_faults
from .next_steps import suggest
from .trace_findings import WINDOW_NS, TraceFindings, analyse_traces, trace_candidates
from .verdict import decide

KEY_EVENTS = ("ring-timeout", "gpu-reset", "reset-method", "reset-result", "ring-reset", "vram-lost", "mes", "kfd",
              "sq-intr", "ras", "callbacks-suppressed", "iommu", "core-dump", "host-segfault")


@dataclass
class Incident:
    inputs: list[dict] = field(default_factory=list)      # name, kinds
    runtime: RuntimeLog = field(default_factory=RuntimeLog)
    kernel: KernelLog = field(default_factory=KernelLog)
    debugger: DebuggerLog = field(default_factory=DebuggerLog)
    stops: list[StopFinding] = field(default_factory=list)
    traces: TraceFindings | None = None
    faults: list[Fault] = field(default_factory=list)
    verdict: Verdict | None = None
    report_points: list[ReportPoint] = field(default_factory=list)
    kernel_events: list[KernelEvent] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def build(inputs: Inputs, env: dict[str, str] | None = None, window_ns: int | None = None,
          read_ns: int | None = None) -> Incident:
    """`env`: variables the user says were set for the run (else the capture's record is used)."""
    inc = Incident(problems=list(inputs.problems))
    kinds_seen: set[str] = set()
    objects = []
    for f in inputs.files:
        if f.data[:4] == b"\x7fELF" or BUNDLE_MAGIC in f.data[:1 << 20]:
            found, problems = code_objects_in(f.data, f.name)
            objects += found
            inc.problems.extend(problems)
            inc.inputs.append({"name": f.name, "kinds": ["code-object"] if found else ["binary"], "bytes": len(f.data)})
            continue
        text, problems = decode(f.data, f.name)
        inc.problems.extend(problems)
        kinds = detect_kinds(text)
        kinds_seen |= kinds
        inc.inputs.append({"name": f.name, "kinds": sorted(kinds), "bytes": len(f.data)})
        if "kernel-log" in kinds:
            kl = parse_kernel_log(text, f.name)
            inc.kernel.extend(kl)
            inc.kernel.timestamp_style = inc.kernel.timestamp_style or kl.timestamp_style
        if "runtime-log" in kinds or "debugger" in kinds:
            inc.runtime.extend(parse_runtime_log(text, f.name))
        if "debugger" in kinds:
            dl = parse_debugger(text, f.name)
            inc.debugger.extend(dl)
            # Stops are judged per transcript: each worker's debugger has its own tables.
            inc.stops.extend(examine(dl, f.name))
    for finding in inc.stops:
        resolve_with(finding, objects, inc.debugger.code_objects)
    inc.problems.extend(inc.runtime.problems)
    inc.problems.extend(inc.kernel.problems)
    inc.problems.extend(inc.debugger.problems)
    inc.faults = collect_faults(inc.runtime, inc.kernel)
    inc.faults += [stop_fault(s) for s in inc.stops] + [sanitizer_fault(r) for r in inc.debugger.sanitizer]
    if inputs.traces:
        inc.traces = analyse_traces(inputs.traces, inc.runtime, inc.kernel, inc.faults, inputs.manifest, env,
                                    "--env given to triage" if env else "", window_ns or WINDOW_NS, read_ns)
        inc.problems.extend(inc.traces.trace.problems)
        for t in inc.traces.trace.files:
            inc.inputs.append({"name": t["path"], "kinds": [f"trace:{t.get('table')}"], "rows": t["rows"]})
    inc.verdict = decide(inc.runtime, inc.faults, inc.stops, inc.debugger.sanitizer,
                         trace_candidates(inc.traces) if inc.traces else (),
                         inc.traces.plausible if inc.traces else 0)
    inc.report_points = inc.runtime.report_points
    inc.kernel_events = [e for e in inc.kernel.events if e.kind in KEY_EVENTS]
    inc.next_steps = suggest(inc.runtime, inc.kernel, inc.faults, inc.verdict, kinds_seen, inc.stops)
    if not inputs.files and not inputs.traces:
        inc.problems.append(Problem("<inputs>", "no readable input files"))
    return inc
