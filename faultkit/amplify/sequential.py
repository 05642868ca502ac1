"""When an arm may stop: a group-sequential rule with exact tests at each look.

The rule, as the report states it: the experiment has at most N rounds (a round is one trial of
every arm still running, the plain arm included, in a seeded order). After each round r = 1..N
(each a "look"), each running amplifier arm is compared with the plain arm by Fisher's exact test,
two-sided, on the counted trials so far.
- Efficacy: the arm stops, DECIDED, at the first look where p <= alpha / N (Bonferroni over the N
  planned looks). By the union bound the chance of any false decision over all looks is at most
  alpha, whatever the true rates and however the looks depend on each other, and unequal counts
  (trials not counted) do not change that: each look's test is exact on its own table.
- Futility (curtailment): the arm stops, UNDECIDABLE, at a look where even the most extreme
  outcomes of every remaining round (all crashes in one arm and none in the other, either way)
  could not give p <= alpha / N at round N. Stopping for futility only removes chances to decide,
  so it cannot raise the false-decision rate.
The error rates are shown by simulation (`simulate`, tests/test_amplify_sequential.py): under equal
rates the false-decision rate stays under alpha; at a large effect the arm stops long before N.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from scipy import stats

DECIDED, UNDECIDABLE, RUNNING = "decided", "undecidable", "running"

RULE = ("group-sequential: a look after every round (at most {n} rounds); an amplifier arm stops as decided at "
        "the first look where Fisher's exact test (two-sided) against the plain arm gives p <= alpha/{n} = "
        "{threshold:.2g} (Bonferroni over the planned looks: false-decision rate <= {alpha} per arm), and as "
        "undecidable when no outcome of the remaining rounds could reach that threshold (curtailment)")


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


def threshold(alpha: float, rounds: int) -> float:
    return alpha / max(1, rounds)


def look(arm: tuple[int, int], plain: tuple[int, int], rounds_done: int, rounds: int, alpha: float) -> Look:
    """arm, plain: (crashes, counted trials) so far; rounds_done of at most `rounds`."""
    t = threshold(alpha, rounds)
    (ca, na), (cp, np_) = arm, plain
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
