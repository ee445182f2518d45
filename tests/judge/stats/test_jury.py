"""Juries (judge.stats.jury): combinations derived by hand, learnt weights against the planted
weights and scipy's SLSQP, cross-fitting that never sees the held-out item's own human score,
and the paired bootstrap of "jury minus best judge" against a plain numpy loop over
resampled indices with scipy's correlations (a different random stream: the intervals agree
to Monte Carlo error, not digit for digit).

Planted judges: a true human score per item; a judge is that score plus N(0, sd^2) noise,
rounded and kept on 1-5. Why the verdicts below are what they must be: the mean of k
independent noises has variance sum(sd_j^2) / k^2, so three judges of sd 0.8 make a jury
of noise sd 0.8 / sqrt(3) = 0.46, clearly closer to people than any of them (better); a
good judge of sd 0.3 with two of sd 2.0 make a mean of noise sd sqrt(0.09 + 8) / 3 = 0.95,
far worse than the good judge alone (worse); three copies of one judge make that judge.
"""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest
from scipy import optimize, stats
from sklearn.metrics import cohen_kappa_score

from judge.stats.coefficient import BootstrapOptions
from judge.stats.jury import (
    BETTER,
    NOT_SHOWN,
    WORSE,
    _interval_alpha,
    combine,
    cross_fit,
    majority,
    pair_alpha,
    simplex_weights,
    versus_best,
)


