"""The rules that keep a claim from saying more than its evidence can (issue 22, item 4).

Each rule lowers the level a claim may reach and says why; none raises one.
- A kernel is a device entry point: a name that may be a device function is not certain.
- The producer's version sets the ceiling (VERSION_CEILINGS).
- A report that contradicts itself is a candidate.
- A fault that did not stop the program is a finding to check, a candidate.
- Corroboration that disagrees (or cannot match an identity the basis needs) leaves a candidate.
"""

from __future__ import annotations

from .claims import Claim
from .levels import CANDIDATES, CERTAIN, LIKELY, RANK, lower

# Evidence whose meaning changed with its producer's version: (basis kind) -> (the ceiling from
# `since` on, since, why the older ones are lower). `since` None: no release is known to carry
# the change, so every version (and an unknown one) reads as the older.
VERSION_CEILINGS: dict[str, tuple[str, tuple[int, ...] | None, str]] = {
    # ROCclr's handler walked every queue and named the kernel of whichever one it scanned; the
    # per-queue VM-fault state (HSA_AMD_QUEUE_INFO_VM_FAULT_*, rocm-systems PR 4705, merged April
    # 2026) lets it name only faulted queues. No ROCm release notes seen here name that change.
    "rocclr-memory-fault": (LIKELY, None,
                            "ROCclr's 'Memory Fault Error' names the kernel of whichever queue it scanned, not "
                            "necessarily the faulting one, in every ROCm release known here (queue-accurate only "
                            "with per-queue VM-fault state, rocm-systems PR 4705)"),
}


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = []
    for p in text.strip().split("."):
        digits = "".join(ch for ch in p if ch.isdigit()) if p[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def version_ceiling(kind: str, version: str | None) -> tuple[str | None, str | None]:
    """The ceiling a producer's version allows for this kind of evidence (None: the basis's own),
    and why a lower one applies."""
    rule = VERSION_CEILINGS.get(kind)
    if rule is None:
        return None, None
    ceiling, since, why = rule
    v = version_tuple(version)
    if since is not None and v is not None and v >= since:
        return ceiling, None
    return None, why + (f"; this runtime is {version}" if version else "; the runtime's version is unknown")


def allowed(c: Claim) -> str:
    """The highest level this claim may support; the reasons go to c.limits."""
    level = c.ceiling
    if c.ceiling_note:
        c.limits.append(c.ceiling_note)
    raised, why = version_ceiling(c.basis.kind, c.basis.version)
    if raised is not None and RANK[raised] > RANK[level]:
        level = raised
    elif why:
        c.limits.append(why)
    if level == CERTAIN and c.entry is not True:
        level = LIKELY
        c.limits.append("the name may be a device function called by the kernel, not the launched entry point "
                        "(no launch frame, dispatch row or kernel symbol shows it)")
    if c.contradiction:
        level = lower(level, CANDIDATES)
        c.limits.append(f"the report contradicts itself: {c.contradiction}")
    if c.went_on:
        level = lower(level, CANDIDATES)
        c.limits.append(f"the program went on after it ({c.went_on}): a finding to check, not the crash site")
    if c.plausible is False:
        level = lower(level, CANDIDATES)
    if not c.named:
        level = lower(level, CANDIDATES)
    return level
