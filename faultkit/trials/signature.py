"""A crash's signature: what kind of crash it was, normalised so equal crashes count together.

Addresses, pids, queue pointers and line numbers differ run to run; the status code, the fault
kind, the kernel (or the first report point when no kernel is named) and the way the process
died do not.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..triage import build
from ..bundle import InputFile, Inputs
from .._signals import exit_words

VOLATILE = re.compile(r"0x[0-9a-fA-F]+|\b\d+\b")


def normalise(text: str) -> str:
    return VOLATILE.sub("#", text).strip()


def crash_signature(trial_dir: Path, exit_code: int | None) -> str:
    files = [InputFile(str(p), p.read_bytes()) for p in sorted(trial_dir.glob("*.log")) if p.is_file()]
    inc = build(Inputs(files=files))
    parts: list[str] = []
    fault = next((f for f in inc.faults if f.source in ("runtime", "kernel-log")), None)
    if fault is not None:
        parts.append(fault.kind + (f" {fault.code_text()}" if fault.code is not None else ""))
    v = inc.verdict
    if v and (v.kernel or v.candidates):
        parts.append(f"kernel {v.kernel or v.candidates[0].kernel}")
    elif inc.report_points:
        parts.append(f"at {normalise(inc.report_points[0].frame.rsplit('/', 1)[-1])}")
    if fault is None:
        seg = next((e for e in inc.kernel_events if e.kind == "host-segfault"), None)
        if seg is not None:
            parts.append(f"host segfault in {seg.fields.get('library') or seg.fields.get('process')}")
    parts.append(exit_words(exit_code))
    return " | ".join(parts)
