"""Bradley-Terry strengths from paired comparisons, by maximum likelihood, with a cluster
bootstrap.

The model: item i beats item j with probability p_i / (p_i + p_j). The maximum-likelihood
strengths are found by Hunter's MM algorithm (Hunter 2004, "MM algorithms for generalized
Bradley-Terry models", eq. 3): p_i <- W_i / sum_j N_ij / (p_i + p_j), with W_i the wins of i
and N_ij the comparisons of i and j, which increases the likelihood at every step. Strengths
are reported as log-strengths centred to mean 0 (only differences are identified).

Ties: a tie counts as half a win for each side (the usual reading, as in Chatbot Arena's
Bradley-Terry fit): the likelihood is then the Bradley-Terry likelihood of fractional wins.

The maximum-likelihood estimate exists only when the comparison graph is strongly connected:
for every split of the items into two groups, some item of each group beat (or tied) some
item of the other (Hunter 2004, assumption 1). Otherwise a strength runs off to infinity, so
no estimate is given (``estimable`` False, NaN strengths) rather than a number the iteration
happened to stop at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_ITER = 10_000
TOL = 1e-10
NAN = float("nan")


@dataclass(frozen=True)
class BTFit:
    """Centred log-strengths (NaN when not estimable), whether the estimate exists, and the
    MM iterations used."""

    strengths: np.ndarray
    estimable: bool
    iterations: int


def win_matrix(
    first: Sequence[int], second: Sequence[int], score: Sequence[float], n_items: int
) -> np.ndarray:
    """``wins[i, j]``: how often i beat j, from comparisons of ``first[k]`` and ``second[k]``
    where ``score[k]`` is 1 (first won), 0.5 (tie) or 0 (second won).

    >>> win_matrix([0, 0, 1], [1, 1, 2], [1, 0.5, 0], 3).tolist()
    [[0.0, 1.5, 0.0], [0.5, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    i, j = np.asarray(first, dtype=int), np.asarray(second, dtype=int)
    s = np.asarray(score, dtype=float)
    if not (i.shape == j.shape == s.shape):
        raise ValueError("first, second and score must have the same length")
    if np.any((s < 0) | (s > 1)):
        raise ValueError("score must lie between 0 and 1")
    wins = np.zeros((n_items, n_items))
    np.add.at(wins, (i, j), s)
    np.add.at(wins, (j, i), 1 - s)
    return wins


def estimable(wins: np.ndarray) -> bool:
    """Whether the maximum-likelihood strengths exist: the graph with an edge i -> j when i
    beat j at least partly is strongly connected (every item compared, none unbeaten by its
    group). Fewer than two items: False.

    >>> estimable(win_matrix([0, 1], [1, 2], [1, 1], 3))  # 0 > 1 > 2, never beaten back
    False
    """
    return bool(_strongly_connected(np.asarray(wins, dtype=float)[None])[0])


def _strongly_connected(wins: np.ndarray) -> np.ndarray:
    """Per matrix of a stack (k, n, n): is its beat-or-tie graph strongly connected? By
    squaring the reachability matrix until it covers paths of length n (all at once)."""
    n = wins.shape[-1]
    if n < 2:
        return np.zeros(wins.shape[0], dtype=bool)
    reach = (wins > 0) | np.eye(n, dtype=bool)
    for _ in range(max(1, int(np.ceil(np.log2(n))))):
        reach = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
    return np.asarray(reach.all(axis=(1, 2)))


def _mm(wins: np.ndarray, max_iter: int, tol: float) -> tuple[np.ndarray, int]:
    """Hunter's MM iterations on a stack of estimable win matrices (k, n, n), all at once:
    centred log-strengths (k, n) and the iterations used."""
    games = wins + np.swapaxes(wins, 1, 2)
    total_wins = wins.sum(axis=2)
    p = np.ones(total_wins.shape)
    used = 0
    while used < max_iter:
        used += 1
        denom = (games / (p[:, :, None] + p[:, None, :])).sum(axis=2)
        new = total_wins / denom
        new /= np.exp(np.log(new).mean(axis=1))[:, None]
        done = np.max(np.abs(np.log(new) - np.log(p))) < tol
        p = new
        if done:
            break
    theta = np.log(p)
    return theta - theta.mean(axis=1, keepdims=True), used


def bradley_terry(wins: np.ndarray, *, max_iter: int = MAX_ITER, tol: float = TOL) -> BTFit:
    """Maximum-likelihood Bradley-Terry log-strengths of a win matrix (``win_matrix``).

    >>> fit = bradley_terry(win_matrix([0, 0, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0], 2))
    >>> [round(float(x), 6) for x in fit.strengths]  # 3 wins to 1: p0 / p1 = 3
    [0.549306, -0.549306]
    """
    w = np.asarray(wins, dtype=float)
    n = w.shape[0]
    if w.ndim != 2 or w.shape != (n, n):
        raise ValueError(f"wins must be a square matrix, got shape {w.shape}")
    if not estimable(w):
        return BTFit(np.full(n, NAN), False, 0)
    theta, iterations = _mm(w[None], max_iter, tol)
    return BTFit(theta[0], True, iterations)


@dataclass(frozen=True)
class BTBootstrap:
    """Percentile intervals of each strength over the resamples where an estimate exists, and
    how many resamples had none (left out of the intervals)."""

    low: np.ndarray
    high: np.ndarray
    resamples: int
    without_estimate: int


def bootstrap_intervals(
    first: Sequence[int],
    second: Sequence[int],
    score: Sequence[float],
    clusters: Sequence[int],
    n_items: int,
    *,
    level: float = 0.95,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> BTBootstrap:
    """Percentile bootstrap intervals of the centred log-strengths, resampling whole
    ``clusters`` (e.g. a question's comparisons of one model pair, all repetitions together,
    so repeated judgments of one comparison are not counted as independent)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    s, c = np.asarray(score, dtype=float), np.asarray(clusters)
    labels, index = np.unique(c, return_inverse=True)
    # each cluster's own win matrix, once: a resample's matrix is their weighted sum
    per_cluster = np.zeros((labels.size, n_items, n_items))
    np.add.at(per_cluster, (index, np.asarray(first, int), np.asarray(second, int)), s)
    np.add.at(per_cluster, (index, np.asarray(second, int), np.asarray(first, int)), 1 - s)
    rng = np.random.default_rng(seed)
    counts = np.stack(
        [np.bincount(rng.integers(0, labels.size, size=labels.size), minlength=labels.size)
         for _ in range(n_bootstrap)]
    ) if labels.size else np.zeros((n_bootstrap, 0))  # fmt: skip
    stack = np.tensordot(counts, per_cluster, axes=1)  # (n_bootstrap, n, n)
    ok = _strongly_connected(stack)
    missing = int((~ok).sum())
    if not ok.any():
        nan = np.full(n_items, NAN)
        return BTBootstrap(nan, nan.copy(), n_bootstrap, missing)
    draws, _ = _mm(stack[ok], MAX_ITER, TOL)
    tails = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    low, high = np.percentile(draws, tails, axis=0)
    return BTBootstrap(low, high, n_bootstrap, missing)
