"""amplify's statistics: Fisher's test against an independent enumeration on new tables, the
sequential rule's error rates by simulation and by exact enumeration, curtailment by brute force,
and the verdict's words from given rates."""

from math import comb

import pytest

from faultkit.amplify import sequential as S
from faultkit.amplify.verdict import ArmOutcome, decide


def fisher_by_enumeration(c1, n1, c2, n2):
    """Two-sided Fisher by hand: the hypergeometric probability of every table with the margins, summed
    over those no more likely than the observed one (the textbook definition)."""
    t, n = c1 + c2, n1 + n2
    prob = {x: comb(n1, x) * comb(n2, t - x) / comb(n, t) for x in range(max(0, t - n2), min(n1, t) + 1)}
    return min(1.0, sum(p for p in prob.values() if p <= prob[c1] * (1 + 1e-7)))


@pytest.mark.parametrize("table", [(7, 7, 1, 7), (6, 6, 0, 6), (0, 4, 1, 7), (3, 9, 8, 10), (10, 10, 1, 10),
                                   (0, 15, 6, 15), (2, 11, 2, 13), (5, 5, 0, 12)])
def test_fisher_against_enumeration(table):
    assert S.fisher_p(*table) == pytest.approx(fisher_by_enumeration(*table), rel=1e-9)


def test_known_values_of_the_issue():
    # 10/10 vs 1/10: 11 crashes among 20; the observed table and its mirror (1/10 vs 10/10) each have
    # probability C(10,10) C(10,1) / C(20,11) = 10/167960, and no other table is as unlikely
    assert S.fisher_p(10, 10, 1, 10) == pytest.approx(20 / 167960, rel=1e-9)
    assert S.fisher_p(0, 15, 6, 15) == pytest.approx(fisher_by_enumeration(0, 15, 6, 15))
    assert S.fisher_p(0, 15, 6, 15) == pytest.approx(0.0169, abs=1e-4)


def exact_false_decision_rate(p, rounds, alpha):
    """The probability that the rule ever decides when both arms crash at rate p: every path of
    outcomes enumerated round by round (the stopped mass leaves)."""
    dist = {(0, 0): 1.0}
    decided = 0.0
    for r in range(1, rounds + 1):
        nxt = {}
        for (ca, cp), m in dist.items():
            for da in (0, 1):
                for dp in (0, 1):
                    k = (ca + da, cp + dp)
                    nxt[k] = nxt.get(k, 0.0) + m * (p if da else 1 - p) * (p if dp else 1 - p)
        dist = {}
        for k, m in nxt.items():
            res = S.look((k[0], r), (k[1], r), r, rounds, alpha)
            if res.state == S.DECIDED:
                decided += m
            elif res.state == S.RUNNING:
                dist[k] = m
    return decided


@pytest.mark.parametrize("p", [0.05, 0.1, 0.3, 0.5, 0.7, 0.9])
def test_false_decision_rate_exactly_under_alpha(p):
    for rounds in (6, 10, 15):
        assert exact_false_decision_rate(p, rounds, 0.05) <= 0.05


def test_error_rates_by_simulation():
    # under equal rates: false decisions stay under alpha (with the simulation's own error)
    for p in (0.1, 0.5):
        sim = S.simulate(p, p, rounds=10, alpha=0.05, runs=3000, seed=1)
        assert sim["decided_rate"] <= 0.05 + 3 * (0.05 * 0.95 / 3000) ** 0.5
    # a plain 1/10 bug that the amplifier makes 10/10: decided nearly always, long before round 10
    big = S.simulate(1.0, 0.1, rounds=10, alpha=0.05, runs=2000, seed=2)
    assert big["decided_rate"] > 0.9 and big["mean_rounds"] < 8
    # stopping early saves trials against running all 10 rounds
    mid = S.simulate(0.9, 0.1, rounds=15, alpha=0.05, runs=2000, seed=3)
    assert mid["decided_rate"] > 0.8 and mid["mean_rounds"] < 12


def exact_rate_at(p, rounds, thr):
    """The same enumeration for a rule that tests at `thr` at every look, without curtailment."""
    dist, decided = {(0, 0): 1.0}, 0.0
    for r in range(1, rounds + 1):
        nxt = {}
        for (ca, cp), m in dist.items():
            for da in (0, 1):
                for dp in (0, 1):
                    k = (ca + da, cp + dp)
                    nxt[k] = nxt.get(k, 0.0) + m * (p if da else 1 - p) * (p if dp else 1 - p)
        dist = {}
        for k, m in nxt.items():
            if S.fisher_p(k[0], r, k[1], r) <= thr:
                decided += m
            else:
                dist[k] = m
    return decided


def test_the_per_look_threshold_is_what_keeps_it_under_alpha():
    """Testing at alpha at every one of 20 looks (no correction) errs more often than alpha; the rule
    (its calibrated threshold, between alpha/20 and alpha) does not."""
    assert exact_rate_at(0.5, 20, 0.05) > 0.08
    assert exact_false_decision_rate(0.5, 20, 0.05) <= 0.05
    assert S.bonferroni(0.05, 20) == pytest.approx(0.0025)
    assert S.bonferroni(0.05, 20) < S.threshold(0.05, 20) < 0.05


