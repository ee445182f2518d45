"""Each cell of a table against the rest of its column: does one group's figure differ from
that of all the other groups together?

- a **share** (k of n items at or above a threshold): Fisher's exact test of the 2 x 2 table
  (this group's hits and misses against the other groups' hits and misses), two-sided as
  ``scipy.stats.fisher_exact`` defines it: the hypergeometric probability of every table with
  the same margins that is no more likely than the one seen. Exact at any size, so the small
  cells of a factor x stage table need no large-sample rule. A report's table calls
  ``fisher_exact`` once per cell (``share_vs_rest``); a simulation of many small grids sums
  the tables at once from ``scipy.stats.hypergeom``'s probabilities with scipy's own tie
  tolerance (``share_p_values``; ``fisher_exact`` costs about 2 ms a table), and a test pins the two
  together table by table.
- a **mean**: Welch's t-test, which does not assume that the group and the rest spread alike
  (a factor's items often do not), from each side's mean, variance and count (``scipy.stats.
  ttest_ind_from_stats(equal_var=False)``, equal to ``ttest_ind(equal_var=False)`` on the
  values, for every group at once).

``share_p_values`` and ``mean_p_values`` take arrays whose last axis is the groups, so a
simulation tests many grids in one call.

A cell that cannot be tested has ``p_value`` None and a ``reason``: no items, no other group,
fewer than two values on a side, or no spread on either side. The p-values are raw; a table
corrects them over its family with ``judge.stats.multiplicity``.

This module imports no project module but ``judge.stats``.

>>> [round(t.p_value, 4) for t in share_vs_rest([8, 2, 3], [10, 10, 10])]
[0.0069, 0.1194, 0.4404]
>>> share_vs_rest([1], [4])[0].reason
'no other group to compare with'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

# scipy.stats is imported inside the functions that test: importing it takes over a second,
# and commands that only read a run's figures (``fairjudge gate``) import this module.

FISHER, WELCH = "fisher", "welch"
"""The tests, as report.json's ``test`` writes them."""
TEST_NAMES = {
    FISHER: "Fisher's exact test (two-sided) of the cell's share against the rest of its column",
    WELCH: "Welch's t-test (two-sided) of the cell's mean against the rest of its column",
}


@dataclass(frozen=True)
class CellTest:
    """One cell against the rest: its raw two-sided p-value (None: untested, ``reason`` says
    why) and the test that gave it."""

    p_value: float | None
    test: str
    reason: str = ""


def share_vs_rest(hits: Sequence[int], n: Sequence[int]) -> list[CellTest]:
    """Fisher's exact test (``scipy.stats.fisher_exact``, one table per group) of each
    group's ``hits[i]`` of ``n[i]`` against the other groups' hits of their items, pooled.
    The one-row form a report uses: ``fisher_exact``'s search stays fast on cells of many
    thousand items, where ``share_p_values`` would sum every table of the margins."""
    from scipy import stats

    k = np.asarray(hits, dtype=np.int64)
    size = np.asarray(n, dtype=np.int64)
    if k.shape != size.shape or k.ndim != 1:
        raise ValueError("hits and n must be flat sequences of the same length")
    if (size < 0).any() or (k < 0).any() or (k > size).any():
        raise ValueError("each hits[i] must lie between 0 and n[i]")
    rest_k, rest_n = k.sum() - k, size.sum() - size
    out = []
    for i in range(k.size):
        if size[i] == 0 or rest_n[i] == 0:
            out.append(CellTest(None, FISHER, _why(int(size[i]), int(rest_n[i]))))
            continue
        table = [[int(k[i]), int(size[i] - k[i])], [int(rest_k[i]), int(rest_n[i] - rest_k[i])]]
        out.append(CellTest(float(stats.fisher_exact(table).pvalue), FISHER))
    return out


