"""The judgment: the one place where certainty is decided.

Analyses (faultkit.analyze) turn records into claims (claims.Claim); `judge(claims, faults)` groups
the faults into incidents (one per faulting process), gives each incident the claims of its
process, corroborates every claim against that incident's faults (corroborate.py: one rule, one
table of weights), holds it to the rules (rules.py: entry points, producer versions,
self-contradiction, a program that went on) and decides each verdict (decide.py). Only this
package builds `model.Verdict` objects (tests/test_architecture.py walks the code for it).

Adding a new evidence source (an allocation-owner finding, a hang stack, a collective dump ...):
1. Add its kind to `claims.BASES` with the ceiling the evidence can ever support, its strength and
   its tier (observed: a tool watched the fault; reported: a producer printed a name; inferred:
   faultkit deduced it; snapshot: a GPU's state without a fault), and the identities it `needs`.
   Where its meaning changed with the producer's version, add a row to `rules.VERSION_CEILINGS`.
2. Write an analysis that takes its records and returns `Claim`s: the kernel it names (or None),
   `Basis(kind, producer, version)`, the why in words with its file:line, and every identity it
   carries (`Identities`: pid, node/gpu, queue/stream, page, engine, time) - unknown stays None,
   never guessed. Set `entry=None` where the name may be a device function, `contradiction` /
   `went_on` where the evidence itself says so.
3. Add its claims to the list triage passes to `judge` (triage.build). Nothing in decide.py changes.
"""

from typing import TYPE_CHECKING

# Loaded on first use (PEP 562): `faultkit --help` reads only judge.levels (the --fail-on choices),
# and importing the package must not build the judgment's model and rules for that.
_LAZY = {"Basis": "claims", "Claim": "claims", "Identities": "claims", "Judgment": "decide", "judge": "decide"}

if TYPE_CHECKING:
    from .claims import Basis, Claim, Identities
    from .decide import Judgment, judge


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Basis", "Claim", "Identities", "Judgment", "judge"]
