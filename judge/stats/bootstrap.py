"""Fast item bootstrap for agreement coefficients on rating scales.

Scores on a rating scale (a judge's integer, the mean of a few annotators) take few distinct
values, so n items collapse to K distinct (judge, human) pairs with counts. Resampling n items
with replacement is then exactly a multinomial draw of counts over those K pairs, and every
coefficient can be evaluated for all resamples at once from the counts.

scipy and scikit-learn compute the point estimates and p-values; their functions take no
frequency weights, so the resampled statistics are evaluated here with the same formulas
(Pearson on weighted moments, Spearman as Pearson on mid-ranks, Kendall's tau-b from the
contingency table, Cohen's kappa from the confusion matrix exactly as
``sklearn.metrics.cohen_kappa_score`` does; Gwet's AC1/AC2 and the majority-class baseline
from the resampled margins, ``judge.stats.gwet`` and ``judge.stats.baseline``).
tests/judge/stats/test_bootstrap.py checks each one against scipy/sklearn (AC against a
plain loop) on explicitly expanded resamples. When the data have too many distinct
values for counts to help, resamples are drawn as indices and the libraries are called
directly. A resample on which a statistic is undefined (constant scores) gives NaN, computed
without asking the library (which would warn); ``percentile_interval`` skips those.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from judge.stats.baseline import majority_ac1, majority_share
from judge.stats.gwet import agreement_weights, gwet_ac, gwet_from_margins

Array = NDArray[np.float64]
MAX_CELLS = 4096  # above this many distinct pairs, fall back to resampling indices


def category_index(values: Array, labels: NDArray[np.int64]) -> NDArray[np.int64]:
    """Position of each (already categorised) value in the increasing ``labels``: 0 for the
    lowest level whatever its value (0 on a 0-3 scale, 1 on 1-5). Kappa's weights and
    within-one agreement count distance in positions, as scikit-learn's weights do."""
    index = np.searchsorted(labels, values)
    if values.size and (
        index.max() >= labels.size or not np.array_equal(np.asarray(labels)[index], values)
    ):
        raise ValueError("values must be categories, each one of labels")
    return index.astype(np.int64)


@dataclass
class PairTable:
    """Distinct (x, y) pairs with their counts, plus one-hot maps used by the statistics."""

    x: Array  # (K,) judge value per cell
    y: Array  # (K,) human value per cell
    cx: Array  # (K,) judge category per cell
    cy: Array  # (K,) human category per cell
    counts: NDArray[np.int64]  # (K,)

    @classmethod
    def from_pairs(cls, x: Array, y: Array, cx: Array, cy: Array) -> PairTable:
        """Cells sorted by (x, y, cx, cy), as ``np.unique(..., axis=0)`` gives them. Each
        column is coded by its own distinct values and the four codes are combined into one
        integer (mixed radix, x most significant), whose ``np.unique`` is far cheaper than
        sorting rows: 100,000 pairs take milliseconds, not a fifth of a second."""
        columns = [x, y, cx, cy]
        coded = [np.unique(c, return_inverse=True) for c in columns]
        sizes = [values.size for values, _ in coded]
        if x.size == 0 or math.prod(sizes) >= 2**62:  # too many values to code in one int
            stacked = np.column_stack(columns)
            cells, counts = np.unique(stacked, axis=0, return_counts=True)
            return cls(cells[:, 0], cells[:, 1], cells[:, 2], cells[:, 3], counts)
        code: NDArray[np.int64] = np.zeros(x.size, dtype=np.int64)
        for (_, inverse), size in zip(coded, sizes, strict=True):
            code = np.asarray(code * size + inverse.reshape(-1), dtype=np.int64)
        # Sorted codes are sorted rows, as np.unique(axis=0) orders them; ``first`` picks one
        # item of each cell.
        _, first, counts = np.unique(code, return_index=True, return_counts=True)
        return cls(x[first], y[first], cx[first], cy[first], counts.astype(np.int64))

    @property
    def n(self) -> int:
        return int(self.counts.sum())


