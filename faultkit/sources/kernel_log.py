"""The kernel log (dmesg, dmesg -T, journalctl -k): amdgpu VM page faults, ring timeouts, GPU resets,
KFD messages, NVRM Xids, host segfault lines."""

from __future__ import annotations

import re

from ..ingest.kernel_log import parse_kernel_log
from ..ingest.prefilter import KERNEL
from .source import Source, parser_anchors

# Under re.M, `\s` after `^` would run across the newlines that follow and back off at every
# line start: quadratic on blank lines (100 KB of newlines took > 30 s). Inside a line, only
# blanks and tabs.
MARKERS = re.compile(
    r"^(?:\d\d:\d\d:\d\d(?:\.\d+)? |\[[ \t]*\d+\.\d+\]|\[\w{3} [\w ]+\d\d:\d\d:\d\d \d{4}\]|\[[ \t]*\+\d+[.,]\d+\]|\S+ +\d{1,2} \d\d:\d\d:\d\d \S* ?kernel:|"
    r"\d{4}-\d\d-\d\dT\S+ \S+ kernel:)?[ \t]*(?:\[[ \t]*\d+\.\d+\][ \t]*)?(?:amdgpu[ :]|NVRM: |kfd |\[drm|drmn\d|gmc_v\d+_\d+_process_interrupt|"
    r"Evicting PASID|qcm fence|\S+\[\d+\]: segfault at )", re.M)


def _gather(inc, log, text):
    inc.kernel.extend(log)
    inc.kernel.timestamp_style = inc.kernel.timestamp_style or log.timestamp_style


SOURCE = Source(
    "kernel-log", "the kernel's log: GPU page faults, resets, Xids, host segfaults",
    kind=KERNEL, markers=MARKERS, anchors=parser_anchors(KERNEL), reads=frozenset({KERNEL}),
    parse=lambda t: parse_kernel_log(t.text, t.name), gather=_gather,
    json_keys=("kernel_events", "other_processes"),
    sections=("Kernel-log faults, decoded", "Kernel-log events around the fault", "Other processes on this machine"))
