"""Kernels named away from the fault line (built, dispatched, launched, tuned, disassembled, named in
the text): candidates of their basis, never more (analyze/mention_claims.py)."""

from __future__ import annotations

from ..analyze.launch_claims import launched_claims
from ..analyze.mention_claims import dispatch_mentions, mention_claims
from ..ingest.kernel_mentions import NAMED, find_mentions
from ..ingest.prefilter import DEBUGGER, KERNEL, RUNTIME
from ..model import Fault
from .source import Source


def _gather(inc, mentions, text):
    inc.mentions.extend(mentions)


def _claims(inc, setting):
    told = {k.kernel for k in inc.running} | {s.kernel for s in inc.stops if s.kernel}
    return launched_claims(inc.debugger, told) + mention_claims(dispatch_mentions(inc.runtime) + inc.mentions)


def _faults(inc) -> list[Fault]:
    """The fault a person's words name beside the kernel, where the evidence states no fault of its
    own: the kind as the text says it (a fact, not a record of any tool)."""
    if inc.faults or inc.stops or inc.debugger.sanitizer or inc.debugger.sanitizer_findings or inc.runtime.device_asserts:
        return []
    out, seen = [], set()
    for m in inc.mentions:
        if m.basis == NAMED and m.fault and m.fault not in seen:
            seen.add(m.fault)
            out.append(Fault(source="text", kind=m.fault, origin=m.origin, kernel=m.kernel,
                             meaning=f"the text says a {m.fault.replace('-', ' ')} happened in {m.kernel}; no tool's "
                                     f"record of it is in the evidence"))
    return out


SOURCE = Source("kernel-mentions", "kernels named away from the fault: built, dispatched, launched, tuned, disassembled, "
                                   "named in the text",
                reads=frozenset({RUNTIME, DEBUGGER, KERNEL}), parse=lambda t: find_mentions(t.text, t.name),
                gather=_gather, faults=_faults, claims=_claims)
