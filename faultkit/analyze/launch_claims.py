"""Kernels a debugger lists as launched, away from any fault line: candidates, never more.

cuda-gdb's `info cuda kernels` lists every kernel running on the device with its invocation
(`render(nthreads=307200, ...)`): launched and running, not seen faulting; a fault that ties one of
them (a stop in it) is its own claim (debug_stop)."""

from __future__ import annotations

import re

from ..judge.claims import Basis, Claim, Identities
from ..model import DebuggerLog

# the invocation's function name (template arguments kept), its argument values off: cuda-gdb prints
# `render(nthreads=307200, ...)`, and in NVIDIA's manual `acos_main parms=...`
NAME = re.compile(r"^(?:[^(\s<]|<[^>]*>)+")


def launched_claims(log: DebuggerLog, told: set[str] = frozenset()) -> list[Claim]:
    """`told`: kernels the incident already has a better word for (a stop in them, a user-triggered
    core's running kernel): their rows add nothing and would crowd that claim out."""
    out, seen = [], set(told)
    for k in log.cuda_kernels:
        m = NAME.match(k.name.strip())
        name = m.group(0).strip() if m else None
        if not name or name in seen:
            continue
        seen.add(name)
        out.append(Claim(name, Basis("launched", "cuda-gdb"),
                         f"cuda-gdb's 'info cuda kernels' lists it launched: kernel {k.kernel_id}, grid {k.grid}, "
                         f"device {k.device}, {k.status}, grid {k.grid_dim} block {k.block_dim} ({k.origin}); "
                         f"launched, not seen faulting", Identities(engine="shader"), str(k.origin)))
    return out
