"""Sampling designs for annotation campaigns: allocations and inclusion probabilities worked
out by hand, checked against the frequencies of many seeded draws, and the sample size for a
target precision of Spearman's rho against an independent computation."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import norm

from annotation.errors import CampaignError
from annotation.sampling import (
    PLANNING_RHO,
    Sample,
    Unit,
    disagreement,
    draw,
    resolve_size,
    score_level,
    size_for_half_width,
    size_from_pilot,
)
from judge.stats.weighted import weighted_mean_difference


def run_of(n: int) -> list[Unit]:
    return [Unit(i, "S1", "gender", {"ICS": [1 + i % 5]}) for i in range(1, n + 1)]


def probabilities(sample: Sample) -> dict[int, float]:
    return {d.item_id: d.inclusion_probability for d in sample.drawn}


def frequencies(
    units: list[Unit], strategy: str, size: int, draws: int, **options: object
) -> dict[int, float]:
    """How often each item is drawn over ``draws`` seeds: an estimate of its probability that
    does not use the design's own arithmetic."""
    seen: Counter[int] = Counter()
    for seed in range(draws):
        seen.update(d.item_id for d in draw(units, strategy, size, seed, **options).drawn)
    return {u.item_id: seen[u.item_id] / draws for u in units}


# --- sizes -------------------------------------------------------------------------------------


def test_sizes_are_counts_or_fractions_rounded_half_up() -> None:
    assert resolve_size(0.2, 72) == 14  # 14.4 -> 14
    assert resolve_size(0.25, 10) == 3  # 2.5 -> 3 (halves up, not to even)
    assert resolve_size(0.1, 25) == 3  # 0.1 * 25 is 2.5000000000000004 in floats: still 3
    assert resolve_size(1.0, 72) == 72 and resolve_size(72, 72) == 72


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (73, "size 73 is larger than the judge run, which has 72 items"),
        (0, "at least 1 item"),
        (1.5, r"fractional size must lie in \(0, 1\]"),
        (0.001, "rounds to 0 items"),
        (True, "count or a fraction"),
    ],
)
def test_bad_sizes_are_campaign_errors(size: int | float, message: str) -> None:
    with pytest.raises(CampaignError, match=message):
        draw(run_of(72), "random", size, seed=0)


# --- random ------------------------------------------------------------------------------------


def test_random_sample_has_probability_n_over_N() -> None:
    sample = draw(run_of(72), "random", 0.2, seed=0)
    # 20 % of 72 = 14.4 -> 14 items, each with probability 14 / 72.
    assert len(sample.drawn) == 14 and len({d.item_id for d in sample.drawn}) == 14
    assert set(probabilities(sample).values()) == {14 / 72}
    assert sample.strata == {"all": (72, 14)} and sample.population == 72
    assert sample.strategy == "random" and sample.notes == []
    assert [d.item_id for d in sample.drawn] == sorted(d.item_id for d in sample.drawn)


def test_random_sample_is_reproducible_and_seed_dependent() -> None:
    units = run_of(72)
    first = draw(units, "random", 14, seed=7)
    assert draw(units, "random", 14, seed=7) == first
    assert draw(list(reversed(units)), "random", 14, seed=7) == first  # order of input
    assert draw(units, "random", 14, seed=8).drawn != first.drawn


def test_bad_requests_are_campaign_errors() -> None:
    with pytest.raises(CampaignError, match="unknown sampling strategy 'best'"):
        draw(run_of(5), "best", 2, seed=0)
    with pytest.raises(CampaignError, match="min_per_stratum does not apply to the random"):
        draw(run_of(5), "random", 2, seed=0, min_per_stratum=1)
    with pytest.raises(CampaignError, match="seed must be an integer >= 0"):
        draw(run_of(5), "random", 2, seed=-1)
    with pytest.raises(CampaignError, match=r"items appear more than once: \[1\]"):
        draw(run_of(3) + run_of(1), "random", 2, seed=0)
    with pytest.raises(CampaignError, match="min_per_stratum must be an integer >= 0"):
        draw(run_of(5), "stratified", 2, seed=0, min_per_stratum=-1)
    with pytest.raises(CampaignError, match="oversample must be a number >= 1, got 0.5"):
        draw(run_of(5), "disagreement", 2, seed=0, oversample=0.5)
    with pytest.raises(CampaignError, match="min_range must be an integer >= 1, got 0"):
        draw(run_of(5), "disagreement", 2, seed=0, min_range=0)


# --- stratified --------------------------------------------------------------------------------


