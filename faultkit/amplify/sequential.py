"""When an arm may stop: a group-sequential rule with exact tests at each look.

The rule, as the report states it: the experiment has at most N rounds (a round is one trial of
every arm still running, the plain arm included, in a seeded order). After each round r = 1..N
(each a "look"), each running amplifier arm is compared with the plain arm by Fisher's exact test,
two-sided, on the counted trials so far.
- Efficacy: the arm stops, DECIDED, at the first look where p <= t. The per-look threshold t is
  calibrated by exact enumeration: the largest attainable Fisher p-value such that, when both arms
  crash at the same rate q, the probability of ever deciding over the N looks stays under alpha
  for every q (checked on a grid of q with a 2% margin; the tests check a ten times finer grid).
  Fisher's test is conservative at these sizes, so t is close to alpha itself at N = 10 (0.0498)
  and falls slowly (0.029 at N = 20); it is never below alpha / N, the Bonferroni split, which is
  what a look uses when some trial was not counted (the counts of the two arms then differ, and the
  union bound holds whatever the counts).
- Futility (curtailment): the arm stops, UNDECIDABLE, at a look where even the most extreme
  outcomes of every remaining round (all crashes in one arm and none in the other, either way)
  could not give p <= t at round N. Stopping for futility only removes chances to decide, so it
  cannot raise the false-decision rate.
The error rates are shown by exact enumeration and by simulation (tests/test_amplify_stats.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

DECIDED, UNDECIDABLE, RUNNING = "decided", "undecidable", "running"

RULE = ("group-sequential: a look after every round (at most {n} rounds); an amplifier arm stops as decided at "
        "the first look where Fisher's exact test (two-sided) against the plain arm gives p <= {threshold:.2g}, the "
        "per-look threshold calibrated by exact enumeration so that the chance of ever deciding when the arms crash "
        "equally often stays under {alpha} (per arm; across k arms at most k x {alpha}); a look where a trial was "
        "not counted uses alpha/{n} = {bonferroni:.2g} (Bonferroni, valid for any counts); an arm stops as "
        "undecidable when no outcome of the remaining rounds could reach the threshold (curtailment)")
FIXED_RULE = ("fixed design (--no-early-stop): all {n} rounds run, then one look: Fisher's exact test (two-sided) "
              "against the plain arm at alpha = {alpha}")
MAX_CALIBRATED = 60          # beyond this many rounds the enumeration costs seconds: Bonferroni is used
GRID = np.linspace(0.005, 0.995, 199)       # the common crash rates the calibration maximises over
MARGIN = 0.98


@lru_cache(maxsize=1 << 16)
def fisher_p(c1: int, n1: int, c2: int, n2: int) -> float:
    if n1 == 0 or n2 == 0:
        return 1.0
    return float(stats.fisher_exact([[c1, n1 - c1], [c2, n2 - c2]]).pvalue)


@dataclass(frozen=True)
class Look:
    state: str               # DECIDED / UNDECIDABLE / RUNNING
    p: float
    threshold: float


def bonferroni(alpha: float, rounds: int) -> float:
    return alpha / max(1, rounds)


@lru_cache(maxsize=None)
def pvalues(n: int) -> np.ndarray:
    """P[a, b]: Fisher's two-sided p of a/n crashes against b/n, every table at once (for each total,
    the hypergeometric law of a; a table's p sums the tables no more likely than it)."""
    P = np.ones((n + 1, n + 1))
    for t in range(2 * n + 1):
        xs = np.arange(max(0, t - n), min(n, t) + 1)
        pmf = stats.hypergeom.pmf(xs, 2 * n, t, n)
        order = np.sort(pmf)
        cum = np.cumsum(order)
        p = cum[np.searchsorted(order, pmf * (1 + 1e-7), side="right") - 1]
        P[xs, t - xs] = np.minimum(p, 1.0)
    return P


def exact_false_decision(t: float, rounds: int, rates: np.ndarray) -> np.ndarray:
    """For each common crash rate q: the probability that a rule deciding at p <= t on any of the
    looks ever decides, every path of outcomes enumerated (the mass that decided leaves)."""
    q, s = rates, 1 - rates
    dist = np.ones((len(rates), 1, 1))
    total = np.zeros(len(rates))
    for r in range(1, rounds + 1):
        new = np.zeros((len(rates), r + 1, r + 1))
        new[:, :-1, :-1] += dist * (s * s)[:, None, None]
        new[:, 1:, :-1] += dist * (q * s)[:, None, None]
        new[:, :-1, 1:] += dist * (s * q)[:, None, None]
        new[:, 1:, 1:] += dist * (q * q)[:, None, None]
        reject = pvalues(r) <= t
        total += (new * reject).sum(axis=(1, 2))
        dist = new * ~reject
    return total


