"""The decisive finding: the one claim that narrows the search most, said first in the report.

In order: the agent's map of the faulting process (whose memory the address was: the owner, the
site that allocated or freed it); where the trace's allocations place the address (freed, past the
end, live); else the claim the verdict ranks first, when it is what was in flight at the fault or
the verdict is certain (a debugger's, a core's, a sanitizer's or the driver's stop). The report
renders the sentence it is handed.
"""

from __future__ import annotations

from ..model import Verdict
from .levels import CERTAIN

NARROWS = ("address-owner", "trace-address")      # claims naming no kernel that narrow more than any kernel


def decisive(v: Verdict) -> str | None:
    for kind in NARROWS:
        c = next((c for c in v.claims if c.basis.kind == kind), None)
        if c is not None:
            return c.headline or c.why
    if not v.candidates or not v.candidates[0].claims:
        return None
    c = v.claim(v.candidates[0].claims[0])
    if c.tier == "inferred":
        return "; ".join([c.headline or c.why, *c.notes])
    if v.level == CERTAIN:
        return c.headline or c.why
    return None
