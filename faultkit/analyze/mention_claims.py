"""Kernels named away from the fault line, as candidates of their basis, never more.

A kernel that was built, dispatched, launched, tuned or disassembled, or that a person names beside
a fault, is something to check: nothing in these lines ties it to the fault (judge.claims.BASES
gives each basis the `mentioned` tier and the ceiling `candidates`; a fault that ties a kernel is
its own claim, and a mention of a kernel that claim names is dropped by the judge). A name that
shows it is a device function or a helper (analyze/entry_signs.py) is no kernel and is not put up.

The mentions come from ingest/kernel_mentions.py and, for the AMD_LOG_LEVEL dispatch log, from the
runtime parser's dispatch records: every `ShaderName` kernel but the last, which is the dispatch
log's own claim (analyze/log_claims.py).
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..judge.claims import BASES, Basis, Claim, Identities
from ..judge.names import kernel_key, kernel_name
from ..model import KernelMention, RuntimeLog
from .entry_signs import helper_sign

DISPATCHED, NAMED = "dispatched", "named-in-text"
# A build or a trace can name hundreds of kernels: the last ones before the end of the evidence
# (nearest the fault) are kept, per basis.
MOST = 8
STEP = 0.005           # dispatched: the later the dispatch, the higher it ranks among its basis
# the entry point shows by the format itself (a dispatch row, an entry function, a kernel table)
ENTRY = {"dispatched": True, "launched": True, "built": True, "tuned": True}
# the runtime's own blit kernels (ROCclr's copies and fills): kernels, but a copy's, ranked after the program's
BLIT = re.compile(r"^__amd_rocclr_")
WORDS = {"dispatched": "dispatched", "launched": "launched", "built": "built", "tuned": "tuned",
         "disassembled": "disassembled", "named-in-text": "named in the text"}


def dispatch_mentions(runtime: RuntimeLog) -> list[KernelMention]:
    """The dispatch log's kernels before its last dispatch (that one is the dispatch log's claim)."""
    shown = [d for d in runtime.dispatches if d.source == "shader-name" and d.kernel]
    return [KernelMention(d.origin, d.kernel, DISPATCHED, "ROCclr", "the AMD_LOG_LEVEL dispatch log dispatched it "
                          "(ShaderName)") for d in shown[:-1]]


def shown_name(m: KernelMention) -> str:
    """The name to claim: a name a table cut loses its parameter list, and its template arguments
    too where the cut fell inside them (`void at::native::k<float, at...` -> `at::native::k`)."""
    if not m.cut:
        return m.kernel
    k = kernel_name(m.kernel)
    return (k[:k.index("<")] if k.count("<") != k.count(">") else k).strip()


def mention_claims(mentions: list[KernelMention]) -> list[Claim]:
    by_basis: dict[str, list[KernelMention]] = {}
    for m in mentions:
        if helper_sign(m.kernel, by_shape=not ENTRY.get(m.basis)):
            continue
        if m.cut:
            m = replace(m, kernel=shown_name(m))
        group = by_basis.setdefault(m.basis, [])
        key = kernel_key(m.kernel)
        group[:] = [g for g in group if kernel_key(g.kernel) != key] + [m]     # the latest mention of each
    out: list[Claim] = []
    for basis, group in by_basis.items():
        kept = group[-MOST:]
        left = len(group) - len(kept)
        for rank, m in enumerate(reversed(kept)):          # the latest first
            strength = BASES[basis][1] - (STEP * rank if basis == DISPATCHED else 0.0)
            blit = bool(BLIT.match(m.kernel))
            strength *= 0.5 if blit else 1.0
            why = (f"{m.said} ({m.origin}); {WORDS[basis]}, not seen faulting"
                   + ("; the runtime's own copy or fill kernel, ranked after the program's" if blit else "")
                   + (f"; the fault the text names: {m.fault}" if m.fault else "")
                   + (f"; {left} earlier kernel(s) of this kind not listed" if left and rank == len(kept) - 1 else ""))
            out.append(Claim(m.kernel, Basis(basis, m.producer), why,
                             Identities(engine="shader") if basis != NAMED else Identities(),
                             str(m.origin), strength=round(strength, 3), entry=ENTRY.get(basis)))
    return out
