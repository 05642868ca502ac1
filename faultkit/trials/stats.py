"""Exact statistics for crash-rate experiments.

Tests and intervals come from scipy.stats; the power of Fisher's test is computed here by
enumerating every pair of binomial outcomes, because a normal approximation is useless at the
10-30 runs per arm these experiments can afford.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats


# The test's sidedness, chosen once per experiment (`trials plan`/`trials run --alternative`), recorded
# in plan.json and used by its report. "greater": the arm named first is expected to crash more (a
# base against its fix); "two-sided": a difference either way.
ALTERNATIVES = ("greater", "two-sided")
DEFAULT_ALTERNATIVE = "greater"
# plan.json written before the choice was recorded: its reports tested two-sided
UNRECORDED_ALTERNATIVE = "two-sided"


def alternative_words(alternative: str, first: str = "the first arm", second: str = "the second") -> str:
    return (f"one-sided: {first} crashes more often than {second}" if alternative == "greater"
            else "two-sided")


@dataclass
class ArmRate:
    arm: str
    crashes: int
    trials: int
    rate: float
    exact_ci: tuple[float, float]    # Clopper-Pearson, 95%
    wilson_ci: tuple[float, float]   # Wilson score, 95%


def arm_rate(arm: str, crashes: int, trials: int, confidence: float = 0.95) -> ArmRate:
    if trials == 0:
        return ArmRate(arm, 0, 0, float("nan"), (0.0, 1.0), (0.0, 1.0))
    res = stats.binomtest(crashes, trials)
    cp = res.proportion_ci(confidence_level=confidence, method="exact")
    wi = res.proportion_ci(confidence_level=confidence, method="wilson")
    return ArmRate(arm, crashes, trials, crashes / trials, (cp.low, cp.high), (wi.low, wi.high))


def _table(c1: int, n1: int, c2: int, n2: int) -> list[list[int]]:
    return [[c1, n1 - c1], [c2, n2 - c2]]


def fisher(c1: int, n1: int, c2: int, n2: int, alternative: str = "two-sided") -> float:
    """Fisher's exact test. alternative 'greater': arm 1 crashes more often than arm 2."""
    return float(stats.fisher_exact(_table(c1, n1, c2, n2), alternative=alternative).pvalue)


# The exact computations cost the square of the trials per arm (Boschloo's test: memory too, 5 TiB at
# a million, 25 s at 500 here; the power: a table of every outcome pair). Past these sizes Boschloo's
# test is not computed (Fisher's stands: at such sizes they agree) and a plan's power is not searched.
BOSCHLOO_MAX_N = 150
MAX_N = 400


def boschloo(c1: int, n1: int, c2: int, n2: int, alternative: str = "two-sided") -> float | None:
    """Boschloo's exact unconditional test: more power than Fisher's at these sizes; None past
    BOSCHLOO_MAX_N trials in an arm."""
    if n1 == 0 or n2 == 0:
        return 1.0
    if max(n1, n2) > BOSCHLOO_MAX_N:
        return None
    return float(stats.boschloo_exact(_table(c1, n1, c2, n2), alternative=alternative, n=64).pvalue)


@lru_cache(maxsize=None)
def _rejects(c1: int, n1: int, c2: int, n2: int, alpha: float, alternative: str) -> bool:
    return fisher(c1, n1, c2, n2, alternative) <= alpha


@lru_cache(maxsize=64)
def _rejection_region(n1: int, n2: int, alpha: float, alternative: str) -> np.ndarray:
    """R[x1, x2]: Fisher's test rejects the table (x1 of n1, x2 of n2 crashed). Computed for all
    tables at once: given the total t = x1 + x2, x1 is hypergeometric, and the p-value of each x1
    is a sum over that distribution (the same p-values scipy's fisher_exact gives, one by one)."""
    region = np.zeros((n1 + 1, n2 + 1), dtype=bool)
    for t in range(n1 + n2 + 1):
        lo, hi = max(0, t - n2), min(n1, t)
        xs = np.arange(lo, hi + 1)
        pmf = stats.hypergeom.pmf(xs, n1 + n2, t, n1)
        if alternative == "greater":
            p = np.cumsum(pmf[::-1])[::-1]                       # P(X >= x)
        elif alternative == "less":
            p = np.cumsum(pmf)                                   # P(X <= x)
        else:                                                    # two-sided: tables as or less likely
            order = np.sort(pmf)
            cum = np.cumsum(order)
            p = cum[np.searchsorted(order, pmf * (1 + 1e-7), side="right") - 1]
        region[xs, t - xs] = np.minimum(p, 1.0) <= alpha
    return region


def power(p1: float, p2: float, n1: int, n2: int | None = None, alpha: float = 0.05,
          alternative: str = "greater") -> float:
    """Probability that Fisher's test rejects at `alpha` when the true crash rates are p1, p2:
    the sum over every outcome (x1, x2) of P(x1) P(x2) [p(x1, x2) <= alpha]."""
    n2 = n1 if n2 is None else n2
    pmf1 = stats.binom.pmf(np.arange(n1 + 1), n1, p1)
    pmf2 = stats.binom.pmf(np.arange(n2 + 1), n2, p2)
    return float(pmf1 @ _rejection_region(n1, n2, alpha, alternative) @ pmf2)


SAWTOOTH = 8      # the exact power rises with n, but saws: an n this far below a reaching one may reach too


def trials_for_power(p1: float, p2: float, target: float = 0.9, alpha: float = 0.05,
                     alternative: str = "greater", max_n: int = MAX_N) -> tuple[int | None, float]:
    """Smallest n per arm whose exact power reaches `target` (None if not within max_n). Each n costs
    the square of n, so n is not tried one by one (close rates took minutes to say 'not within 400'):
    doubled until the power reaches the target, then halved down to the smallest n that does, and the
    few below it tried one by one."""
    no_effect = (p1 <= p2 if alternative == "greater" else p1 >= p2 if alternative == "less" else p1 == p2)
    if no_effect:
        # No difference in the tested direction: the test rejects at most alpha of the time, at any n.
        return None, power(p1, p2, 15, 15, alpha, alternative)

    def pw(n: int) -> float:
        return power(p1, p2, n, n, alpha, alternative)
    lo, hi = 1, 2
    best = pw(hi)
    while best < target:
        if hi >= max_n:
            return None, best
        lo, hi = hi, min(2 * hi, max_n)
        best = pw(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = pw(mid)
        if p >= target:
            hi, best = mid, p
        else:
            lo = mid
    for n in range(max(2, hi - SAWTOOTH), hi):
        p = pw(n)
        if p >= target:
            return n, p
    return hi, best


def metric_compare(a: list[float], b: list[float]) -> dict:
    """The second arm's per-trial figure against the first's: the change of the medians and
    Mann-Whitney's U test (no normality assumed; exact for small samples without ties)."""
    ma, mb = float(np.median(a)), float(np.median(b))
    out = {"median_change": (mb - ma) / ma if ma else None, "mann_whitney_p": None}
    if len(a) >= 2 and len(b) >= 2:
        out["mann_whitney_p"] = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    return out


def min_crashes_vs_zero(n: int, alpha: float = 0.05, alternative: str = "greater") -> int | None:
    """How many crashes out of n (against 0 of n) the test needs to reject: a figure users can
    reason with ('4 crashes against 0 at 10 per arm')."""
    for k in range(n + 1):
        if _rejects(k, n, 0, n, alpha, alternative):
            return k
    return None
