"""Prediction-powered means for a weighted sample of a run's own items, overlap in the variance
(judge/stats/ppi_run.py).

Expected values: ppi_py (its point estimate takes the rated items' weights and an unweighted
unlabelled set, which is exactly this estimator's), ppi_py's classical interval for the
identity the module docstring derives, Cochran's stratified formula written out by hand,
and seeded simulations whose truth is known by construction (1,000 data sets: the binomial
sd of a coverage of 0.95 is 0.007, so [0.93, 0.97] is about +-3 of them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm

from judge.stats.ppi_run import RunGroup, ppi_run_gap, ppi_run_mean, run_classical_mean

Z95 = float(norm.ppf(0.975))


def run_of(seed: int, size: int = 600) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(human, judge, level): human = q + e, E = 3 exactly; the judge 0.8 q + 1 + e'
    (biased, correlation 0.72); level: the judge's score rounded to 1-5 (the strata)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(3.0, 1.0, size)
    judge = 0.8 * q + 1.0 + rng.normal(0, 0.6, size)
    return q + rng.normal(0, 0.5, size), judge, np.clip(np.rint(judge), 1, 5)


RATES = {1.0: 0.9, 2.0: 0.7, 3.0: 0.35, 4.0: 0.5, 5.0: 0.9}
"""A stratum's sampling fraction: large, and unequal (the overlap matters most here)."""


def stratified(
    seed: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[float]]:
    """A stratified sample of one run: in each level, round(rate * size) items drawn at
    random. (rated mask, human, judge, probabilities of the rated, their strata)."""
    human, judge, level = run_of(seed)
    rng = np.random.default_rng(seed + 10_000)
    mask = np.zeros(human.size, bool)
    pi = np.zeros(human.size)
    for h in np.unique(level):
        members = np.flatnonzero(level == h)
        k = max(2, round(RATES[float(h)] * members.size))
        mask[rng.choice(members, min(k, members.size), replace=False)] = True
        pi[members] = min(k, members.size) / members.size
    return mask, human, judge, pi, level.tolist()


@pytest.mark.parametrize("lam", [0.0, 0.4, 1.0, None])
def test_the_point_estimate_is_ppi_pys_with_rated_weights(ppi_py: Any, lam: float | None) -> None:
    # Expected: ppi_py.ppi_mean_pointestimate with w = 1 / pi on the rated items and EVERY
    # judged item, unweighted, as the unlabelled set: lam * mean(all) + mean(w (y - lam yhat))
    # with w rescaled to average 1, this estimator by definition.
    mask, human, judge, pi, _ = stratified(1)
    got = ppi_run_mean(human[mask], judge[mask], judge, probabilities=pi[mask], lam=lam)
    expected = ppi_py.ppi_mean_pointestimate(
        human[mask], judge[mask], judge, lam=got.lam, w=1 / pi[mask]
    )
    assert got.estimate == pytest.approx(float(np.squeeze(expected)), abs=1e-9)
    if lam is None:
        assert 0 < got.lam < 1


def test_a_simple_random_sample_without_the_judge_is_ppi_pys_classical(ppi_py: Any) -> None:
    # The module docstring's identity: pi = n / M, lam = 0 gives (1 - n/M) s**2 / n + s**2 / M
    # = s**2 / n, ppi_py's classical interval (it divides by n, as here).
    from ppi_py.baselines import classical_mean_ci

    human, judge, _ = run_of(2)
    idx = np.random.default_rng(3).choice(human.size, 300, replace=False)
    got = ppi_run_mean(human[idx], judge[idx], judge, probabilities=np.full(300, 300 / 600), lam=0)
    low, high = classical_mean_ci(human[idx], alpha=0.05)
    assert (got.ci_low, got.ci_high) == pytest.approx((low, high), abs=1e-12)
    alone = run_classical_mean(human[idx], population=600, probabilities=np.full(300, 0.5))
    assert (alone.ci_low, alone.ci_high) == pytest.approx((low, high), abs=1e-12)


