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
from annotation.sample_size import PLANNING_RHO, size_for_half_width, size_from_pilot
from annotation.sampling import (
    Sample,
    Unit,
    disagreement,
    draw,
    empty_strata_note,
    resolve_size,
    score_level,
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


def test_stratified_gives_the_minimum_at_random_when_it_does_not_fit() -> None:
    # n = 3 cannot give 1 to each of 4 strata: every stratum drops to 0 and the 3 items go to
    # 3 of the 4 strata drawn at random, each with chance 3/4. Expected counts 3/4 each, so
    # inclusion probabilities (3/4) / size: A 1/8, B 1/4, C 3/8, D 3/4.
    sample = draw(hand_built_run(), "stratified", 3, seed=0)
    assert sample.expected == {A: 0.75, B: 0.75, C: 0.75, D: 0.75}
    assert sorted(d for _, d in sample.strata.values()) == [0, 1, 1, 1]
    stated = {A: 1 / 8, B: 1 / 4, C: 3 / 8, D: 3 / 4}
    for d in sample.drawn:
        assert d.inclusion_probability == pytest.approx(stated[d.stratum])
    (empty,) = sample.empty_strata
    assert sample.shortfall == {empty: (1, 0)}
    assert "3 items cannot give 1 to each of the 4 strata: 1 got fewer" in sample.notes[0]
    assert sample.notes[1].startswith(f"1 of 4 strata got no item in this sample: {empty} (")
    # Over 2000 seeds each stratum misses out in about 1/4 of them (within 5 binomial standard
    # errors, 0.048), and each item is drawn as often as its stated probability says.
    draws = 2000
    missed: Counter[str] = Counter()
    for seed in range(draws):
        missed.update(draw(hand_built_run(), "stratified", 3, seed).empty_strata)
    for name in (A, B, C, D):
        assert missed[name] / draws == pytest.approx(0.25, abs=5 * math.sqrt(0.25 * 0.75 / draws))
    seen = frequencies(hand_built_run(), "stratified", 3, draws)
    stratum_of = {i: A for i in range(1, 7)} | {i: B for i in range(7, 10)} | {10: C, 11: C, 12: D}
    for item, name in stratum_of.items():
        p = stated[name]
        assert seen[item] == pytest.approx(p, abs=5 * math.sqrt(p * (1 - p) / draws))


def test_a_minimum_of_two_that_does_not_fit_is_shared_at_random() -> None:
    # min 2, n = 6 over 6, 3, 2, 1 items: 2 + 2 + 2 + 1 = 7 > 6, so each stratum gets 1 (D is
    # then full) and the 2 left go to 2 of A, B and C at random: expected A 1 + 2/3 = 5/3,
    # B 5/3, C 5/3, D 1; probabilities 5/18, 5/9, 5/6 and 1.
    sample = draw(hand_built_run(), "stratified", 6, seed=0, min_per_stratum=2)
    assert sample.expected == pytest.approx({A: 5 / 3, B: 5 / 3, C: 5 / 3, D: 1.0})
    stated = {A: 5 / 18, B: 5 / 9, C: 5 / 6, D: 1.0}
    for d in sample.drawn:
        assert d.inclusion_probability == pytest.approx(stated[d.stratum])
    ((short, (wanted, got)),) = sample.shortfall.items()
    assert short in (A, B, C) and (wanted, got) == (2, 1)
    assert "1 got fewer, drawn at random with the seed" in sample.notes[0]
    assert f"{short} (1 of 2)" in sample.notes[0] and len(sample.notes) == 1  # none empty


def test_tied_remainders_go_to_strata_drawn_at_random() -> None:
    # Strata of 5, 2, 2 and 2 items, n = 6: 1 each first, then 2 shared in proportion to size
    # (5, 2, 2, 2 of 11): 0.91, 0.36, 0.36, 0.36. No whole parts; the largest remainder gives
    # one to the 5-item stratum, and the last item is tied three ways: each of the 2-item
    # strata gets it with chance 1/3. Expected counts 2, 4/3, 4/3, 4/3: probabilities
    # 2/5 and 2/3.
    units = [Unit(i, "S1", "gender", {"ICS": [3]}) for i in range(1, 6)]
    units += [Unit(10 * s + i, "S1", "gender", {"ICS": [s]}) for s in (1, 2, 5) for i in range(2)]
    names = ["score 1 / S1 / gender", "score 2 / S1 / gender", "score 5 / S1 / gender"]
    sample = draw(units, "stratified", 6, seed=0)
    assert sample.expected == pytest.approx(
        {"score 3 / S1 / gender": 2.0} | {k: 4 / 3 for k in names}
    )
    assert sorted(sample.strata[k][1] for k in names) == [1, 1, 2]
    for d in sample.drawn:
        assert d.inclusion_probability == pytest.approx(2 / 5 if d.stratum[6] == "3" else 2 / 3)
    # 3000 seeds: each tied stratum gets its second item in about a third of them (5 binomial
    # standard errors: 0.043); by name the score 1 stratum would win every time.
    draws = 3000
    second: Counter[str] = Counter()
    for seed in range(draws):
        strata = draw(units, "stratified", 6, seed).strata
        second.update(k for k in names if strata[k][1] == 2)
    for k in names:
        assert second[k] / draws == pytest.approx(1 / 3, abs=5 * math.sqrt(2 / 9 / draws))


def issue_run() -> list[Unit]:
    """Issue 25's shape: more strata than the sample has items. 5 score levels x 3 stages x 2
    factors, one item each: 30 strata, and a sample of 12."""
    levels = [(s, st, f) for s in range(1, 6) for st in ("S1", "S2", "S3") for f in ("a", "b")]
    return [Unit(i, st, f, {"ICS": [s]}) for i, (s, st, f) in enumerate(levels, start=1)]


def test_high_score_strata_are_not_always_left_out() -> None:
    # Issue 25: ties went to the first strata by name, and names start with the score, so
    # with 12 items for 30 one-item strata the score 3, 4 and 5 strata got none for every
    # seed (measured on the previous sampler: 200 of 200 seeds). Now each stratum is one of
    # the 12 chosen in 12/30 = 0.4 of the seeds: over 400 seeds within 5 binomial standard
    # errors (0.12). The strata of one score level chosen in a seed are hypergeometric (6 of
    # the 30 strata, 12 chosen): mean 2.4, variance 12 x 0.2 x 0.8 x 18/29 = 1.19; over 400
    # seeds a level gets 960 items, standard error sqrt(400 x 1.19) = 21.8, 5 of them 109.
    draws, units = 400, issue_run()
    got: Counter[str] = Counter()
    for seed in range(draws):
        sample = draw(units, "stratified", 12, seed)
        assert len(sample.drawn) == 12 and len(sample.empty_strata) == 18
        assert all(d.inclusion_probability == pytest.approx(0.4) for d in sample.drawn)
        got.update(k for k, (_, d) in sample.strata.items() if d == 1)
    assert len(got) == 30  # every stratum was drawn in some seed
    for k in got:
        assert got[k] / draws == pytest.approx(0.4, abs=5 * math.sqrt(0.4 * 0.6 / draws))
    for level in "12345":
        total = sum(n for k, n in got.items() if k.startswith(f"score {level} "))
        assert total == pytest.approx(960, abs=109)


def test_empty_strata_are_named_with_their_share_of_the_run() -> None:
    sample = draw(issue_run(), "stratified", 12, seed=5)
    empty = sample.empty_strata
    # 18 empty strata of 1 item each: 18 of 30 items, 60 %; the first 10 are named.
    note = sample.notes[-1]
    assert note.startswith(f"18 of 30 strata got no item in this sample: {empty[0]} (1 item), ")
    assert note.endswith("and 8 more; they hold 18 of 30 items (60 %) of the run")
    assert sample.shortfall == {k: (1, 0) for k in empty}
    assert sample.to_dict()["shortfall"][empty[0]] == {"wanted": 1, "drawn": 0}
    # By hand: strata "a" 6 items, "b" 2, "c" 3; b and c empty hold 5 of 11 items, 45 %.
    table = {"a": (6, 2), "b": (2, 0), "c": (3, 0)}
    assert empty_strata_note(table, ["b", "c"]) == (
        "2 of 3 strata have no rated item: b (2 items), c (3 items); they hold 5 of 11 items "
        "(45 %) of the run"
    )
    assert empty_strata_note(table, []) == ""


def test_a_draw_without_ties_is_numpys_choice_for_the_seed() -> None:
    # The tie-breaks use their own stream: the items of a stratum are still exactly what
    # numpy's default generator for the seed picks (here one stratum, a simple random sample).
    units = run_of(72)
    picks = np.random.default_rng(7).choice(72, size=14, replace=False)
    assert [d.item_id for d in draw(units, "random", 14, seed=7).drawn] == sorted(
        units[i].item_id for i in picks
    )


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


def reach(n: int, rho: float) -> tuple[float, float]:
    """Written out again from Bonett & Wright (2000): z = atanh(rho), var = (1 + rho^2/2) /
    (n - 3), interval tanh(z -+ 1.96 se); how far it reaches below and above rho."""
    q = norm.ppf(0.975)
    se = math.sqrt((1 + rho**2 / 2) / (n - 3))
    z = math.atanh(rho)
    return rho - math.tanh(z - q * se), math.tanh(z + q * se) - rho


def closed_form(target: float, rho: float) -> int:
    """The farther side is the one towards 0 (tanh is flattest away from 0), so for rho >= 0
    the plan needs tanh(z - q se) >= rho - W, i.e. se <= (atanh(rho) - atanh(rho - W)) / q:
    n = ceil(3 + (1 + rho^2/2) q^2 / (atanh(rho) - atanh(rho - W))^2); |rho| for rho < 0."""
    r, q = abs(rho), norm.ppf(0.975)
    return math.ceil(3 + (1 + r**2 / 2) * q**2 / (math.atanh(r) - math.atanh(r - target)) ** 2)


@pytest.mark.parametrize(
    ("target", "rho"), [(0.1, 0.5), (0.05, 0.8), (0.2, 0.3), (0.1, -0.6), (0.5, 0.4)]
)
def test_planned_n_is_the_smallest_that_reaches_the_target(target: float, rho: float) -> None:
    plan = size_for_half_width(target, rho)
    assert max(reach(plan.n, rho)) <= target < max(reach(plan.n - 1, rho))
    assert plan.half_width == pytest.approx(max(reach(plan.n, rho)))
    assert plan.n == closed_form(target, rho)
    assert plan.rho == rho
    assert size_for_half_width(target, -rho).n == plan.n  # the interval of -rho is a mirror


def test_the_planning_value_needs_277_items_not_246() -> None:
    # Issue 25: "--target-half-width 0.1" at rho = 0.5 planned 246 items, the n at which half
    # of the interval's width is 0.1 (0.09987); but that interval reaches 0.1065 below rho.
    # By hand: atanh(0.5) = 0.549306, atanh(0.4) = 0.423649, difference 0.125657;
    # 1.125 x 1.959964^2 = 4.321641; 4.321641 / 0.125657^2 = 273.70; + 3 = 276.70 -> 277.
    below, above = reach(246, 0.5)
    assert (below + above) / 2 == pytest.approx(0.09987, abs=1e-5) and below > 0.106
    assert reach(277, 0.5)[0] <= 0.1 < reach(276, 0.5)[0]
    assert 3 + 4.321641 / 0.125657**2 == pytest.approx(276.70, abs=0.01)
    plan = size_for_half_width(0.1)
    assert (plan.n, plan.rho, plan.rho_source) == (277, PLANNING_RHO, "planning value")
    assert plan.reason.startswith("277 rated items") and "assumed" in plan.reason
    assert "at most 0.0999 from rho on either side" in plan.reason


def test_simulated_spearman_spreads_below_rho_as_planned() -> None:
    # A check that does not use the formula: 20,000 samples of n bivariate normal pairs whose
    # Spearman rho is 0.5 (Pearson r = 2 sin(pi rho / 6), Pearson 1907). The 2.5th percentile
    # of the sample rho lies farther below 0.5 than the 97.5th lies above it (the lopsided
    # interval), more than 0.1 below at n = 246 and at most 0.1 below at n = 277. Measured
    # with this seed: 0.1036 and 0.0975 below, 0.0909 and 0.0867 above (a percentile's
    # standard error here is about 0.001).
    rng = np.random.default_rng(2025)
    r = 2 * math.sin(math.pi * 0.5 / 6)
    spread = {}
    for n in (246, 277):
        x = rng.standard_normal((20_000, n))
        y = r * x + math.sqrt(1 - r * r) * rng.standard_normal((20_000, n))
        rx = x.argsort(1).argsort(1) - (n - 1) / 2  # centred ranks (no ties in normal data)
        ry = y.argsort(1).argsort(1) - (n - 1) / 2
        rho = (rx * ry).sum(1) / (rx**2).sum(1)  # both rank vectors have the same spread
        low, high = np.quantile(rho, [0.025, 0.975])
        spread[n] = (0.5 - low, high - 0.5)
    assert spread[246][0] > 0.1 >= spread[277][0]
    assert spread[277][0] - spread[277][1] > 0.005


def test_planned_n_at_rho_zero_has_a_closed_form() -> None:
    # At rho = 0 the interval is +-tanh(1.96 / sqrt(n - 3)), so the half-width is at most W
    # exactly when n >= 3 + (1.96 / atanh(W))^2: for W = 0.1, 3 + 381.58 -> 385.
    q = norm.ppf(0.975)
    assert size_for_half_width(0.1, 0.0).n == math.ceil(3 + (q / math.atanh(0.1)) ** 2) == 385


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
