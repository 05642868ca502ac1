"""The correlated incident: what every input said, the faults, the verdict and the next steps."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hang_model import ProcessStacks, RankCollectives
from ..manifest import Manifest
from ..model import (CoreRecord, DebuggerLog, Fault, KernelEvent, KernelLog, KernelMention, Problem, ReportPoint,
                     RuntimeLog, Verdict)
from .allocation_owner import BlackBox
from .debug_stop import StopFinding
from ..judge.incidents import FaultGroup
from .fault_time import LogClock
from .hang import HangFinding
from .running import RunningKernel
from .trace_findings import TraceFindings

KEY_EVENTS = ("ring-timeout", "gpu-reset", "reset-method", "reset-result", "ring-reset", "vram-lost", "mes", "kfd",
              "sq-intr", "ras", "callbacks-suppressed", "iommu", "core-dump", "host-segfault")


@dataclass
class Incident:
    """Everything read from one bundle or set of inputs: the parsers' records and the analyses' findings."""
    inputs: list[dict] = field(default_factory=list)      # name, kinds
    runtime: RuntimeLog = field(default_factory=RuntimeLog)
    kernel: KernelLog = field(default_factory=KernelLog)
    debugger: DebuggerLog = field(default_factory=DebuggerLog)
    stops: list[StopFinding] = field(default_factory=list)
    traces: TraceFindings | None = None
    faults: list[Fault] = field(default_factory=list)
    groups: list[FaultGroup] = field(default_factory=list)   # one per faulting process, each with its verdict
    verdict: Verdict | None = None
    report_points: list[ReportPoint] = field(default_factory=list)
    kernel_events: list[KernelEvent] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    cores: list[CoreRecord] = field(default_factory=list)
    running: list[RunningKernel] = field(default_factory=list)   # kernels in cores taken without an exception
    capture: Manifest | None = None  # what the capture armed and recorded (its manifest), where there was one
    missing: list[str] = field(default_factory=list)   # inputs named that could not be read
    log_clock: LogClock | None = None  # a capture bundle's clocks: every evidence line at its real time
    problems: list[Problem] = field(default_factory=list)
    # Kernel-log records of processes the capture did not record: another job on the node, shown apart
    other_faults: list[Fault] = field(default_factory=list)
    other_events: list[KernelEvent] = field(default_factory=list)
    black_box: BlackBox | None = None   # the in-process agent's files: the fault address's owner, the stacks
    hang: HangFinding | None = None    # stacks sampled at a hang, and the collectives of each rank
    pasted_stacks: list[ProcessStacks] = field(default_factory=list)   # stack dumps found in text inputs
    collectives: list[RankCollectives] = field(default_factory=list)
    mentions: list[KernelMention] = field(default_factory=list)   # kernels named away from the fault line
