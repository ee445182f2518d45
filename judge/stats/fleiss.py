"""Fleiss' kappa among any number of raters, missing ratings allowed, with an item bootstrap CI.

Fleiss (1971) compares how often two ratings of one item fall in the same category with how
often they would by chance, given how often each category is used overall:

    P_i = sum_k n_ik (n_ik - 1) / (r_i (r_i - 1))   agreement on item i (r_i ratings)
    P_o = mean of P_i                                 observed agreement
    p_k = mean over items of n_ik / r_i               share of category k
    P_e = sum_k p_k ** 2                              chance agreement
    kappa = (P_o - P_e) / (1 - P_e)

With every item rated by the same number of raters this is Fleiss' formula exactly (p_k is then
his pooled share); with missing ratings it is the generalisation in Gwet's Handbook of
Inter-Rater Reliability (each item's shares weigh equally). Items with a single rating carry no
agreement and are left out, as for Krippendorff's alpha, so n counts items rated at least twice.
Fleiss' kappa is nominal: categories have no order (a mean rating first goes to the nearest
level of the scale, like Cohen's kappa in ``judge.stats.pairs``).

>>> table = [[2, 0], [0, 2], [1, 1]]  # 3 items, 2 raters, 2 categories
>>> round(float(kappa_from_counts(table)), 4)  # P_o = 2/3, P_e = 1/2
0.3333
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from judge.stats.bootstrap import Array, percentile_interval
from judge.stats.coefficient import DEFAULT_OPTIONS, BootstrapOptions, Coefficient, check_options
from judge.stats.matrix import RatingMatrix
from judge.stats.pairs import LABELS, check_labels, to_categories

CHUNK = 250  # bootstrap resamples evaluated at once: (CHUNK, items) weights


def category_counts(matrix: RatingMatrix, labels: Sequence[int] = LABELS) -> NDArray[np.int64]:
    """(items, levels) counts: how many raters put each item in each level of ``labels``."""
    levels = np.asarray(check_labels(labels), dtype=float)
    values = matrix.values
    rated = ~np.isnan(values)
    counts = np.zeros((values.shape[1], levels.size), dtype=np.int64)
    rows, items = np.nonzero(rated)
    categories = to_categories(values[rows, items], labels=labels)
    np.add.at(counts, (items, np.searchsorted(levels, categories)), 1)
    return counts


def _per_item(table: NDArray[np.float64]) -> tuple[Array, Array]:
    """Each item's agreement P_i and its category shares n_ik / r_i (items rated twice+)."""
    r = table.sum(axis=1)
    agreement = (table * (table - 1)).sum(axis=1) / (r * (r - 1))
    return agreement, table / r[:, None]


def _kappa(weights: Array, agreement: Array, shares: Array) -> Array:
    """Kappa per row of item ``weights`` (B, n): how often each item is drawn."""
    total = weights.sum(axis=1)
    observed = weights @ agreement / total
    chance = ((weights @ shares / total[:, None]) ** 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        # One category only (chance agreement 1): kappa is 0/0, NaN, skipped by the CI.
        return np.where(1 - chance > 1e-12, (observed - chance) / (1 - chance), np.nan)


def kappa_from_counts(table: ArrayLike) -> float:
    """Fleiss' kappa of an (items, categories) table of counts; rows with fewer than two
    ratings are left out. NaN when no item has two ratings or one category holds them all."""
    counts = np.asarray(table, dtype=float)
    if counts.ndim != 2 or np.any(counts < 0):
        raise ValueError("table must be a 2-D array of counts >= 0 (items x categories)")
    counts = counts[counts.sum(axis=1) >= 2]
    if counts.shape[0] == 0:
        return math.nan
    agreement, shares = _per_item(counts)
    return float(_kappa(np.ones((1, counts.shape[0])), agreement, shares)[0])


def fleiss_kappa(
    matrix: RatingMatrix,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    labels: Sequence[int] = LABELS,
) -> Coefficient:
    """Fleiss' kappa among the raters of ``matrix`` on the levels of ``labels`` (1-5 unless
    given), with a percentile CI from resampling the items rated at least twice.

    Undefined (NaN with its reason; the caller warns) when no item has two ratings or every
    rating falls in one level.
    """
    options = check_options(options)
    levels = check_labels(labels)
    table = category_counts(matrix, levels)
    table = table[table.sum(axis=1) >= 2].astype(float)
    n = int(table.shape[0])
    if n == 0:
        return Coefficient.undefined(0, "no item has ratings from two or more raters")
    used = np.flatnonzero(table.sum(axis=0))
    if used.size == 1:
        return Coefficient.undefined(n, f"constant ratings: every rating is {levels[used[0]]}")
    agreement, shares = _per_item(table)
    value = float(_kappa(np.ones((1, n)), agreement, shares)[0])
    rng = np.random.default_rng(options.seed)
    draws, done = [], 0
    while n >= 2 and done < options.n_bootstrap:
        size = min(CHUNK, options.n_bootstrap - done)
        weights = rng.multinomial(n, np.full(n, 1 / n), size=size).astype(float)
        draws.append(_kappa(weights, agreement, shares))
        done += size
    low, high = (
        percentile_interval(np.concatenate(draws), options.confidence)
        if draws
        else (math.nan, math.nan)
    )
    return Coefficient(value, low, high, None, n)
