"""What points at the hardware, and the suspicion rule: one table, one rule.

A signature seen on many nodes and GPUs is a software bug (fix the kernel); one GPU with a history of
memory-error or bus events and varied signatures is a hardware suspect (drain it). The Xid numbers
are NVIDIA's catalogue (Xid 48 double-bit ECC, 63/64 row remapping, 74 NVLink, 79 fallen off the bus,
92 high single-bit ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP RPC timeout/error); on AMD
the kernel log's RAS events (uncorrectable errors, ACA banks) and a mode-1/BACO reset with VRAM lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..codes import HARDWARE_XIDS      # the Xid table's hardware column

HARDWARE_EVENT_KINDS = {"ras": "RAS error (amdgpu)", "vram-lost": "VRAM lost at reset (amdgpu)"}

# Thresholds of the rule, named so a reader can find and question them.
SOFTWARE_MIN_NODES = 2          # a signature on at least this many nodes ...
SOFTWARE_MIN_GPUS = 3           # ... and this many GPUs is not one bad card
HARDWARE_MIN_SIGNATURES = 2     # a GPU whose incidents differ and that shows hardware signs


def hardware_signs(faults: list, kernel_events: list) -> dict:
    """GPU (as the report names it; None where the event names none) -> the hardware signs seen."""
    signs: dict = {}
    for f in faults:
        if not isinstance(f, dict):
            continue
        xid = (f.get("detail") or {}).get("xid")
        if xid in HARDWARE_XIDS:
            signs.setdefault(_gpu(f), set()).add(f"xid-{xid}")
    for e in kernel_events:
        if isinstance(e, dict) and e.get("kind") in HARDWARE_EVENT_KINDS:
            signs.setdefault(_gpu(e), set()).add(str(e["kind"]))
        if isinstance(e, dict) and "vram lost" in str(e.get("text", "")).lower():
            signs.setdefault(_gpu(e), set()).add("vram-lost")
    return signs


def _gpu(item: dict):
    g = item.get("gpu")
    return str(g) if g is not None else None


@dataclass(frozen=True)
class Suspicion:
    kind: str                 # "software", "hardware" or "undecided"
    reasons: tuple[str, ...]
    drain: tuple[str, ...] = ()   # node/GPU pairs to drain: only where hardware is suspected


def judge_signature(incidents: int, nodes: int, gpus: int, gpu_histories: list[tuple[str, str, int, set]]) -> Suspicion:
    """`gpu_histories`: for each (node, gpu) this signature touched, the number of distinct signatures
    seen on that GPU and the hardware signs it showed."""
    suspects = [(n, g, sigs, hw) for n, g, sigs, hw in gpu_histories if hw]
    reasons = []
    if nodes >= SOFTWARE_MIN_NODES and gpus >= SOFTWARE_MIN_GPUS and len(suspects) < len(gpu_histories):
        reasons.append(f"the same signature on {nodes} nodes and {gpus} GPUs: a bug in the software, not one card")
        if suspects:
            reasons.append(f"{len(suspects)} of those GPUs also show hardware signs: check them apart")
        return Suspicion("software", tuple(reasons))
    hard = [(n, g, sigs, hw) for n, g, sigs, hw in suspects if sigs >= HARDWARE_MIN_SIGNATURES or nodes == 1]
    if hard:
        for n, g, sigs, hw in hard:
            reasons.append(f"{n} GPU {g}: {', '.join(sorted(hw))} and {sigs} different signature(s)")
        return Suspicion("hardware", tuple(reasons), tuple(f"{n}:{g}" for n, g, _, _ in hard))
    if nodes == 1 and gpus == 1 and incidents > 1:
        return Suspicion("undecided", (f"{incidents} incidents, all on one GPU and no hardware sign: run the "
                                       "same job on another GPU to tell a bad card from a bug",))
    return Suspicion("undecided", (f"{incidents} incident(s) on {nodes} node(s), {gpus} GPU(s): too few to tell",))


def hardware_sign_of_kind(kind: str) -> bool:
    """A kind the node agent counts (`ras`, `vram-lost`, `xid-79`) is a hardware sign of the table above."""
    if kind in HARDWARE_EVENT_KINDS:
        return True
    return kind.startswith("xid-") and kind[4:].isdigit() and int(kind[4:]) in HARDWARE_XIDS


def judge_incident(node: str, records: list, gpus: list[str], kinds: list[str] = ()) -> Suspicion:
    """One node's incident judged by the rule the registry applies to a signature (judge_signature),
    so that the agent's word (its summary, the Prometheus `suspect` label, the Slurm drain) is the
    registry's word for the same evidence. `records`: the incident's registry records; where there
    are none (triage off), the hardware signs among the kinds the agent counted."""
    seen: dict[str, tuple[set, set]] = {}
    for r in records:
        sigs, hw = seen.setdefault(r.gpu or "", (set(), set()))
        sigs.add(r.signature)
        hw |= {s for s in (r.hardware or "").split(",") if s}
    if not records:
        signs = {k for k in kinds if hardware_sign_of_kind(k)}
        for g in gpus or [""]:
            seen.setdefault(g, (set(), set()))[1].update(signs)
    histories = [(node, g or "GPU", len(sigs), hw) for g, (sigs, hw) in sorted(seen.items())]
    return judge_signature(max(len(records), 1), 1, len(histories), histories)