@lru_cache(maxsize=None)
def calibrated(alpha: float, rounds: int) -> float:
    """The largest attainable p-value t <= alpha whose exact false-decision rate stays under
    alpha x MARGIN at every rate of GRID; never below Bonferroni's alpha / rounds."""
    floor = bonferroni(alpha, rounds)
    if rounds > MAX_CALIBRATED:
        return floor
    cands = sorted({float(x) for r in range(1, rounds + 1) for x in pvalues(r).ravel() if floor < x <= alpha})
    best, lo, hi = floor, 0, len(cands) - 1
    while lo <= hi:             # the rate grows with t: bisect over the attainable values
        mid = (lo + hi) // 2
        if exact_false_decision(cands[mid], rounds, GRID).max() <= alpha * MARGIN:
            best, lo = cands[mid], mid + 1
        else:
            hi = mid - 1
    return best


def threshold(alpha: float, rounds: int, equal_counts: bool = True) -> float:
    return calibrated(alpha, rounds) if equal_counts else bonferroni(alpha, rounds)


def look(arm: tuple[int, int], plain: tuple[int, int], rounds_done: int, rounds: int, alpha: float) -> Look:
    """arm, plain: (crashes, counted trials) so far; rounds_done of at most `rounds`."""
    (ca, na), (cp, np_) = arm, plain
    t = threshold(alpha, rounds, equal_counts=na == np_ == rounds_done)
    p = fisher_p(ca, na, cp, np_)
    if p <= t:
        return Look(DECIDED, p, t)
    left = max(0, rounds - rounds_done)
    if rounds_done >= rounds:
        return Look(UNDECIDABLE, p, t)
    # the most extreme completions, both directions: every remaining arm trial crashes and no plain
    # one does, or the reverse
    up = fisher_p(ca + left, na + left, cp, np_ + left)
    down = fisher_p(ca, na + left, cp + left, np_ + left)
    if min(up, down) > t:
        return Look(UNDECIDABLE, p, t)
    return Look(RUNNING, p, t)


def simulate(p_arm: float, p_plain: float, rounds: int, alpha: float, runs: int, seed: int = 0) -> dict:
    """The rule on `runs` simulated experiments: how often it decides, and after how many rounds."""
    rng = random.Random(seed)
    decided = 0
    used = []
    for _ in range(runs):
        ca = cp = 0
        for r in range(1, rounds + 1):
            ca += rng.random() < p_arm
            cp += rng.random() < p_plain
            res = look((ca, r), (cp, r), r, rounds, alpha)
            if res.state != RUNNING:
                decided += res.state == DECIDED
                used.append(r)
                break
    return {"decided_rate": decided / runs, "mean_rounds": sum(used) / len(used), "runs": runs}


def fixed_n_for_same_decision(arm: tuple[int, int], plain: tuple[int, int], alpha: float = 0.05,
                              max_n: int = 200) -> int | None:
    """Plain trials a fixed design (no looks) needs per arm to reach the same decision at alpha with
    the rates observed: the smallest n whose table at those rates gives p <= alpha -- what the
    report sets the amplifier's wait against."""
    (ca, na), (cp, np_) = arm, plain
    if not na or not np_:
        return None
    ra, rp = ca / na, cp / np_
    for n in range(2, max_n + 1):
        if fisher_p(round(ra * n), n, round(rp * n), n) <= alpha:
            return n
    return None


PLAIN_ALONE_MAX = 1_000_000


def plain_trials_for_crashes(crashes: int, plain: tuple[int, int], alpha: float = 0.05) -> dict | None:
    """What plain trials alone would need for what the decided arm gave: its `crashes` crashes (each a
    bundle to work from), with the same error rate -- the smallest N whose chance of at least that
    many crashes is >= 1 - alpha: N = crashes + the (1 - alpha) quantile of the negative binomial's
    failures. The plain rate is its estimate c/n; when plain crashed 0 of n times, the exact one-sided
    upper bound 1 - alpha^(1/n) (the highest rate 0/n leaves at that error rate), and N is then a
    lower bound ("at least")."""
    cp, n = plain
    if crashes <= 0 or n <= 0:
        return None
    if cp > 0:
        q, basis, at_least = cp / n, f"the plain rate's estimate {cp}/{n}", False
    else:
        q, basis, at_least = 1 - alpha ** (1 / n), (f"the plain rate's one-sided {1 - alpha:.0%} upper bound "
                                                    f"after 0/{n}"), True
    if q >= 1:
        return {"trials": crashes, "rate": 1.0, "basis": basis, "at_least": at_least}
    failures = stats.nbinom.ppf(1 - alpha, crashes, q)
    trials = int(min(crashes + failures, PLAIN_ALONE_MAX))
    return {"trials": trials, "rate": q, "basis": basis, "at_least": at_least}