def test_score_level_is_the_rounded_mean_over_rubrics() -> None:
    assert score_level(Unit(1, "S1", "gender", {"ICS": [3, 4]})) == "4"  # 3.5 -> 4
    # S2: TCS 4, PCS 3, ETCS 3 -> 10/3 = 3.33 -> 3.
    assert score_level(Unit(2, "S2", "race", {"TCS": [4], "PCS": [3], "ETCS": [3]})) == "3"
    # Rubric means 2 (its unscored sample left out) and 3 -> 2.5 -> 3.
    assert score_level(Unit(3, "S2", "race", {"TCS": [2, None], "PCS": [3]})) == "3"
    assert score_level(Unit(4, "S1", "gender", {"ICS": [None, None]})) == "unscored"
    assert score_level(Unit(5, "S1", "gender", {})) == "unscored"


def hand_built_run() -> list[Unit]:
    """12 items in 4 strata of sizes 6, 3, 2 and 1."""
    a = [Unit(i, "S1", "gender", {"ICS": [4]}) for i in range(1, 7)]
    b = [Unit(i, "S1", "gender", {"ICS": [2]}) for i in range(7, 10)]
    c = [Unit(i, "S3", "race", {"SBAS": [5, 5]}) for i in range(10, 12)]
    d = [Unit(12, "S1", "gender", {"ICS": [None]})]
    return a + b + c + d


A, B, C, D = (
    "score 4 / S1 / gender",
    "score 2 / S1 / gender",
    "score 5 / S3 / race",
    "score unscored / S1 / gender",
)


def test_stratified_allocation_by_hand() -> None:
    # n = 6 over strata of 6, 3, 2, 1 items. Each gets 1 first (4 items); the other 2 go to
    # the strata with room (6, 3, 2: 11 items) in proportion: 2*6/11 = 1.09, 2*3/11 = 0.55,
    # 2*2/11 = 0.36. Whole parts give A one; the largest remainder (0.55) gives B the last.
    # Counts A 2, B 2, C 1, D 1; probabilities 2/6, 2/3, 1/2, 1/1 (they add up to n = 6).
    sample = draw(hand_built_run(), "stratified", 6, seed=3)
    assert sample.strata == {A: (6, 2), B: (3, 2), C: (2, 1), D: (1, 1)}
    expected = {A: 1 / 3, B: 2 / 3, C: 1 / 2, D: 1.0}
    for d in sample.drawn:
        assert d.inclusion_probability == pytest.approx(expected[d.stratum])
    assert Counter(d.stratum for d in sample.drawn) == {A: 2, B: 2, C: 1, D: 1}
    assert sample.notes == [] and sample.strategy == "stratified"


def test_stratified_probabilities_match_draw_frequencies() -> None:
    # 3000 seeded draws: each item's frequency is within 5 binomial standard errors
    # (at most 0.045 here) of the probability the design states for its stratum.
    units = hand_built_run()
    stated = {
        k: drawn / size for k, (size, drawn) in draw(units, "stratified", 6, 0).strata.items()
    }
    stratum_of = {i: A for i in range(1, 7)} | {i: B for i in range(7, 10)} | {10: C, 11: C, 12: D}
    seen = frequencies(units, "stratified", 6, 3000)
    for item, name in stratum_of.items():
        p = stated[name]
        assert seen[item] == pytest.approx(p, abs=5 * math.sqrt(p * (1 - p) / 3000) + 1e-9)


def test_stratified_fills_a_stratum_and_shares_the_rest_again() -> None:
    # n = 10: 1 each (4), 6 left over A, B, C (11 items): 3.27, 1.64, 1.09. C would reach
    # 1 + 1.09 > 2 items, so it is filled (2), leaving 5 for A and B (9 items): 3.33 and
    # 1.67 -> whole parts 3 and 1, the remainder to B (0.67). Counts 4, 3, 2, 1.
    sample = draw(hand_built_run(), "stratified", 10, seed=0)
    assert sample.strata == {A: (6, 4), B: (3, 3), C: (2, 2), D: (1, 1)}


def test_stratified_lowers_the_minimum_when_it_does_not_fit() -> None:
    # n = 3 cannot give 1 to 4 strata: plain proportional allocation. Quotas 3*6/12 = 1.5,
    # 0.75, 0.5, 0.25 -> whole parts A 1; the 2 left go to the largest remainders: B (0.75),
    # then A (0.5, tied with C, broken towards the larger stratum). Counts 2, 1, 0, 0.
    sample = draw(hand_built_run(), "stratified", 3, seed=0)
    assert sample.strata == {A: (6, 2), B: (3, 1), C: (2, 0), D: (1, 0)}
    assert "lowered to 0" in sample.notes[0]
    assert "2 of 4 strata got no item" in sample.notes[1]
    # A minimum of 2 does not fit in 6 (2 + 2 + 2 + 1 = 7): lowered to 1, as in the hand case.
    lowered = draw(hand_built_run(), "stratified", 6, seed=0, min_per_stratum=2)
    assert lowered.strata == {A: (6, 2), B: (3, 2), C: (2, 1), D: (1, 1)}
    assert "lowered to 1" in lowered.notes[0]


