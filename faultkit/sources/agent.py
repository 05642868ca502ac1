"""The in-process agent's black box: the allocator's events, the faulting process's memory map and
its threads' stacks, read from its rings after the process died."""

from __future__ import annotations

from ..analyze.placement import NONE, PLACED
from ..judge import Basis, Claim, Identities
from ..export import black_box
from .source import Source



def _claims(inc, setting):
    """The owner of the fault address in the faulting process's own map: the finding that narrows most."""
    bb = inc.black_box
    o = next((o for o in bb.owners if o.verdict in OWNED and o.doubt is None), None) if bb is not None else None
    if o is None:
        return []
    return [Claim(None, Basis("address-owner", "faultkit agent"), o.text, Identities(pid=o.pid, page=o.address >> 12),
                  headline=o.text)]


OWNED = (*PLACED, NONE)     # a verdict of the map (no-map: it says nothing)

SOURCE = Source("agent", "the in-process agent's black box: who owned the fault address", claims=_claims,
                section=black_box.section_parts,
                to_json=lambda inc: {"black_box": inc.black_box.to_json() if inc.black_box else None},
                json_keys=("black_box",), sections=("Black box: the fault address's owner and every thread at the abort",))
