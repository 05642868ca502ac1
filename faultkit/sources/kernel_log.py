"""The kernel log (dmesg, dmesg -T, journalctl -k): amdgpu VM page faults, ring timeouts, GPU resets,
KFD messages, NVRM Xids, host segfault lines."""

from __future__ import annotations

from ..ingest.kernel_log import parse_kernel_log
from ..ingest.kernel_markers import MARKERS
from ..ingest.prefilter import KERNEL
from .source import Source, parser_anchors

def _gather(inc, log, text):
    inc.kernel.extend(log)
    inc.kernel.timestamp_style = inc.kernel.timestamp_style or log.timestamp_style


SOURCE = Source(
    "kernel-log", "the kernel's log: GPU page faults, resets, Xids, host segfaults",
    kind=KERNEL, markers=MARKERS, anchors=parser_anchors(KERNEL), reads=frozenset({KERNEL}),
    parse=lambda t: parse_kernel_log(t.text, t.name), gather=_gather,
    json_keys=("kernel_events", "other_processes"),
    sections=("Kernel-log faults, decoded", "Kernel-log events around the fault", "Other processes on this machine"))
