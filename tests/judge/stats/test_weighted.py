"""Weighted (Horvitz-Thompson style) agreement against scipy on unweighted and replicated data,
and against population values known by construction."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from judge.stats.coefficient import UndefinedWarning
from judge.stats.weighted import (
    effective_size,
    weighted_mean_difference,
    weighted_pearson,
    weighted_ranks,
    weighted_spearman,
)


def scores(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Judge scores 1-5 and human means of three raters near them: many ties, as in practice."""
    rng = np.random.default_rng(seed)
    judge = rng.integers(1, 6, n).astype(float)
    human = np.clip(judge[:, None] + rng.integers(-2, 3, (n, 3)), 1, 5).mean(axis=1)
    return judge, human


@pytest.mark.parametrize("weight", [1.0, 7.5])
def test_equal_weights_give_scipy(weight: float) -> None:
    # Equal weights, whatever their value, are the unweighted estimators.
    judge, human = scores(1, 60)
    w = np.full(judge.size, weight)
    assert weighted_pearson(judge, human, w).value == pytest.approx(
        stats.pearsonr(judge, human).statistic, abs=1e-12
    )
    assert weighted_spearman(judge, human, w).value == pytest.approx(
        stats.spearmanr(judge, human).statistic, abs=1e-12
    )
    assert weighted_mean_difference(judge, human, w).value == pytest.approx(
        float(np.mean(judge - human)), abs=1e-12
    )


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_whole_number_weights_equal_replicated_rows(seed: int) -> None:
    # An item of weight k stands for k items: scipy on the data with each row repeated k times
    # must give the same Pearson, Spearman (midranks included) and mean difference.
    judge, human = scores(seed, 40)
    w = np.random.default_rng(seed + 100).integers(1, 6, judge.size)
    rj, rh = np.repeat(judge, w), np.repeat(human, w)
    assert weighted_pearson(judge, human, w).value == pytest.approx(
        stats.pearsonr(rj, rh).statistic, abs=1e-12
    )
    assert weighted_spearman(judge, human, w).value == pytest.approx(
        stats.spearmanr(rj, rh).statistic, abs=1e-12
    )
    assert weighted_mean_difference(judge, human, w).value == pytest.approx(
        float(np.mean(rj - rh)), abs=1e-12
    )


def test_weighted_ranks_are_midranks_of_the_replicated_data() -> None:
    values = np.array([3.0, 1.0, 3.0, 2.0, 5.0])
    assert weighted_ranks(values, np.ones(5)).tolist() == stats.rankdata(values).tolist()
    w = np.array([2, 1, 3, 1, 4])
    replicated = stats.rankdata(np.repeat(values, w))
    first_copy = np.cumsum(w) - w  # where each item's first copy sits in the repeated data
    assert weighted_ranks(values, w).tolist() == replicated[first_copy].tolist()
    # By hand: value 1 (weight 1) holds rank 1; 2 (weight 1) rank 2; the two 3s (weight 5)
    # ranks 3..7, midrank 5; 5 (weight 4) ranks 8..11, midrank 9.5.
    assert weighted_ranks(values, w).tolist() == [5.0, 1.0, 5.0, 2.0, 9.5]


def test_stratified_sample_recovers_the_population_exactly() -> None:
    # Population: 60 items (judge 1, human 2), 30 items (3, 3), 10 items (5, 4); constant
    # within each stratum. Mean difference by hand: (60 * -1 + 30 * 0 + 10 * 1) / 100 = -0.5.
    # A stratified sample of 6, 3 and 5 items has inclusion probabilities 6/60, 3/30, 5/10,
    # so weights 10, 10, 2: each stratum's weights add up to its size, and the weighted sample
    # is the population itself.
    pairs = [(1, 2), (3, 3), (5, 4)]
    sizes, drawn = [60, 30, 10], [6, 3, 5]
    judge = np.repeat([p[0] for p in pairs], drawn).astype(float)
    human = np.repeat([p[1] for p in pairs], drawn).astype(float)
    w = np.repeat([N / n for N, n in zip(sizes, drawn, strict=True)], drawn)
    assert weighted_mean_difference(judge, human, w).value == pytest.approx(-0.5, abs=1e-12)
    pop_judge = np.repeat([p[0] for p in pairs], sizes)
    pop_human = np.repeat([p[1] for p in pairs], sizes)
    assert weighted_pearson(judge, human, w).value == pytest.approx(
        stats.pearsonr(pop_judge, pop_human).statistic, abs=1e-12
    )
    assert weighted_spearman(judge, human, w).value == pytest.approx(
        stats.spearmanr(pop_judge, pop_human).statistic, abs=1e-12
    )
    # The unweighted sample over-represents the small stratum: its mean difference,
    # (6 * -1 + 5 * 1) / 14 = -1/14, is far from the population's.
    assert float(np.mean(judge - human)) == pytest.approx(-1 / 14)


def test_scaling_all_weights_changes_nothing() -> None:
    judge, human = scores(5, 30)
    w = np.random.default_rng(6).uniform(1, 10, judge.size)
    for fn in (weighted_pearson, weighted_spearman, weighted_mean_difference):
        assert fn(judge, human, w).value == pytest.approx(fn(judge, human, 3.7 * w).value)


def test_hand_computed_values() -> None:
    # Mean difference: differences 1 and 0 with weights 3 and 1 -> 3/4.
    assert weighted_mean_difference([4, 2], [3, 2], [3, 1]).value == 0.75
    # Kish: (3 + 1)^2 / (9 + 1) = 1.6.
    assert effective_size([3, 1]) == pytest.approx(1.6)
    r = weighted_pearson([1, 2, 3], [1, 3, 2], [1, 1, 1])
    # Deviations (-1, 0, 1) and (-1, 1, 0): cross products sum to 1, squares to 2 and 2,
    # so r = 1 / sqrt(2 * 2) = 0.5.
    assert (r.value, r.p_value, r.n) == (pytest.approx(0.5), None, 3)
    assert math.isnan(r.ci_low) and r.undefined_reason is None


def test_undefined_coefficients_are_nan_with_a_reason() -> None:
    with pytest.warns(UndefinedWarning, match="constant ratings: the judge gave every item 4"):
        r = weighted_spearman([4, 4, 4], [1, 2, 3], [1, 2, 3])
    assert math.isnan(r.value) and r.n == 3
    assert r.undefined_reason == "constant ratings: the judge gave every item 4"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        short = weighted_pearson([1, 2], [2, 1], [1, 1], warn=False)
        assert short.undefined_reason == "fewer than 3 items (n=2)"
        assert weighted_mean_difference([], [], [], warn=False).undefined_reason == "no items"


def test_inputs_are_checked_with_the_argument_named() -> None:
    with pytest.raises(ValueError, match="weights must be positive"):
        weighted_pearson([1, 2, 3], [1, 2, 3], [1, 0, 1])
    with pytest.raises(ValueError, match="weights must have one value per item"):
        weighted_pearson([1, 2, 3], [1, 2, 3], [1, 1])
    with pytest.raises(ValueError, match="judge and human must have the same length"):
        weighted_spearman([1, 2, 3], [1, 2], [1, 1, 1])
    with pytest.raises(ValueError, match="human contains NaN"):
        weighted_mean_difference([1, 2], [1, math.nan], [1, 1])