def share_p_values(hits: ArrayLike, n: ArrayLike) -> np.ndarray:
    """Two-sided Fisher p of each group against the rest of its row, for arrays ``(...,
    groups)`` of hits and items; NaN where a group or its rest has no items."""
    from scipy import stats

    k = np.asarray(hits, dtype=np.int64)
    size = np.asarray(n, dtype=np.int64)
    if k.shape != size.shape or k.ndim < 1:
        raise ValueError("hits and n must be arrays of the same shape (..., groups)")
    if (size < 0).any() or (k < 0).any() or (k > size).any():
        raise ValueError("each hits[i] must lie between 0 and n[i]")
    total = size.sum(axis=-1, keepdims=True)
    hits_all = k.sum(axis=-1, keepdims=True)
    tested = (size > 0) & (total - size > 0)
    # The table [[k, n - k], [K - k, N - K - (n - k)]] with margins N items, K hits and n in
    # the group: k follows hypergeom(M=N, n=K, N=n). Sum the probabilities of every k' with
    # the same margins no more likely than k (scipy's tolerance: 1 + 1e-14).
    grid = np.arange(int(size.max(initial=0)) + 1)
    m, big_k, small_n = (np.broadcast_to(a, k.shape)[..., None] for a in (total, hits_all, size))
    with np.errstate(invalid="ignore", divide="ignore"):
        seen = stats.hypergeom.pmf(k[..., None], m, big_k, small_n)
        every = stats.hypergeom.pmf(grid, m, big_k, small_n)
    every = np.nan_to_num(every, nan=0.0)
    p = np.where(every <= seen * (1 + 1e-14), every, 0.0).sum(axis=-1)
    return np.where(tested, np.minimum(p, 1.0), np.nan)


def mean_vs_rest(groups: Sequence[Sequence[float]]) -> list[CellTest]:
    """Welch's t-test of each group's values against the other groups' values, pooled."""
    arrays = [np.asarray(g, dtype=np.float64) for g in groups]
    if any(a.ndim != 1 for a in arrays):
        raise ValueError("each group must be a flat sequence of numbers")
    count = np.array([a.size for a in arrays], dtype=float)
    mean = np.array([a.mean() if a.size else 0.0 for a in arrays])
    m2 = np.array([((a - a.mean()) ** 2).sum() if a.size else 0.0 for a in arrays])
    low = np.array([a.min() if a.size else np.inf for a in arrays])
    high = np.array([a.max() if a.size else -np.inf for a in arrays])
    p = mean_p_values(count, mean, m2)
    out = []
    for i in range(len(arrays)):
        others = np.arange(len(arrays)) != i
        rest = int(count[others].sum())
        # Spread read from the values themselves: a sum of squares can leave a tiny
        # variance in values that are all equal.
        flat = low[i] == high[i] and low[others].min(initial=np.inf) == high[others].max(
            initial=-np.inf
        )
        if count[i] == 0 or rest == 0:
            out.append(CellTest(None, WELCH, _why(int(count[i]), rest)))
        elif count[i] < 2 or rest < 2:
            out.append(CellTest(None, WELCH, "fewer than two values on a side"))
        elif flat:
            out.append(CellTest(None, WELCH, "no spread on either side"))
        elif np.isnan(p[i]):
            out.append(CellTest(None, WELCH, "undefined"))
        else:
            out.append(CellTest(float(p[i]), WELCH))
    return out


def mean_p_values(count: ArrayLike, mean: ArrayLike, m2: ArrayLike) -> np.ndarray:
    """Two-sided Welch p of each group against the rest of its row, from arrays ``(...,
    groups)`` of each group's count, mean and sum of squared deviations from its mean; NaN
    where a side has fewer than two values or neither side varies. The rest's sum of squares
    is pooled from the groups' (Chan et al.'s parallel formula), never from raw squares."""
    from scipy import stats

    n = np.asarray(count, dtype=float)
    mu = np.asarray(mean, dtype=float)
    ss = np.asarray(m2, dtype=float)
    total_n = n.sum(axis=-1, keepdims=True)
    rest_n = total_n - n
    weighted = (n * mu).sum(axis=-1, keepdims=True) - n * mu
    with np.errstate(invalid="ignore", divide="ignore"):
        rest_mean = weighted / rest_n
        # sum over the other groups j of m2_j + n_j (mean_j - rest mean)^2
        spread = (
            ss[..., None, :] + n[..., None, :] * (mu[..., None, :] - rest_mean[..., :, None]) ** 2
        )
        groups = n.shape[-1]
        spread = np.where(np.eye(groups, dtype=bool), 0.0, spread).sum(axis=-1)
        var, rest_var = ss / (n - 1), spread / (rest_n - 1)
        ok = (n >= 2) & (rest_n >= 2) & ((var > 0) | (rest_var > 0))
        res = stats.ttest_ind_from_stats(
            np.where(ok, mu, 0.0), np.sqrt(np.where(ok, var, 1.0)), np.where(ok, n, 2),
            np.where(ok, rest_mean, 0.0), np.sqrt(np.where(ok, rest_var, 1.0)),
            np.where(ok, rest_n, 2), equal_var=False,
        )  # fmt: skip
    return np.where(ok, np.asarray(res.pvalue, dtype=float), np.nan)


def _why(n: int, rest: int) -> str:
    return "no items" if n == 0 else "no other group to compare with"
