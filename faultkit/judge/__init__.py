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

from .claims import Basis, Claim, Identities
from .decide import Judgment, judge

__all__ = ["Basis", "Claim", "Identities", "Judgment", "judge"]
