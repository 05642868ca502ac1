"""Claims -> incidents -> verdicts: the one place where certainty is decided (DESIGN.md's levels).

Per incident: each claim is corroborated against the incident's faults and held to the rules
(rules.py), which set the level it may reach. Claims naming the same kernel make one candidate.
Then, in order:
- a kernel a tool watched fault (a debugger or core stop, a sanitizer, the driver's report) at
  `certain` makes the verdict certain; at `likely` (an inexact PC, a name that may be a device
  function, ...) likely;
- else a claim allowed `likely` (a wave dump, the trace's one plausible suspect, the one kernel
  a hung GPU was running) makes its kernel likely when no claim of its tier or a higher one,
  left standing by corroboration, names another kernel;
- else the claims are candidates, ranked by strength;
- else unknown, with what the faults say and what could still be opened.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..codes import ADDRESS_FAULT_CODES
from ..model import HANG_SYMPTOMS, Candidate, Fault, Verdict
from .claims import TIERS, Claim
from .corroborate import ALSO_NAMED, corroborate
from .decisive import decisive
from .incidents import FaultGroup, assign, split
from .levels import CANDIDATES, CERTAIN, LIKELY, RANK, UNKNOWN, lower
from .names import kernel_key
from .rules import allowed

MENTIONED = "mentioned"       # the tier of kernels named away from the fault (judge.claims.BASES)
ENDED = {"hang": "the target printed nothing for the --hang-after time",
         "timeout": "the capture reached its --timeout"}


@dataclass
class Judgment:
    """The verdict over all claims and the incidents it was judged per."""
    verdict: Verdict
    incidents: list[FaultGroup]


def judge(claims: list[Claim], faults: list[Fault], ended_by: str | None = None) -> Judgment:
    """`ended_by`: how a capture ended (hang, timeout), which says what a snapshot of a GPU means."""
    numbered: dict[str, int] = {}
    for c in claims:                  # ids in the order the sources handed them in: stable across incidents
        numbered[c.basis.kind] = numbered.get(c.basis.kind, 0) + 1
        c.id = f"{c.basis.kind}-{numbered[c.basis.kind]}"
    groups = split(faults)
    pseudo = not groups
    if pseudo:
        groups = [FaultGroup([], [])]
    assign(claims, groups)
    for g in groups:
        g.verdict = decide(g.claims, g.faults, ended_by)
        g.verdict.decisive = decisive(g.verdict)
    return Judgment(groups[0].verdict, [] if pseudo else groups)


@dataclass
class _Cand:
    """A kernel being judged with the claims that name it."""
    kernel: str
    claims: list[Claim]
    score: float = 0.0

    @property
    def level(self) -> str:
        return max((c.level for c in self.claims), key=RANK.__getitem__)

    def best(self, tier: str | None = None) -> Claim:
        pool = [c for c in self.claims if tier is None or c.tier == tier] or self.claims
        return max(pool, key=lambda c: (RANK[c.level], c.strength))

    @property
    def why(self) -> str:
        return "; also: ".join(c.text for c in self.claims)


def _candidates(claims: list[Claim]) -> list[_Cand]:
    """Claims naming one kernel make one candidate, strongest claim first; evidence of another
    tier naming the same kernel adds ALSO_NAMED."""
    by_key: dict[str, _Cand] = {}
    for c in claims:
        key = kernel_key(c.kernel) if c.named else c.kernel
        cand = by_key.get(key)
        if cand is None:
            by_key[key] = _Cand(c.kernel, [c])
        else:
            cand.claims.append(c)
    out = list(by_key.values())
    for cand in out:
        cand.claims.sort(key=lambda c: -c.strength)
        cand.score = cand.claims[0].strength + (ALSO_NAMED if len({c.tier for c in cand.claims}) > 1 else 0.0)
        cand.score = round(min(cand.score, 1.0), 3)
    return out


def decide(claims: list[Claim], faults: list[Fault], ended_by: str | None = None) -> Verdict:
    for c in claims:
        if c.tier == "snapshot" and ended_by != "hang":
            # One kernel across every dump of a capture that ended on silence can be the hang; after
            # a --timeout or a dump taken by hand the GPU may just have been busy.
            c.ceiling = lower(c.ceiling, CANDIDATES)
        if c.kernel is not None:
            corroborate(c, faults)
        c.level = allowed(c)
    named = [c for c in claims if c.kernel is not None]
    # A snapshot of a GPU taken without an exception speaks only where nothing faulted and nothing
    # else names a kernel (a kernel merely mentioned elsewhere does not silence it).
    if faults or any(c.tier not in ("snapshot", MENTIONED) for c in named):
        named = [c for c in named if c.tier != "snapshot"]
    # A mention of a kernel that other evidence names adds nothing to that evidence.
    told = {kernel_key(c.kernel) for c in named if c.tier != MENTIONED and c.named}
    named = [c for c in named if c.tier != MENTIONED or kernel_key(c.kernel) not in told]
    cands = _candidates(named)
    observed = [x for x in cands if any(c.tier == "observed" and RANK[c.level] >= RANK[LIKELY] for c in x.claims)]
    if observed:
        return _observed(claims, cands, observed)
    cands.sort(key=lambda x: -x.score)
    if not cands:
        return _unknown(claims, faults)
    return _from_reports(claims, cands, ended_by)


TRACE_CANDIDATES = 10        # a busy trace leaves hundreds of suspects: the verdict lists its strongest


def _verdict(level: str, kernel: str | None, why: str, cands: list[_Cand], claims: list[Claim],
             notes: dict[int, str] | None = None) -> Verdict:
    inferred = [x for x in cands if all(c.tier == "inferred" for c in x.claims)]
    cands = [x for x in cands if x not in inferred[TRACE_CANDIDATES:]]
    ordered = [c for x in cands for c in x.claims] + [c for c in claims if c.kernel is None]
    out = [Candidate(x.kernel, x.score, x.why + (notes or {}).get(id(x), ""), [c.id for c in x.claims])
           for x in cands]
    _tie(cands, out)
    return Verdict(level, kernel, why, out, ordered)


def _tie(cands: list[_Cand], out: list[Candidate]) -> None:
    """An unnamed launch whose thread's dispatch order names a kernel, and that kernel's own
    candidate, are probably one launch: each says so."""
    keys = {kernel_key(x.kernel): i for i, x in enumerate(cands) if all(c.named for c in x.claims)}
    for i, x in enumerate(cands):
        alias = next((c.alias for c in x.claims if not c.named and c.alias), None)
        j = keys.get(kernel_key(alias)) if alias else None
        if j is None:
            continue
        out[i].why += f"; probably the same launch as candidate {j + 1} ({alias}), by the thread's dispatch order"
        out[j].why += (f"; probably the same launch as candidate {i + 1}, whose thread's dispatch order names this "
                       f"kernel")


def _observed(claims: list[Claim], cands: list[_Cand], observed: list[_Cand]) -> Verdict:
    exact = [x for x in observed if any(c.tier == "observed" and c.level == CERTAIN for c in x.claims)]
    approx = [x for x in observed if x not in exact]
    chosen = exact or approx
    for x in chosen:
        x.score = max(x.score, x.best("observed").strength)
    rest = sorted((x for x in cands if x not in observed), key=lambda x: -x.score)
    notes = {id(x): "; named only by logs, not by the debugger or sanitizer" for x in rest
             if not any(c.tier == "observed" for c in x.claims)}
    top = chosen[0]
    best = top.best("observed")
    if len(chosen) > 1:
        why = (f"{len(chosen)} kernels stopped in a debugger or sanitizer (several processes or waves faulted); "
               f"the first is {top.kernel}: {top.why}")
    else:
        why = top.why
    level = CERTAIN if exact else LIKELY
    if not exact:
        why += ". Not 'certain': " + "; ".join(best.limits)
    return _verdict(level, top.kernel, why, chosen + (approx if exact else []) + rest, claims, notes)


def _standing(c: Claim) -> bool:
    return c.plausible is not False


def _from_reports(claims: list[Claim], cands: list[_Cand], ended_by: str | None) -> Verdict:
    likely = next((x for x in cands if x.level == LIKELY), None)
    tiers = {c.tier for x in cands for c in x.claims}
    snapshot = "snapshot" in tiers and tiers <= {"snapshot", MENTIONED}
    ended = ENDED.get(ended_by or "", "the dump was taken")
    if likely is not None:
        best = likely.best()
        rank = TIERS[best.tier]
        # a device function of an unnamed kernel names no other kernel: it may well be inside this one
        contested = [x for x in cands if x is not likely
                     and any(TIERS[c.tier] >= rank and _standing(c) and (c.named or not c.device_function)
                             for c in x.claims)]
        if not contested:
            if best.tier == "inferred":
                why = f"the trace leaves one plausible in-flight kernel: {likely.why}"
            elif best.tier == "snapshot":
                why = (f"no GPU exception; {ended}, and every GPU process's core dump shows only this kernel "
                       f"running: {likely.why}")
            else:
                why = (f"{best.why}; no other kernel is named by the evidence. Not 'certain': "
                       + "; ".join(best.limits))
            return _verdict(LIKELY, likely.kernel, why, cands, claims)
    if snapshot:
        why = (f"no GPU exception; {ended}; the GPU core dumps show these kernels running (a hung server's kernel "
               f"is among them; a healthy one was just busy)")
        return _verdict(CANDIDATES, None, why, cands, claims)
    top = cands[0]
    best = top.best()
    traced = [c for c in claims if c.tier == "inferred" and c.kernel is not None]
    where = "from logs and trace" if traced and any(c.tier != "inferred" for c in claims if c.kernel) else \
        "from the trace" if traced else "named by the logs"
    why = f"{len(cands)} candidate(s) {where}, none confirmed by a debugger stop"
    if traced:
        why += f", {sum(1 for c in traced if c.plausible)} plausible in the trace"
    why += f"; the first is ranked highest because: {best.why.split(';')[0]}"
    if RANK[best.ceiling] > RANK[CANDIDATES] and best.limits:
        why += f"; not '{best.ceiling}': " + "; ".join(best.limits)
    return _verdict(CANDIDATES, None, why, cands, claims)


HOST = ("host-stop", "hang-stacks", "hang-stuck", "hang-blocked", "watchdog-timeout")   # claims that name no kernel, in words


def _unknown(claims: list[Claim], faults: list[Fault]) -> Verdict:
    """No claim names a kernel. Where nothing faulted, a hang the stacks show is the verdict at the
    level its claim was allowed (a likely hang is a likely verdict, with no kernel named)."""
    host = [c for c in claims if c.basis.kind in HOST]
    cores = [c for c in claims if c.basis.kind == "unopened-core"]
    hang = next((c for c in host if c.basis.kind == "hang-stuck" and c.level == LIKELY), None)
    if cores:                    # a core on disk means a runtime saw a GPU exception
        why = cores[0].why
    elif hang is not None and all(f.kind == "collective-timeout" for f in faults):   # a timeout is the hang's symptom
        return _verdict(LIKELY, None, hang.why, [], claims)
    elif host:
        why = host[-1].why
    else:
        why = _fault_words(faults)
    return _verdict(UNKNOWN, None, why, [], claims)


def _fault_words(faults: list[Fault]) -> str:
    """What the faults say where no claim names a kernel."""
    kernel_log = [f for f in faults if f.source == "kernel-log"]
    if any(f.engine == "copy" for f in kernel_log) and not any(f.engine == "shader" for f in kernel_log):
        return ("the kernel log says the SDMA copy engine faulted: a memory copy, not a kernel, touched the address; "
                "no copy or kernel is named by the evidence")
    if faults and all(f.kind == "watchdog-stuck" for f in faults):
        return ("only a stuck NCCL watchdog: a CUDA/NCCL call on the host hangs (the heartbeat monitor saw no progress); "
                "no GPU fault or kernel is named")
    if faults and all(f.kind in HANG_SYMPTOMS for f in faults):
        return ("only collective timeouts: a rank stopped joining collectives (hung in a kernel, died or stuck on "
                "the host); no GPU fault or kernel is named")
    if any(_is_gpu_error(f) for f in faults):
        return ("the evidence shows a GPU error but names no kernel: runtime and kernel logs report the fault, not "
                "the kernel that caused it")
    return "no GPU fault was found in the inputs"


def _is_gpu_error(f: Fault) -> bool:
    return (f.kind in ("memory-access-fault", "queue-error", "gpu-hang", "memory-in-use")
            or f.kind.startswith(("page-fault", "xid-")) or f.kind.endswith("-error") or f.hsa_code in ADDRESS_FAULT_CODES)
