"""The one corroboration rule: a claim and a fault agree only where every identity both carry
agrees; an identity one of them lacks is unknown, which is neither agreement nor disagreement.

A claim is compared with the incident's faults other than the record it came with (a runtime
line cannot corroborate itself). Each identity the two share adds its weight when it agrees and
multiplies the claim's strength by its weight when it does not; the table below is the only
place these numbers live.
"""

from __future__ import annotations

from ..model import Fault
from .claims import Claim

#            identity: (added when it agrees, factor when it disagrees)
WEIGHTS: dict[str, tuple[float, float]] = {
    "pid":    (0.0, 0.5),     # another process's evidence does not name this process's kernel
    "node":   (0.2, 0.3),     # work on another GPU did not fault on this one
    "queue":  (0.0, 0.5),
    "page":   (0.0, 0.7),     # another page: another access, maybe another fault
    "engine": (0.1, 0.3),     # a copy-engine fault is not a kernel's, and the reverse
}
ALSO_NAMED = 0.05             # another tier of evidence names the same kernel
LATEST = 0.05                 # the latest of the trace's suspects
CAP = {"inferred": 0.89}      # an inference never reaches the strength of what a tool saw; others cap at 1.0
ENGINES = ("shader", "copy")  # the engines a kernel or a copy can be; others (CP, firmware) are not compared
SOURCE_WORDS = {"runtime": "runtime log", "kernel-log": "kernel log", "debugger": "debugger",
                "sanitizer": "sanitizer", "tracer": "trace"}


def incident_identities(faults: list[Fault], exclude: str | None = None) -> dict[str, dict]:
    """identity -> {value: the sources that carry it}."""
    out: dict[str, dict] = {k: {} for k in WEIGHTS}
    for f in faults:
        if exclude is not None and str(f.origin) == exclude:
            continue                # the record the claim came with does not corroborate it
        src = f.source
        values = {"pid": f.pid, "node": f.node, "queue": f.detail.get("queue") if f.detail else None,
                  "page": f.address >> 12 if f.address is not None else None,
                  "engine": f.engine if f.engine in ENGINES and f.source == "kernel-log" else None}
        for k, v in values.items():
            if v is not None:
                out[k].setdefault(v, set()).add(src)
    return out


def _show(identity: str, value) -> str:
    return f"0x{value << 12:x}" if identity == "page" else str(value)


def corroborate(claim: Claim, faults: list[Fault]) -> None:
    """Compare the claim with the faults; record what agreed, what did not, and adjust its strength."""
    ids = incident_identities(faults, claim.origin)
    agree: dict[str, list[str]] = {}
    disagree: dict[str, list[str]] = {}
    missing: list[str] = []
    for identity, (plus, factor) in WEIGHTS.items():
        mine = getattr(claim.ids, identity)
        theirs = ids[identity]
        if not theirs:
            continue
        if mine is None:
            if identity in claim.needs:
                missing.append(identity)
            continue
        sources = sorted(theirs[mine] if mine in theirs else {s for srcs in theirs.values() for s in srcs})
        where = SOURCE_WORDS.get(sources[0], sources[0])
        if mine in theirs:
            claim.strength += plus
            agree.setdefault(where, []).append(_agree_words(identity, mine, claim))
        else:
            claim.strength *= factor
            disagree.setdefault(where, []).append(_disagree_words(identity, mine, sorted(theirs)))
    for where, words in agree.items():
        if where not in disagree:
            claim.notes.append(f"consistent with the {where}: " + ", ".join(words))
    for where, words in disagree.items():
        claim.notes.append(f"not corroborated by the {where}: " + "; ".join(words))
    for identity in missing:
        values = sorted(ids[identity])
        claim.notes.append(f"its {'GPU' if identity == 'node' else identity} is unknown, not compared with the "
                           f"faulting {identity} {values} (unknown is not agreement)")
    claim.strength = round(min(claim.strength, CAP.get(claim.tier, 1.0)), 3)
    claim.plausible = not disagree and not missing
    if disagree:
        claim.limits.append("its identities disagree with the fault's: "
                            + "; ".join(w for words in disagree.values() for w in words))
    if missing:
        claim.limits.append("what it ran on is unknown, so it cannot be matched with the fault")


def _agree_words(identity: str, value, claim: Claim) -> str:
    if identity == "pid":
        return f"the same process (pid {value})"
    if identity == "node":
        return f"on the faulting GPU (node {value})"
    if identity == "page":
        return f"the same page ({_show('page', value)})"
    if identity == "engine":
        return (f"a {value} {'memory client' if value == 'shader' else 'engine'} faulted, as the "
                f"{'kernel' if value == 'shader' else 'copy'} would")
    return f"the same {identity} ({value})"


def _disagree_words(identity: str, value, theirs: list) -> str:
    if identity == "pid":
        return f"from pid [{value}], the fault from pid {theirs}: another process's evidence does not name this " \
               f"fault's kernel"
    if identity == "node":
        return f"on node {value}, not the faulting node {theirs}"
    if identity == "engine":
        if "copy" in theirs:
            return "the kernel log says the copy engine (SDMA) faulted, not a shader"
        return f"the kernel log blames the {'/'.join(theirs)} engine, not the {value} engine"
    return f"{identity} {_show(identity, value)}, the fault's {', '.join(_show(identity, t) for t in theirs)}"