def test_the_stratified_variance_is_cochrans_with_its_correction() -> None:
    # By hand, lam = 0, two strata of a run of M = 10 items: stratum a holds 6 items, 3 rated
    # (y 1, 2, 6: mean 3, s**2 = 7), stratum b holds 4, 2 rated (y 4, 6: s**2 = 2). Cochran:
    # sum (N_h / M)**2 (1 - n_h / N_h) s_h**2 / n_h = 0.36 * 0.5 * 7 / 3 + 0.16 * 0.5 * 2 / 2
    # = 0.42 + 0.08 = 0.5. The weighted mean is 0.6 * 3 + 0.4 * 5 = 3.8; every weight is 2,
    # so the weighted variance of y is (2.8**2 + 1.8**2 + 2.2**2 + 0.2**2 + 2.2**2) / 5 =
    # 20.8 / 5 = 4.16, over M: 0.416. In all 0.916.
    y = [1.0, 2, 6, 4, 6]
    pi = [0.5, 0.5, 0.5, 0.5, 0.5]
    strata = ["a", "a", "a", "b", "b"]
    got = ppi_run_mean(y, y, np.zeros(10), probabilities=pi, strata=strata, lam=0, t_below=0)
    assert got.estimate == pytest.approx(3.8)
    assert got.se**2 == pytest.approx(0.5 + 0.416)


def test_small_weighted_samples_get_t_intervals() -> None:
    y = [1.0, 2, 6, 4, 6]
    got = ppi_run_mean(y, y, np.zeros(10), probabilities=[0.5] * 5, lam=0)
    normal = ppi_run_mean(y, y, np.zeros(10), probabilities=[0.5] * 5, lam=0, t_below=0)
    assert got.interval == "t, 4 df" and got.small_sample
    # t(0.975, 4) = 2.776445 (scipy's table value) against z = 1.959964.
    assert got.half_width / normal.half_width == pytest.approx(2.776445 / 1.959964, rel=1e-6)


def test_stratified_samples_of_large_fractions_cover_the_truth() -> None:
    # Truth known by construction: E[human] = 3.0. Sampling fractions 35-90 %: the overlap
    # of rated and judged items is most of the run.
    hits, narrower = 0, 0
    for seed in range(1000):
        mask, human, judge, pi, level = stratified(seed)
        strata = [s for s, m in zip(level, mask, strict=True) if m]
        got = ppi_run_mean(human[mask], judge[mask], judge, probabilities=pi[mask], strata=strata)
        hits += got.ci_low <= 3.0 <= got.ci_high
        narrower += got.ratings_saved >= -1e-9
    assert 0.93 <= hits / 1000 <= 0.97
    assert narrower == 1000  # the tuned lam never widens the interval (0 up to rounding)


def test_the_gap_adds_the_variances() -> None:
    # By hand: each group as ppi_run_mean gives it, the difference and the variances added.
    a_mask, ha, ja, pa, _ = stratified(5)
    b_mask, hb, jb, pb, _ = stratified(6)
    a = RunGroup(ha[a_mask], ja[a_mask], ja, pa[a_mask])
    b = RunGroup(hb[b_mask] - 0.4, jb[b_mask], jb, pb[b_mask])
    gap = ppi_run_gap(a, b)
    one = ppi_run_mean(a.y, a.yhat, a.yhat_all, probabilities=a.probabilities)
    two = ppi_run_mean(b.y, b.yhat, b.yhat_all, probabilities=b.probabilities)
    assert gap.estimate == pytest.approx(one.estimate - two.estimate)
    assert gap.se**2 == pytest.approx(one.se**2 + two.se**2)
    assert gap.ci_high - gap.estimate == pytest.approx(Z95 * gap.se)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ppi_run_mean([1.0, 2], [1.0, 2], [1.0], probabilities=[1, 1]), "yhat_all"),
        (
            lambda: ppi_run_mean([1.0, 2], [1.0, 2], [1.0, 2], probabilities=[0.5, 1.5]),
            "inclusion probabilities",
        ),
        (
            lambda: ppi_run_mean([1.0, 2], [1.0, 2], [1.0, 2], probabilities=[0.5]),
            "one per rated item",
        ),
        (lambda: run_classical_mean([1.0, 2], population=1, probabilities=[1, 1]), "smaller"),
    ],
)
def test_impossible_input_is_refused(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()