def test_weighting_a_stratified_sample_recovers_the_population_mean() -> None:
    # Judge - human differences constant within strata: +1 in A (6 items), -1 in B (3),
    # 0 in C (2), +2 in D (1). Population mean (6 - 3 + 0 + 2) / 12 = 5/12. Weighted by
    # 1 / inclusion probability the sample gives it exactly; unweighted it gives
    # (2 - 2 + 0 + 2) / 6 = 1/3.
    offset = {A: 1, B: -1, C: 0, D: 2}
    sample = draw(hand_built_run(), "stratified", 6, seed=11)
    judge = [3 + offset[d.stratum] for d in sample.drawn]
    human = [3] * len(sample.drawn)
    weights = [d.weight for d in sample.drawn]
    assert weighted_mean_difference(judge, human, weights).value == pytest.approx(5 / 12)
    assert float(np.mean(np.subtract(judge, human))) == pytest.approx(1 / 3)


# --- disagreement ------------------------------------------------------------------------------


def disagreeing_run(n_disagree: int, n_agree: int, n_unmeasured: int = 0) -> list[Unit]:
    units = [Unit(i, "S1", "gender", {"ICS": [2, 4]}) for i in range(n_disagree)]
    units += [Unit(100 + i, "S1", "gender", {"ICS": [3, 3]}) for i in range(n_agree)]
    units += [Unit(200 + i, "S1", "gender", {"ICS": [3, None]}) for i in range(n_unmeasured)]
    return units


def test_disagreement_is_the_largest_range_over_rubrics() -> None:
    assert disagreement(Unit(1, "S2", "race", {"TCS": [4, 4], "PCS": [1, 3, 2]})) == 2
    assert disagreement(Unit(2, "S1", "race", {"ICS": [5, None, 5]})) == 0
    assert disagreement(Unit(3, "S1", "race", {"ICS": [5, None]})) is None


def test_disagreeing_items_are_drawn_at_three_times_the_rate() -> None:
    # 5 disagreeing and 15 agreeing items, n = 8, oversample 3: shares in proportion to
    # 3 * 5 = 15 and 15 -> 4 and 4. Probabilities 4/5 = 0.8 and 4/15, a ratio of 3.
    units = disagreeing_run(5, 15)
    sample = draw(units, "disagreement", 8, seed=0)
    assert sample.strata == {"agreeing": (15, 4), "disagreeing": (5, 4)}
    p = {d.stratum: d.inclusion_probability for d in sample.drawn}
    assert p == {"disagreeing": pytest.approx(0.8), "agreeing": pytest.approx(4 / 15)}
    seen = frequencies(units, "disagreement", 8, 3000)
    assert np.mean([seen[i] for i in range(5)]) == pytest.approx(0.8, abs=0.02)
    assert np.mean([seen[100 + i] for i in range(15)]) == pytest.approx(4 / 15, abs=0.02)


def test_disagreement_rate_is_capped_at_one_and_unmeasured_items_keep_the_base_rate() -> None:
    # 4 disagreeing, 16 agreeing, n = 12: 12 * 12/28 = 5.1 > 4 disagreeing items, so all 4
    # are taken and the other 8 come from the 16 agreeing: probabilities 1 and 1/2.
    capped = draw(disagreeing_run(4, 16), "disagreement", 12, seed=0)
    assert capped.strata == {"agreeing": (16, 8), "disagreeing": (4, 4)}
    # 3 disagreeing, 12 agreeing, 6 unmeasured, oversample 2, n = 8: weights 6, 12, 6 ->
    # 2, 4, 2; probabilities 2/3 against 1/3 for both agreeing and unmeasured items.
    mixed = draw(disagreeing_run(3, 12, 6), "disagreement", 8, seed=0, oversample=2)
    assert mixed.strata == {"agreeing": (12, 4), "disagreeing": (3, 2), "unmeasured": (6, 2)}
    assert "disagreeing 2 of 3 (0.67)" in mixed.notes[0]


def test_min_range_decides_what_counts_as_disagreeing() -> None:
    # Samples (2, 4) differ by 2, (3, 4) by 1: with min_range 2 only the first kind disagrees.
    units = disagreeing_run(2, 0) + [
        Unit(50 + i, "S1", "gender", {"ICS": [3, 4]}) for i in range(6)
    ]
    sample = draw(units, "disagreement", 4, seed=0, min_range=2)
    # Weights 3 * 2 = 6 and 6 -> 2 and 2.
    assert sample.strata == {"agreeing": (6, 2), "disagreeing": (2, 2)}


