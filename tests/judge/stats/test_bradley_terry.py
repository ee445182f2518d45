"""Bradley-Terry strengths (``judge.stats.bradley_terry``, Hunter's MM algorithm) against a
hand-worked example and a direct maximum-likelihood fit written here with
``scipy.optimize.minimize`` on the log-likelihood."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from judge.stats.bradley_terry import (
    bootstrap_intervals,
    bradley_terry,
    estimable,
    win_matrix,
)


def direct_fit(wins: np.ndarray) -> np.ndarray:
    """Maximise sum_ij w_ij log(p_i / (p_i + p_j)) over log-strengths with the first fixed at
    0 (BFGS), then centre: an independent route to the same maximum."""
    n = wins.shape[0]

    def negative_log_likelihood(free: np.ndarray) -> float:
        theta = np.concatenate([[0.0], free])
        diff = theta[:, None] - theta[None, :]
        return float(np.sum(wins * np.logaddexp(0.0, -diff)))

    found = minimize(negative_log_likelihood, np.zeros(n - 1), method="BFGS", tol=1e-12)
    theta = np.concatenate([[0.0], found.x])
    return theta - theta.mean()


def test_hand_worked_three_models() -> None:
    # Strengths 4 : 2 : 1 make P(0 beats 1) = 2/3, P(1 beats 2) = 2/3, P(0 beats 2) = 4/5.
    # Data with exactly those shares (0-1: 2 of 3, 1-2: 2 of 3, 0-2: 4 of 5) satisfy every
    # likelihood equation W_i = sum_j N_ij p_i / (p_i + p_j) term by term, so 4 : 2 : 1 is the
    # maximum: centred log-strengths ln 4 - ln 2 = ln 2, 0, -ln 2.
    first = [0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0]
    second = [1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2]
    score = [1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0]
    fit = bradley_terry(win_matrix(first, second, score, 3))
    assert fit.estimable
    assert fit.strengths == pytest.approx([np.log(2), 0.0, -np.log(2)], abs=1e-8)


def test_ties_as_half_wins_match_a_direct_likelihood_fit() -> None:
    rng = np.random.default_rng(7)
    truth = np.array([1.0, 0.4, 0.0, -0.6, -1.2])
    first, second, score = [], [], []
    for _ in range(400):
        i, j = rng.choice(5, size=2, replace=False)
        p = 1 / (1 + np.exp(truth[j] - truth[i]))
        u = rng.random()
        first.append(i)
        second.append(j)
        score.append(0.5 if abs(u - p) < 0.1 else float(u < p))  # some ties
    wins = win_matrix(first, second, score, 5)
    assert 0.5 in score
    fit = bradley_terry(wins)
    assert fit.strengths == pytest.approx(direct_fit(wins), abs=1e-5)


def test_no_estimate_when_a_model_is_never_beaten() -> None:
    # 0 beats 1, 1 beats 2, 0 beats 2, never the other way: 0's strength is unbounded.
    wins = win_matrix([0, 1, 0], [1, 2, 2], [1, 1, 1], 3)
    assert not estimable(wins)
    fit = bradley_terry(wins)
    assert not fit.estimable and np.isnan(fit.strengths).all()
    # one win back from 2 to 0 closes the cycle: 0 > 1 > 2 > 0, now estimable
    assert estimable(win_matrix([0, 1, 0, 0], [1, 2, 2, 2], [1, 1, 1, 0], 3))


def test_bootstrap_intervals_cover_the_estimate_and_narrow_with_more_data() -> None:
    first = [0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0]
    second = [1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2]
    score = [1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0]
    point = bradley_terry(win_matrix(first, second, score, 3)).strengths
    small = bootstrap_intervals(first, second, score, list(range(11)), 3, n_bootstrap=400)
    assert np.all(small.low <= point) and np.all(point <= small.high)
    # small samples often lose the cycle; those resamples are counted, not fitted
    assert 0 < small.without_estimate < 400
    many = 8
    big = bootstrap_intervals(
        first * many, second * many, score * many, list(range(11 * many)), 3, n_bootstrap=400
    )
    assert np.all(big.high - big.low < small.high - small.low)
    assert big.without_estimate == 0