def planted(sds: list[float], n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(judges n x k, human n): human uniform on 1-5 in steps of 1/3 (a mean of three raters),
    each judge the human score plus N(0, sd^2), rounded, on 1-5."""
    rng = np.random.default_rng(seed)
    human = rng.integers(3, 16, n) / 3.0
    judges = np.column_stack([np.clip(np.round(human + rng.normal(0, sd, n)), 1, 5) for sd in sds])
    return judges, human


def test_mean_median_and_majority_by_hand() -> None:
    scores = np.array([[1, 2, 2, 5], [1, 3, 4, 5], [2, 2, 4, 4], [3, 3, 3, 3]])
    # mean: 10/4, 13/4, 12/4, 3; median of four: the mean of the middle two.
    assert combine(scores, "mean").tolist() == [2.5, 3.25, 3.0, 3.0]
    assert combine(scores, "median").tolist() == [2.0, 3.5, 3.0, 3.0]
    # majority: row 1 has 2 twice; row 2 ties all four, median 3.5: 3 and 4 equally near ->
    # the lower, 3; row 3 ties 2 and 4, median 3, equally near -> 2; row 4 all 3.
    assert combine(scores, "majority").tolist() == [2.0, 3.0, 2.0, 3.0]


def test_majority_puts_means_on_the_nearest_level_first() -> None:
    # 2.5 -> 3 (halves up), 3.4 -> 3, 4.6 -> 5: level 3 twice.
    assert majority(np.array([[2.5, 3.4, 4.6]])).tolist() == [3.0]
    # On a 0-3 scale, 0 twice wins over 3.
    assert majority(np.array([[0, 0, 3]]), labels=range(4)).tolist() == [0.0]


def test_a_jury_of_one_judge_is_refused() -> None:
    with pytest.raises(ValueError, match="two judges or more"):
        combine(np.array([[1.0], [2.0]]), "mean")


def test_weights_recover_a_planted_weighted_mean() -> None:
    # human = 0.7 a + 0.3 b exactly: the least-squares weighted mean is (0.7, 0.3, 0).
    rng = np.random.default_rng(1)
    s = rng.uniform(1, 5, (50, 3))
    w = simplex_weights(s, 0.7 * s[:, 0] + 0.3 * s[:, 1])
    assert w == pytest.approx([0.7, 0.3, 0.0], abs=1e-6)


def test_weights_equal_scipy_slsqp_on_noisy_judges() -> None:
    judges, human = planted([0.4, 1.0, 1.5], seed=2)
    w = simplex_weights(judges, human)

    def loss(v: np.ndarray) -> float:
        return float(np.sum((judges @ v - human) ** 2))

    found = optimize.minimize(
        loss, np.full(3, 1 / 3), method="SLSQP", bounds=[(0, 1)] * 3,
        constraints=[{"type": "eq", "fun": lambda v: v.sum() - 1}], options={"ftol": 1e-12},
    )  # fmt: skip
    assert w == pytest.approx(found.x, abs=1e-4)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)


def test_cross_fitted_weights_put_most_weight_on_the_good_judge_in_every_fold() -> None:
    judges, human = planted([0.3, 2.0, 2.0], seed=3)
    fit = cross_fit(judges, human, folds=5, seed=0)
    assert fit.fold_weights.shape == (5, 3)
    assert np.all(fit.fold_weights[:, 0] > 0.6), fit.fold_weights
    # Folds differ in size by at most one: 300 items, 60 each.
    assert np.bincount(fit.folds).tolist() == [60] * 5


def test_a_held_out_items_score_does_not_depend_on_its_own_human_score() -> None:
    judges, human = planted([0.5, 1.0, 1.5], n=60, seed=4)
    fit = cross_fit(judges, human, folds=4, seed=0)
    changed = human.copy()
    changed[7] = 5.0 if human[7] < 3 else 1.0
    again = cross_fit(judges, changed, folds=4, seed=0)
    assert again.predictions[7] == pytest.approx(fit.predictions[7], abs=1e-12)
    # ...while the weights learnt on every item, which saw it, move.
    assert not np.allclose(again.weights, fit.weights, atol=1e-9)
    # Each held-out prediction is its fold's weights applied to its own judges' scores.
    f = fit.folds[7]
    assert fit.predictions[7] == pytest.approx(judges[7] @ fit.fold_weights[f], abs=1e-12)


def test_too_few_items_for_the_folds_is_one_clear_error() -> None:
    judges, human = planted([0.5, 1.0], n=7)
    with pytest.raises(ValueError, match="at least 2 items per fold: 7 items for 5 folds"):
        cross_fit(judges, human, folds=5)


def _rowwise_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    dx, dy = x - x.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
    return np.asarray((dx * dy).sum(1) / np.sqrt((dx * dx).sum(1) * (dy * dy).sum(1)))


def _correlations(corr: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(B,) correlation of each row of x (B, n) with the same row of y: Pearson by its
    formula, Spearman as Pearson of scipy's mid-ranks, Kendall by scipy row by row."""
    if corr == "pearson":
        return _rowwise_pearson(x, y)
    if corr == "spearman":
        return _rowwise_pearson(stats.rankdata(x, axis=1), stats.rankdata(y, axis=1))
    return np.array([stats.kendalltau(a, b).statistic for a, b in zip(x, y, strict=True)])


def by_hand(
    jury: np.ndarray, judges: np.ndarray, human: np.ndarray, corr: str, b: int, seed: int
) -> tuple[float, float, float]:
    """Jury minus the best judge: the point (best on all items) and a 95 % percentile interval
    from ``b`` index resamples, the best judge picked again in each."""
    n = human.size
    idx = np.vstack([np.arange(n), np.random.default_rng(seed).integers(0, n, (b, n))])
    h = human[idx]
    best = np.max([_correlations(corr, judges[:, k][idx], h) for k in range(3)], axis=0)
    diff = _correlations(corr, jury[idx], h) - best
    low, high = np.percentile(diff[1:], [2.5, 97.5])
    return float(diff[0]), float(low), float(high)


@pytest.mark.parametrize(("corr", "b"), [("spearman", 2000), ("pearson", 2000), ("kendall", 600)])
def test_paired_interval_matches_a_numpy_loop(corr: str, b: int) -> None:
    judges, human = planted([0.8, 0.8, 0.8], n=150, seed=5)
    jury = combine(judges, "mean")
    got = versus_best(
        jury, judges, human, statistic=corr, options=BootstrapOptions(n_bootstrap=2000, seed=1)
    )
    point, low, high = by_hand(jury, judges, human, corr, b, 99)
    assert got.difference == pytest.approx(point, abs=1e-10)
    # Monte Carlo error of a 2.5 % percentile is about 0.06 (2,000 resamples) to 0.11 (600)
    # of the difference's sd (~0.03 here), so two independent streams agree within 0.015;
    # picking the best judge once, on all items, instead moves the upper end by ~0.03 here.
    assert got.ci_low == pytest.approx(low, abs=0.015)
    assert got.ci_high == pytest.approx(high, abs=0.015)
    scipy_fn = {"spearman": stats.spearmanr, "pearson": stats.pearsonr,
                "kendall": stats.kendalltau}[corr]  # fmt: skip
    expected = [scipy_fn(judges[:, k], human).statistic for k in range(3)]
    assert got.judges == pytest.approx(expected, abs=1e-10)
    assert got.jury == pytest.approx(scipy_fn(jury, human).statistic, abs=1e-10)


def test_kappa_quadratic_puts_the_jury_on_the_nearest_level_as_sklearn_is_given_it() -> None:
    judges, human = planted([0.8, 0.8, 0.8], n=120, seed=10)
    jury = combine(judges, "mean")  # thirds: 2.33 -> 2, 2.67 -> 3, halves up
    got = versus_best(jury, judges, human, statistic="kappa_quadratic",
                      options=BootstrapOptions(n_bootstrap=0))  # fmt: skip
    level = np.floor(jury + 0.5)
    expected = cohen_kappa_score(level, np.floor(human + 0.5), weights="quadratic")
    assert got.jury == pytest.approx(expected, abs=1e-12)
    assert got.verdict == "undefined" and "no interval" in got.reason


def test_three_independent_judges_make_a_better_jury() -> None:
    judges, human = planted([0.8, 0.8, 0.8], seed=6)
    got = versus_best(combine(judges, "mean"), judges, human)
    assert got.verdict == BETTER
    assert got.ci_low > 0


def test_a_good_judge_and_two_noisy_ones_make_a_worse_mean_not_a_worse_learnt_jury() -> None:
    judges, human = planted([0.3, 2.0, 2.0], seed=7)
    mean = versus_best(combine(judges, "mean"), judges, human)
    assert mean.verdict == WORSE and mean.best == 0 and mean.ci_high < 0
    learnt = versus_best(cross_fit(judges, human).predictions, judges, human)
    assert learnt.verdict != WORSE
    assert learnt.difference > mean.difference


def test_three_copies_of_one_biased_judge_are_that_judge() -> None:
    _, human = planted([0.0], seed=8)
    biased = np.clip(np.round(human) + 1, 1, 5)  # one point lenient, the same for all three
    judges = np.column_stack([biased] * 3)
    for how in ("mean", "median", "majority"):
        jury = combine(judges, how)
        assert np.array_equal(jury, biased)
        got = versus_best(jury, judges, human)
        assert (got.difference, got.ci_low, got.ci_high) == (0.0, 0.0, 0.0)
        assert got.verdict == NOT_SHOWN


def test_pair_alpha_equals_the_krippendorff_package() -> None:
    judges, human = planted([0.8, 0.8], n=80, seed=9)
    rng = np.random.default_rng(3)
    # A mean of judges (13 distinct values) and a continuous score (every value distinct,
    # as a learnt jury's), each also on a resample of the items drawn by hand.
    for jury in (combine(judges, "mean"), np.clip(human + rng.normal(0, 0.5, 80), 1, 5)):
        got = pair_alpha(jury, human, options=BootstrapOptions(n_bootstrap=200))
        expected = krippendorff.alpha(
            reliability_data=np.vstack([jury, human]), level_of_measurement="interval"
        )
        assert got.value == pytest.approx(expected, abs=1e-9)
        assert got.ci_low < got.value < got.ci_high
        idx = rng.integers(0, 80, 80)
        weights = np.bincount(idx, minlength=80).astype(float)[None]
        resampled = krippendorff.alpha(
            reliability_data=np.vstack([jury[idx], human[idx]]), level_of_measurement="interval"
        )
        assert _interval_alpha(weights, jury, human)[0] == pytest.approx(resampled, abs=1e-9)
    constant = pair_alpha(np.full(5, 3.0), np.full(5, 3.0), options=BootstrapOptions(0))
    assert math.isnan(constant.value) and constant.undefined_reason