def test_one_sample_per_item_falls_back_to_a_random_sample() -> None:
    sample = draw(run_of(30), "disagreement", 6, seed=0)
    assert sample.strategy == "random" and sample.strata == {"all": (30, 6)}
    assert set(probabilities(sample).values()) == {6 / 30}
    assert "simple random sample was drawn instead" in sample.notes[0]
    # Several samples that all agree: the design still runs, with a note.
    agreeing = draw(disagreeing_run(0, 10), "disagreement", 5, seed=0)
    assert agreeing.strategy == "disagreement" and agreeing.strata == {"agreeing": (10, 5)}
    assert "no item's judge samples differ" in agreeing.notes[1]


# --- sample size for a target half-width -------------------------------------------------------


def half_width(n: int, rho: float) -> float:
    """Written out again from Bonett & Wright (2000): z = atanh(rho), var = (1 + rho^2/2) /
    (n - 3), interval tanh(z -+ 1.96 se), half of its width."""
    q = norm.ppf(0.975)
    se = math.sqrt((1 + rho**2 / 2) / (n - 3))
    return (math.tanh(math.atanh(rho) + q * se) - math.tanh(math.atanh(rho) - q * se)) / 2


@pytest.mark.parametrize(
    ("target", "rho"), [(0.1, 0.5), (0.05, 0.8), (0.2, 0.3), (0.1, -0.6), (0.5, 0.4)]
)
def test_planned_n_is_the_smallest_that_reaches_the_target(target: float, rho: float) -> None:
    plan = size_for_half_width(target, rho)
    assert half_width(plan.n, rho) <= target < half_width(plan.n - 1, rho)
    assert plan.half_width == pytest.approx(half_width(plan.n, rho))
    assert plan.rho == rho
    # Bonett & Wright's first-order planning formula, n = 4 (1 + rho^2/2)(1 - rho^2)^2
    # (z / w)^2 + 3 with w the full width, is a large-sample one: for targets up to 0.2 it
    # lands within 2 % of the exact search (at 0.5 it is 5 % off: 14.7 against 14).
    w = 2 * target
    first_order = 4 * (1 + rho**2 / 2) * (1 - rho**2) ** 2 * (norm.ppf(0.975) / w) ** 2 + 3
    assert plan.n == pytest.approx(first_order, rel=0.02 if target <= 0.2 else 0.05)
    assert size_for_half_width(target, -rho).n == plan.n  # the interval of -rho is a mirror


def test_planned_n_at_rho_zero_has_a_closed_form() -> None:
    # At rho = 0 the interval is +-tanh(1.96 / sqrt(n - 3)), so the half-width is at most W
    # exactly when n >= 3 + (1.96 / atanh(W))^2: for W = 0.1, 3 + 381.58 -> 385.
    q = norm.ppf(0.975)
    assert size_for_half_width(0.1, 0.0).n == math.ceil(3 + (q / math.atanh(0.1)) ** 2) == 385


def test_without_a_pilot_the_planning_rho_is_assumed_and_said() -> None:
    plan = size_for_half_width(0.1)
    assert (plan.rho, plan.rho_source) == (PLANNING_RHO, "planning value")
    assert plan.n == 246  # by the search in half_width above: 0.09987 at 246, 0.10007 at 245
    assert plan.reason.startswith("246 rated items") and "assumed" in plan.reason


def test_a_pilot_gives_rho() -> None:
    # Ranks (1..5) against (2, 1, 4, 3, 5): d^2 = 4 -> rho = 1 - 6*4 / (5*24) = 0.8.
    plan = size_from_pilot(0.1, [1, 2, 3, 4, 5], [2, 1, 4, 3, 5])
    assert plan.rho == pytest.approx(0.8) and plan.rho_source == "a pilot of 5 items"
    assert plan.n == size_for_half_width(0.1, 0.8).n
    with pytest.raises(CampaignError, match="constant ratings"):
        size_from_pilot(0.1, [3, 3, 3], [1, 2, 3])


@pytest.mark.parametrize(
    ("target", "rho", "message"),
    [(0.0, 0.5, "half-width"), (1.0, 0.5, "half-width"), (0.1, 1.0, "strictly between")],
)
def test_impossible_plans_are_campaign_errors(target: float, rho: float, message: str) -> None:
    with pytest.raises(CampaignError, match=message):
        size_for_half_width(target, rho)