@pytest.mark.parametrize("rounds", [4, 7, 10, 20])
def test_the_calibrated_threshold_keeps_the_error_under_alpha_between_grid_points(rounds):
    """The calibration maximises over 199 rates; here the rule's own looks, enumerated path by path
    in plain Python, at 97 other rates."""
    for k in range(1, 98):
        p = k / 98 + 0.0037
        assert exact_false_decision_rate(p, rounds, 0.05) <= 0.05, (rounds, p)
    # and it is the largest such attainable value: the next attainable p-value above it errs too often
    t = S.threshold(0.05, rounds)
    above = min((float(x) for r in range(1, rounds + 1) for x in S.pvalues(r).ravel() if t < x <= 0.05), default=None)
    if above is not None:
        assert S.exact_false_decision(above, rounds, S.GRID).max() > 0.05 * S.MARGIN


def test_pvalue_matrix_is_fishers_test():
    for n in (3, 7, 12):
        P = S.pvalues(n)
        assert all(P[a, b] == pytest.approx(fisher_by_enumeration(a, n, b, n), rel=1e-9)
                   for a in range(n + 1) for b in range(n + 1))


def test_a_look_with_a_trial_not_counted_uses_bonferroni():
    # 4/4 vs 0/4 (p = 0.029) decides at the calibrated threshold; 4/4 vs 0/3 (a plain trial not counted)
    # is judged at alpha/10 and does not
    assert S.look((4, 4), (0, 4), 4, 10, 0.05).state == S.DECIDED
    res = S.look((4, 4), (0, 3), 4, 10, 0.05)
    assert res.state == S.RUNNING and res.threshold == pytest.approx(0.005)


def test_curtailment_only_when_no_completion_can_decide():
    rounds, alpha = 6, 0.05
    t = S.threshold(alpha, rounds)
    for r in range(1, rounds):
        for ca in range(r + 1):
            for cp in range(r + 1):
                res = S.look((ca, r), (cp, r), r, rounds, alpha)
                if res.state == S.DECIDED:
                    continue
                left = rounds - r
                any_final = any(S.fisher_p(ca + a, rounds, cp + b, rounds) <= t
                                for a in range(left + 1) for b in range(left + 1))
                assert (res.state == S.UNDECIDABLE) == (not any_final), (r, ca, cp)


def test_fixed_design_trials():
    # 10/10 vs 1/10 at alpha 0.05 without looks: 3/3 vs 0/3 gives p = 0.1, 4/4 vs 0/4 p = 0.029
    assert S.fixed_n_for_same_decision((10, 10), (1, 10)) == 4
    assert S.fixed_n_for_same_decision((1, 10), (1, 10)) is None


# ---------------- the verdict's words from given rates ----------------

def o(arm, cause, c, n, pc, pn, state=S.DECIDED, ttc=None, bb=()):
    return ArmOutcome(arm, cause, c, n, pc, pn, S.fisher_p(c, n, pc, pn), state, ttc, 0, list(bb))


def test_verdict_caching_off_raised():
    v = decide([o("caching-off", "memory-reuse", 10, 10, 1, 10, ttc=4.2,
                  bb=["name the block: the 67,108,864-byte segment allocated at a.py:3 f, freed and released to the "
                      "driver 3.1 ms before the fault, in 1 of 1 crashed trial(s) looked at (trial-001-caching-off)"]),
                o("launch-blocking", "error-far-from-launch", 1, 10, 1, 10, state=S.UNDECIDABLE, ttc=9.0)],
               0.05, 10, (1, 10))
    p = fisher_by_enumeration(10, 10, 1, 10)
    assert v["classes"] == ["memory-reuse"]
    assert (f"caching off raised the crash rate from 1/10 to 10/10 (Fisher p = {p:.1e}): a use of freed device "
            f"memory") in v["text"]
    assert "the black box of the amplified crashes name the block: the 67,108,864-byte segment allocated at a.py:3" \
        in v["text"]
    assert "released to the driver 3.1 ms before the fault" in v["text"]
    assert "Fastest to reproduce: caching-off (10/10 crashed, median 4.2 s to crash)" in v["text"]
    assert v["fastest"]["arm"] == "caching-off"
    assert "launch-blocking: no change (1/10 vs 1/10)" in v["text"]


def test_verdict_serialized_launches_removed():
    v = decide([o("launch-blocking", "error-far-from-launch", 0, 15, 6, 15)], 0.05, 1, (6, 15))
    p = fisher_by_enumeration(0, 15, 6, 15)
    assert f"serialized launches removed the crash (0/15 vs 6/15) (Fisher p = {p:.2g}): a race between streams " \
           f"or with the host" in v["text"]
    assert v["decided"][0]["direction"] == "down" and v["fastest"] is None


def test_verdict_too_few_trials_says_how_many():
    v = decide([o("caching-off", "memory-reuse", 2, 4, 0, 4, state=S.RUNNING)], 0.05, 10, (0, 4))
    assert v["classes"] == [] and "too few trials" in v["text"]
    need = v["undecided"][0]["trials_per_arm_to_decide"]
    from faultkit.trials.stats import power
    # the figure is the smallest n per arm whose exact power at 50% vs 0% reaches 90% at the per-look
    # threshold, two-sided
    t = S.threshold(0.05, 10)
    assert power(0.5, 0.0, need, need, t, "two-sided") >= 0.9 > power(0.5, 0.0, need - 1, need - 1, t, "two-sided")
    assert f"at these rates {need} trials per arm would decide (90% power)" in v["text"]


def test_verdict_hold_back_and_two_classes():
    v = decide([o("hold-back", "memory-reuse", 0, 8, 8, 8), o("jitter", "race", 1, 8, 8, 8)], 0.05, 8, (8, 8))
    assert v["classes"] == ["memory-reuse", "race"]          # strongest first: 0/8 has the smaller p
    assert "holding freed blocks back removed the crash (0/8 vs 8/8)" in v["text"]
    assert "jitter lowered the crash rate (1/8 vs 8/8)" in v["text"] and "a race between the host" in v["text"]
