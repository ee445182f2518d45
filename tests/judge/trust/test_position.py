"""Position consistency and preference fairness (judge.trust.position) on hand-made pairs:
the counts are set by hand, PF is recomputed from the paper's own raw-score formula and its
min-max scaling, and the bootstrap CIs are checked against scipy's bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from judge.stats.tests import paired_shift
from judge.trust.position import (
    MIN_CONSISTENCY,
    flag_reasons,
    position_stats,
    repetition_stability,
    verdicts,
)


def pairs(consistent: int, primacy: int, recency: int) -> tuple[list[float], list[float]]:
    """Given/swapped scores with that many pairs of each kind (recency: 4 as given, 3
    swapped; primacy: 3 as given, 4 swapped; consistent: 3 and 3)."""
    given = [3.0] * consistent + [3.0] * primacy + [4.0] * recency
    swapped = [3.0] * consistent + [4.0] * primacy + [3.0] * recency
    return given, swapped


def paper_pf(primacy: int, recency: int, n: int) -> float:
    """Shi et al.'s PF: raw = rc * rc/(pc+rc) - pc * pc/(pc+rc), min-max scaled to [-1, 1]
    between the raw score's extremes over n pairs (-n: all primacy, +n: all recency)."""
    raw = 0.0
    if primacy + recency:
        raw = recency * recency / (primacy + recency) - primacy * primacy / (primacy + recency)
    low, high = -n, n
    return (raw - low) / (high - low) * 2 - 1


@pytest.mark.parametrize(("consistent", "primacy", "recency"), [(3, 2, 5), (0, 7, 1), (4, 0, 0)])
def test_pc_and_pf_follow_the_papers_definitions(
    consistent: int, primacy: int, recency: int
) -> None:
    given, swapped = pairs(consistent, primacy, recency)
    s = position_stats(given, swapped)
    n = consistent + primacy + recency
    assert (s.n, s.consistent, s.primacy, s.recency) == (n, consistent, primacy, recency)
    assert s.consistency == pytest.approx(consistent / n)  # consistent pairs / all pairs
    assert s.fairness == pytest.approx(paper_pf(primacy, recency, n))
    # by hand for the first case: raw = (25 - 4) / 7 = 3 -> (3 + 10) / 20 * 2 - 1 = 0.3


def test_the_first_case_by_hand() -> None:
    s = position_stats(*pairs(3, 2, 5))
    assert (s.consistency, s.fairness) == (pytest.approx(0.3), pytest.approx(0.3))


def test_the_cis_match_scipys_percentile_bootstrap() -> None:
    given, swapped = pairs(20, 6, 14)
    s = position_stats(given, swapped, n_bootstrap=20000)
    v = verdicts(given, swapped).astype(float)
    for values, low, high in (
        ((v == 0).astype(float), s.consistency_low, s.consistency_high),
        (v, s.fairness_low, s.fairness_high),
    ):
        ref = stats.bootstrap(
            (values,), np.mean, n_resamples=20000, method="percentile",
            random_state=np.random.default_rng(1),
        ).confidence_interval  # fmt: skip
        # two independent resamplings of 40 pairs: the bounds agree to within a pair or so
        assert low == pytest.approx(ref.low, abs=0.05)
        assert high == pytest.approx(ref.high, abs=0.05)
    again = position_stats(given, swapped, n_bootstrap=20000)
    assert (again.fairness_low, again.fairness_high) == (s.fairness_low, s.fairness_high)


def test_samples_combined_per_order_decide_the_verdict() -> None:
    # means 4.5 vs 4.5 (4,5 / 5,4): consistent; 4 vs 3.5: recency; 2 vs 2.5: primacy
    assert verdicts([4.5, 4.0, 2.0], [4.5, 3.5, 2.5]).tolist() == [0, 1, -1]


def test_undefined_cases_are_nan_and_never_flagged() -> None:
    none = position_stats([], [])
    assert none.n == 0 and math.isnan(none.consistency) and math.isnan(none.fairness)
    one = position_stats([5], [2])
    assert (one.consistency, one.fairness) == (0.0, 1.0)
    assert math.isnan(one.consistency_low)  # a CI needs two pairs
    assert flag_reasons(one, paired_shift([5], [2]), 0.0, MIN_CONSISTENCY) == []


def test_an_order_blind_judge_is_not_flagged() -> None:
    given, swapped = pairs(30, 0, 0)
    s = position_stats(given, swapped)
    assert (s.consistency_low, s.consistency_high) == (1.0, 1.0)
    assert (s.fairness_low, s.fairness_high) == (0.0, 0.0)
    assert flag_reasons(s, paired_shift(given, swapped), 0.0, MIN_CONSISTENCY) == []


def test_a_judge_flipping_both_ways_is_inconsistent_not_one_sided() -> None:
    given, swapped = pairs(2, 14, 14)  # 28 of 30 pairs change, half each way
    s = position_stats(given, swapped)
    assert s.fairness == 0.0 and s.fairness_low < 0 < s.fairness_high
    assert s.consistency_high < MIN_CONSISTENCY
    shift = paired_shift(given, swapped)
    assert shift.mean_difference == 0.0  # the old mean-change check sees nothing
    assert flag_reasons(s, shift, 0.0, MIN_CONSISTENCY) == ["inconsistent"]


def test_a_mostly_consistent_but_one_sided_judge_is_flagged_above_the_tolerance() -> None:
    given, swapped = pairs(30, 0, 10)  # PC 0.75, PF 0.25; each recency pair moves by 1
    s = position_stats(given, swapped)
    # normal approximation of PC's CI: 0.75 +- 1.96 sqrt(0.75 x 0.25 / 40) = [0.62, 0.88]
    assert s.consistency_high > MIN_CONSISTENCY
    # PF's: 0.25 +- 1.96 sqrt((0.25 - 0.25^2) / 40) = [0.12, 0.38], above 0
    assert s.fairness_low > 0
    shift = paired_shift(given, swapped)
    assert shift.mean_difference == pytest.approx(-10 / 40)  # swapped - given
    assert flag_reasons(s, shift, 0.0, MIN_CONSISTENCY) == ["recency"]
    assert flag_reasons(s, shift, 0.2, MIN_CONSISTENCY) == ["recency"]  # 0.25 > 0.2
    assert flag_reasons(s, shift, 0.5, MIN_CONSISTENCY) == []  # within the tolerance
    mirrored = position_stats(swapped, given)
    assert flag_reasons(mirrored, paired_shift(swapped, given), 0.0, MIN_CONSISTENCY) == ["primacy"]


def test_repetition_stability_is_the_modal_share_averaged() -> None:
    # cells: [4, 4] -> 1, [3, 5] -> 1/2, [2, 2, 3] -> 2/3, [5] alone -> left out
    assert repetition_stability([[4, 4], [3, 5], [2, 2, 3], [5]]) == pytest.approx(
        (1 + 0.5 + 2 / 3) / 3
    )
    assert repetition_stability([[4], [2]]) is None
