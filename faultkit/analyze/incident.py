"""The correlated incident: every input parsed, faults grouped, verdict and next steps decided."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..bundle import Inputs
from ..ingest.detect import detect_kinds
from ..ingest.kernel_log import parse_kernel_log
from ..ingest.runtime_log import parse_runtime_log
from ..ingest.text import decode
from ..model import Fault, KernelEvent, KernelLog, Problem, ReportPoint, RuntimeLog, Verdict
from .faults import collect_faults
from .next_steps import suggest
from .verdict import decide

KEY_EVENTS = ("ring-timeout", "gpu-reset", "reset-method", "reset-result", "ring-reset", "vram-lost", "mes", "kfd",
              "sq-intr", "ras", "callbacks-suppressed", "iommu", "core-dump", "host-segfault")


@dataclass
class Incident:
    inputs: list[dict] = field(default_factory=list)      # name, kinds
    runtime: RuntimeLog = field(default_factory=RuntimeLog)
    kernel: KernelLog = field(default_factory=KernelLog)
    faults: list[Fault] = field(default_factory=list)
    verdict: Verdict | None = None
    report_points: list[ReportPoint] = field(default_factory=list)
    kernel_events: list[KernelEvent] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def build(inputs: Inputs) -> Incident:
    inc = Incident(problems=list(inputs.problems))
    kinds_seen: set[str] = set()
    for f in inputs.files:
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
    inc.problems.extend(inc.runtime.problems)
    inc.problems.extend(inc.kernel.problems)
    inc.faults = collect_faults(inc.runtime, inc.kernel)
    inc.verdict = decide(inc.runtime, inc.faults)
    inc.report_points = inc.runtime.report_points
    inc.kernel_events = [e for e in inc.kernel.events if e.kind in KEY_EVENTS]
    inc.next_steps = suggest(inc.runtime, inc.kernel, inc.faults, inc.verdict, kinds_seen)
    if not inputs.files:
        inc.problems.append(Problem("<inputs>", "no readable input files"))
    return inc