def resample_counts(
    counts: NDArray[np.int64], n_resamples: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """(B, K) counts: each row is one bootstrap resample of the n items."""
    n = int(counts.sum())
    return rng.multinomial(n, counts / n, size=n_resamples).astype(np.float64)


def weighted_pearson(w: Array, x: Array, y: Array) -> Array:
    """Pearson r per row of weights ``w`` (B, K); ``x``/``y`` are (K,) or (B, K)."""
    n = w.sum(axis=1)
    mx = (w * x).sum(axis=1) / n
    my = (w * y).sum(axis=1) / n
    dx = x - mx[:, None]
    dy = y - my[:, None]
    sxy = (w * dx * dy).sum(axis=1)
    sxx = (w * dx * dx).sum(axis=1)
    syy = (w * dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(sxy / np.sqrt(sxx * syy))


def _value_counts(w: Array, values: Array) -> tuple[Array, NDArray[np.int64]]:
    """Per-row counts of each distinct value (B, V), and the cell -> value index (K,)."""
    distinct, index = np.unique(values, return_inverse=True)
    onehot = np.zeros((values.size, distinct.size))
    onehot[np.arange(values.size), index] = 1.0
    return w @ onehot, index


def midranks(w: Array, values: Array) -> Array:
    """(B, K) mid-rank of each cell's value within each resample (ties share the mean rank)."""
    per_value, index = _value_counts(w, values)
    below = np.cumsum(per_value, axis=1) - per_value
    ranks = below + (per_value + 1.0) / 2.0
    return np.asarray(ranks[:, index])


def weighted_spearman(w: Array, x: Array, y: Array) -> Array:
    return weighted_pearson(w, midranks(w, x), midranks(w, y))


def weighted_kendall_b(w: Array, x: Array, y: Array) -> Array:
    """Kendall's tau-b per resample, from the (B, Vx, Vy) contingency table."""
    _, ix = np.unique(x, return_inverse=True)
    _, iy = np.unique(y, return_inverse=True)
    vx, vy = ix.max() + 1, iy.max() + 1
    onehot = np.zeros((x.size, vx * vy))
    onehot[np.arange(x.size), ix * vy + iy] = 1.0
    table = (w @ onehot).reshape(-1, vx, vy)
    # above[b, i, j] = sum of table[b, k, l] over k > i, l > j; below_left: k > i, l < j
    rev = np.flip(np.cumsum(np.cumsum(np.flip(table, (1, 2)), 1), 2), (1, 2))
    above = np.zeros_like(table)
    above[:, :-1, :-1] = rev[:, 1:, 1:]
    rows_after = np.flip(np.cumsum(np.flip(table, 1), 1), 1)  # sum over k >= i
    left = np.cumsum(rows_after, 2)  # sum over k >= i, l <= j
    below_left = np.zeros_like(table)
    below_left[:, :-1, 1:] = left[:, 1:, :-1]
    concordant = (table * above).sum(axis=(1, 2))
    discordant = (table * below_left).sum(axis=(1, 2))
    n = table.sum(axis=(1, 2))
    pairs = n * (n - 1) / 2
    rows = table.sum(axis=2)
    cols = table.sum(axis=1)
    ties_x = (rows * (rows - 1) / 2).sum(axis=1)
    ties_y = (cols * (cols - 1) / 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((concordant - discordant) / np.sqrt((pairs - ties_x) * (pairs - ties_y)))


def kappa_weights(n_labels: int, weights: str | None) -> Array:
    i, j = np.meshgrid(np.arange(n_labels), np.arange(n_labels), indexing="ij")
    if weights is None:
        return (i != j).astype(np.float64)
    if weights == "linear":
        return np.abs(i - j).astype(np.float64)
    if weights == "quadratic":
        return ((i - j) ** 2).astype(np.float64)
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def weighted_kappa(
    w: Array, cx: NDArray[np.int64], cy: NDArray[np.int64], n_labels: int, weights: str | None
) -> Array:
    """Cohen's kappa per resample (sklearn's formula: 1 - sum(W * observed) / sum(W *
    expected), expected = outer(row sums, column sums) / n), for ``cx``/``cy`` category
    positions in ``range(n_labels)``. The observed term needs only each cell's weight and the
    expected term only the margins, so no (B, L, L) confusion matrix is built: a 1-10 or
    0-100 scale costs what a 1-5 one does."""
    wm = kappa_weights(n_labels, weights)
    observed = w @ wm[cx, cy]
    rows = np.zeros((cx.size, n_labels))
    rows[np.arange(cx.size), cx] = 1.0
    cols = np.zeros((cy.size, n_labels))
    cols[np.arange(cy.size), cy] = 1.0
    row_sums, col_sums = w @ rows, w @ cols
    expected = ((row_sums @ wm) * col_sums).sum(axis=1) / w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(1.0 - observed / expected)


def one_hot(positions: NDArray[np.int64], n_labels: int) -> Array:
    """(K, n_labels) indicator of each cell's category position."""
    out = np.zeros((positions.size, n_labels))
    out[np.arange(positions.size), positions] = 1.0
    return out


def percentile_interval(values: Array, confidence: float) -> tuple[float, float]:
    """Percentile CI, ignoring resamples where the statistic is undefined (NaN); NaN when
    more than half of them are undefined."""
    finite = values[np.isfinite(values)]
    if finite.size < max(2, values.size // 2):
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


# Statistics by name: (vectorised on counts, library call on arrays for the fallback path).
def _lib_kappa(weights: str | None, labels: NDArray[np.int64]) -> Callable[[Array, Array], float]:
    def call(a: Array, b: Array) -> float:
        if np.ptp(a) == 0 and np.ptp(b) == 0 and a[0] == b[0]:
            return float("nan")  # one shared category: kappa is 0/0
        return float(cohen_kappa_score(a, b, labels=labels, weights=weights))

    return call


def _lib_correlation(
    fn: Callable[[Array, Array], Any],
) -> Callable[[Array, Array, Array, Array], float]:
    def call(x: Array, y: Array, a: Array, b: Array) -> float:
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            return float("nan")  # constant resample: the correlation is 0/0
        return float(fn(x, y).statistic)

    return call


def _lib_category(
    fn: Callable[[NDArray[np.int64], NDArray[np.int64]], float], labels: NDArray[np.int64]
) -> Callable[[Array, Array, Array, Array], float]:
    """A statistic of two arrays of category positions, called on resampled categories."""
    return lambda x, y, a, b: fn(category_index(a, labels), category_index(b, labels))


Statistic = tuple[Callable[[Array], Array], Callable[[Array, Array, Array, Array], float]]


def chance_statistics(
    cx: NDArray[np.int64], cy: NDArray[np.int64], labels: NDArray[np.int64]
) -> dict[str, Statistic]:
    """Gwet's AC1/AC2 and the majority-class baseline (exact agreement and AC1 of always
    answering the humans' most frequent category) on cells of category positions."""
    k = labels.size
    rows, cols = one_hot(cx, k), one_hot(cy, k)

    def ac(weights: str | None) -> Statistic:
        wm = agreement_weights(k, weights)
        agree = wm[cx, cy]
        return (
            lambda w: gwet_from_margins(w @ agree, w @ rows, w @ cols, wm),
            _lib_category(lambda a, b: gwet_ac(a, b, k, weights=weights), labels),
        )

    def human_counts(b: NDArray[np.int64]) -> Array:
        return np.bincount(b, minlength=k).astype(np.float64)[None]

    return {
        "ac1": ac(None),
        "ac2_linear": ac("linear"),
        "ac2_quadratic": ac("quadratic"),
        "majority_baseline": (
            lambda w: majority_share(w @ cols),
            _lib_category(lambda a, b: float(majority_share(human_counts(b))[0]), labels),
        ),
        "majority_baseline_ac1": (
            lambda w: majority_ac1(w @ cols),
            _lib_category(lambda a, b: float(majority_ac1(human_counts(b))[0]), labels),
        ),
    }


def pair_statistics(table: PairTable, labels: NDArray[np.int64]) -> dict[str, Statistic]:
    cx = category_index(table.cx, labels)
    cy = category_index(table.cy, labels)
    k = labels.size
    apart = np.abs(cx - cy)  # categories apart, in positions on the scale

    def kappa(weights: str | None) -> Callable[[Array], Array]:
        return lambda w: weighted_kappa(w, cx, cy, k, weights)

    def lib_kappa(weights: str | None) -> Callable[[Array, Array, Array, Array], float]:
        f = _lib_kappa(weights, labels)
        return lambda x, y, a, b: f(a, b)

    return {
        "pearson": (
            lambda w: weighted_pearson(w, table.x, table.y),
            _lib_correlation(stats.pearsonr),
        ),
        "spearman": (
            lambda w: weighted_spearman(w, table.x, table.y),
            _lib_correlation(stats.spearmanr),
        ),
        "kendall": (
            lambda w: weighted_kendall_b(w, table.x, table.y),
            _lib_correlation(stats.kendalltau),
        ),
        "kappa": (kappa(None), lib_kappa(None)),
        "kappa_linear": (kappa("linear"), lib_kappa("linear")),
        "kappa_quadratic": (kappa("quadratic"), lib_kappa("quadratic")),
        "exact_agreement": (
            lambda w: (w * (table.cx == table.cy)).sum(1) / w.sum(1),
            lambda x, y, a, b: float(np.mean(a == b)),
        ),
        "within_one": (
            lambda w: (w * (apart <= 1)).sum(1) / w.sum(1),
            lambda x, y, a, b: float(
                np.mean(np.abs(category_index(a, labels) - category_index(b, labels)) <= 1)
            ),
        ),
        "mean_difference": (
            lambda w: (w * (table.x - table.y)).sum(1) / w.sum(1),
            lambda x, y, a, b: float(np.mean(x - y)),
        ),
        **chance_statistics(cx, cy, labels),
    }


def bootstrap_pairs(
    x: Array,
    y: Array,
    cx: Array,
    cy: Array,
    labels: NDArray[np.int64],
    *,
    n_resamples: int,
    seed: int | None,
    confidence: float,
    chunk: int = 250,
) -> dict[str, tuple[float, float]]:
    """Percentile CIs for every pair statistic, by resampling items."""
    rng = np.random.default_rng(seed)
    table = PairTable.from_pairs(x, y, cx, cy)
    statistics = pair_statistics(table, labels)
    draws: dict[str, list[Array]] = {name: [] for name in statistics}
    if table.counts.size <= MAX_CELLS:
        done = 0
        while done < n_resamples:
            w = resample_counts(table.counts, min(chunk, n_resamples - done), rng)
            for name, (vectorised, _) in statistics.items():
                draws[name].append(vectorised(w))
            done += w.shape[0]
    else:
        n = x.size
        for _ in range(n_resamples):
            idx = rng.integers(0, n, n)
            for name, (_, library) in statistics.items():
                draws[name].append(np.array([library(x[idx], y[idx], cx[idx], cy[idx])]))
    return {
        name: percentile_interval(np.concatenate(vals), confidence) for name, vals in draws.items()
    }
