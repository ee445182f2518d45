"""Juries: several judges' scores of the same items combined into one, and whether the jury
agrees with people better than its best single judge.

Combinations, per item, of the k judges' scores (an (n, k) array on one rating scale):

- ``mean`` and ``median`` of the k scores (a median of an even number is the mean of the two
  middle ones, so it may fall between two levels);
- ``majority``: the most frequent level (each score put on the nearest level first, halves
  up). Ties: among the tied levels, the one nearest the median of all k scores; of two
  equally near, the lower one (a tie never makes the jury more lenient);
- ``learnt``: a weighted mean of the judges whose weights are learnt on the rated items, the
  least-squares fit of the human score with weights >= 0 that sum to 1 (so the jury's score
  stays on the scale), solved by ``scipy.optimize.nnls`` with Lawson and Hanson's weighting
  method for the sum-to-one constraint (one extra heavily weighted row of ones). The weights
  are *cross-fitted*: items are split into ``folds`` seeded folds, each fold's jury scores use
  weights learnt on the other folds only, so no item's jury score was fitted to that item's
  own human score and the jury's agreement is not flattered by its fit.

``versus_best`` compares the jury with its best single judge on the same items, paired: the
items are resampled (a percentile bootstrap over items), and in every resample the jury's
statistic and every judge's are recomputed, and the difference is the jury's minus the
*highest* judge's in that resample. Picking the best judge again in each resample puts the
choice's own luck into the interval; the point difference uses the judge best on all items.
Both favour the single judge (the maximum of k noisy statistics is biased upwards), so
"better" means the jury beats even a best judge picked with hindsight. Cross-fitted jury
scores are held fixed across resamples (the weights are not learnt again per resample).

>>> combine(np.array([[1, 2, 2], [1, 3, 5], [2, 4, 4]]), "majority").tolist()
[2.0, 3.0, 4.0]
>>> combine(np.array([[2, 4]]), "majority").tolist()  # tied, equally near the median 3
[2.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import nnls

from judge.stats.bootstrap import (
    Array,
    percentile_interval,
    weighted_kappa,
    weighted_kendall_b,
    weighted_pearson,
    weighted_spearman,
)
from judge.stats.coefficient import DEFAULT_OPTIONS, BootstrapOptions, Coefficient, check_options
from judge.stats.pairs import LABELS, check_labels, to_categories

COMBINES = ("mean", "median", "majority", "learnt")
STATISTICS = ("spearman", "pearson", "kendall", "kappa_quadratic")
BETTER, NOT_SHOWN, WORSE, UNDEFINED = "better", "not shown better", "worse", "undefined"
FOLDS = 5
CHUNK = 250  # resamples drawn at once (memory stays flat for many distinct cells)


def check_scores(scores: ArrayLike, *, labels: Sequence[int] = LABELS) -> Array:
    """``scores`` as an (n, k) float array of finite values within the scale, k >= 2, or
    ValueError naming the problem."""
    levels = check_labels(labels)
    array = np.asarray(scores, dtype=float)
    if array.ndim != 2:
        raise ValueError(f"scores must be items x judges (2-D), got shape {array.shape}")
    if array.shape[1] < 2:
        raise ValueError(f"a jury needs two judges or more, got {array.shape[1]}")
    if not np.all(np.isfinite(array)):
        raise ValueError("scores contain NaN or infinite values; keep items every judge scored")
    if array.size and (array.min() < levels[0] or array.max() > levels[-1]):
        raise ValueError(f"scores must lie within {levels[0]}..{levels[-1]}")
    return array


def majority(scores: ArrayLike, *, labels: Sequence[int] = LABELS) -> Array:
    """The most frequent level per item, ties as the module docstring says."""
    levels = np.asarray(check_labels(labels), dtype=float)
    s = check_scores(scores, labels=labels)
    cats = to_categories(s.ravel(), labels=labels).reshape(s.shape)
    counts = (cats[:, :, None] == levels[None, None, :]).sum(axis=1)  # (n, L)
    tied = counts == counts.max(axis=1, keepdims=True)
    distance = np.abs(levels[None, :] - np.median(s, axis=1, keepdims=True))
    # argmin takes the first of equal distances: the lower level.
    return np.asarray(levels[np.argmin(np.where(tied, distance, np.inf), axis=1)])


def combine(scores: ArrayLike, how: str, *, labels: Sequence[int] = LABELS) -> Array:
    """The jury's score per item by ``mean``, ``median`` or ``majority`` (``learnt`` needs
    human scores: ``cross_fit``)."""
    s = check_scores(scores, labels=labels)
    if how == "mean":
        return np.asarray(s.mean(axis=1))
    if how == "median":
        return np.asarray(np.median(s, axis=1))
    if how == "majority":
        return majority(s, labels=labels)
    raise ValueError(f"how must be mean, median or majority, got {how!r} (learnt: cross_fit)")


def simplex_weights(scores: Array, human: Array) -> Array:
    """Weights w >= 0 with sum(w) = 1 minimising ||scores @ w - human||: NNLS on the rows
    and one row of ones weighted so heavily that its residual (1 - sum w) is negligible, then
    divided by their sum to make it exact."""
    n, k = scores.shape
    heavy = 1e4 * max(1.0, float(np.abs(scores).max(initial=0.0))) * math.sqrt(max(n, 1))
    a = np.vstack([scores, np.full((1, k), heavy)])
    b = np.append(human, heavy)
    w, _ = nnls(a, b)
    total = w.sum()
    return np.asarray(w / total) if total > 0 else np.full(k, 1.0 / k)


@dataclass(frozen=True)
class CrossFit:
    """Cross-fitted jury scores: ``predictions`` per item (each from weights learnt without
    its fold), each fold's weights (folds x judges), the weights learnt on every item (what a
    jury used from now on would apply) and the fold of each item."""

    predictions: Array
    fold_weights: Array
    weights: Array
    folds: NDArray[np.int64]

    @property
    def mean_weights(self) -> Array:
        return np.asarray(self.fold_weights.mean(axis=0))


def cross_fit(
    scores: ArrayLike,
    human: ArrayLike,
    *,
    folds: int = FOLDS,
    seed: int | None = 0,
    labels: Sequence[int] = LABELS,
) -> CrossFit:
    """Learnt-weight jury scores by ``folds``-fold cross-fitting (items assigned to folds in
    a seeded random order, sizes differing by at most one)."""
    s = check_scores(scores, labels=labels)
    h = np.asarray(human, dtype=float)
    if h.shape != (s.shape[0],) or not np.all(np.isfinite(h)):
        raise ValueError(f"human must be {s.shape[0]} finite scores, one per item")
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be a whole number >= 2, got {folds!r}")
    if s.shape[0] < 2 * folds:
        raise ValueError(
            f"learnt weights need at least 2 items per fold: {s.shape[0]} items for {folds} "
            "folds; rate more items or use fewer folds"
        )
    order = np.random.default_rng(seed).permutation(s.shape[0])
    fold = np.empty(s.shape[0], dtype=np.int64)
    fold[order] = np.arange(s.shape[0]) % folds
    low, high = check_labels(labels)[0], check_labels(labels)[-1]
    predictions = np.empty(s.shape[0])
    fold_weights = np.empty((folds, s.shape[1]))
    for f in range(folds):
        held = fold == f
        fold_weights[f] = simplex_weights(s[~held], h[~held])
        predictions[held] = s[held] @ fold_weights[f]
    # A weighted mean lies within the scale; clip only the rounding error at its ends.
    return CrossFit(np.clip(predictions, low, high), fold_weights, simplex_weights(s, h), fold)


def statistic_draws(
    weights: Array,
    columns: Array,
    human: Array,
    statistic: str,
    *,
    labels: Sequence[int] = LABELS,
) -> Array:
    """(B, m): ``statistic`` of each of the m ``columns`` (K, m) against ``human`` (K,) for
    each row of item ``weights`` (B, K) (a resample's counts; ones for the data as they are).
    NaN where a statistic is undefined (constant scores)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    out = np.empty((weights.shape[0], columns.shape[1]))
    levels = np.asarray(check_labels(labels), dtype=float)
    if statistic == "kappa_quadratic":
        cy = np.searchsorted(levels, to_categories(human, labels=labels))
    for j in range(columns.shape[1]):
        x = columns[:, j]
        if statistic == "pearson":
            out[:, j] = weighted_pearson(weights, x, human)
        elif statistic == "spearman":
            out[:, j] = weighted_spearman(weights, x, human)
        elif statistic == "kendall":
            out[:, j] = weighted_kendall_b(weights, x, human)
        else:
            cx = np.searchsorted(levels, to_categories(x, labels=labels))
            out[:, j] = weighted_kappa(weights, cx, cy, levels.size, "quadratic")
    return out


@dataclass(frozen=True)
class VersusBest:
    """The jury against its best single judge on ``statistic`` (see the module docstring):
    every judge's value, the best one's index, ``difference`` = jury - best with its paired
    bootstrap interval, and the verdict (better, not shown better, worse, or undefined with
    ``reason``)."""

    statistic: str
    n: int
    jury: float
    judges: list[float]
    best: int | None
    difference: float
    ci_low: float
    ci_high: float
    confidence: float
    n_bootstrap: int
    verdict: str
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return float(v) if math.isfinite(v) else None

        return {
            "statistic": self.statistic,
            "n": self.n,
            "jury": num(self.jury),
            "judges": [num(v) for v in self.judges],
            "best": self.best,
            "difference": num(self.difference),
            "ci_low": num(self.ci_low),
            "ci_high": num(self.ci_high),
            "confidence": self.confidence,
            "n_bootstrap": self.n_bootstrap,
            "best_judge_chosen": "per resample (the highest judge in each), on all items for "
            "the point difference",
            "verdict": self.verdict,
            "reason": self.reason,
        }


def _interval_alpha(w: Array, x: Array, h: Array) -> Array:
    """(B,) Krippendorff's alpha, interval level, of two coders on every unit, for each row of
    unit weights ``w`` (B, N). With two values per unit the coincidence matrix needs no
    building: of n = 2 sum(w) values, D_o = 2 sum w (x - h)^2 / n and D_e = 2 S / (n - 1),
    S the values' sum of squares about their mean, so alpha = 1 - (n - 1) sum w (x - h)^2 /
    (n S). Memory stays O(B N) however many distinct values a learnt jury's scores take
    (the coincidence matrix would be values x values per unit)."""
    n = 2 * w.sum(axis=1)
    mean = (w @ (x + h)) / n
    spread = (w * ((x - mean[:, None]) ** 2 + (h - mean[:, None]) ** 2)).sum(axis=1)
    observed = w @ ((x - h) ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = 1.0 - (n - 1) * observed / (n * spread)
    return np.asarray(np.where((n >= 4) & (spread > 0), out, np.nan))


def pair_alpha(
    scores: ArrayLike, human: ArrayLike, *, options: BootstrapOptions = DEFAULT_OPTIONS
) -> Coefficient:
    """Krippendorff's alpha (interval level) of two coders per item, the scores and the human
    score, with a percentile bootstrap interval over items; NaN with the reason when every
    value is the same or there are fewer than 2 items."""
    x, h = np.asarray(scores, dtype=float), np.asarray(human, dtype=float)
    value = float(_interval_alpha(np.ones((1, x.size)), x, h)[0]) if x.size else math.nan
    if not math.isfinite(value):
        reason = "no items" if x.size == 0 else "fewer than 2 items or every value the same"
        return Coefficient.undefined(int(x.size), reason)
    low = high = math.nan
    if options.n_bootstrap:
        # Items with the same pair of values are one cell: a resample is a multinomial draw
        # of the cells' counts.
        cells, counts = np.unique(np.column_stack([x, h]), axis=0, return_counts=True)
        p = counts / x.size
        rng = np.random.default_rng(options.seed)
        draws = [
            _interval_alpha(
                rng.multinomial(x.size, p, size=size).astype(float), cells[:, 0], cells[:, 1]
            )
            for size in _chunks(options.n_bootstrap)
        ]
        low, high = percentile_interval(np.concatenate(draws), options.confidence)
    return Coefficient(value, low, high, None, int(x.size))


def _chunks(total: int) -> list[int]:
    return [min(CHUNK, total - start) for start in range(0, total, CHUNK)]


def _best(values: Array) -> Array:
    """Row-wise maximum ignoring NaN; NaN where every value is."""
    with np.errstate(invalid="ignore"):
        finite = np.where(np.isfinite(values), values, -np.inf)
        top = finite.max(axis=1)
    return np.asarray(np.where(np.isfinite(top), top, np.nan))


def versus_best(
    jury: ArrayLike,
    judges: ArrayLike,
    human: ArrayLike,
    *,
    statistic: str = "spearman",
    options: BootstrapOptions = DEFAULT_OPTIONS,
    labels: Sequence[int] = LABELS,
) -> VersusBest:
    """Jury minus best single judge on ``statistic``, paired over items."""
    options = check_options(options)
    s = check_scores(judges, labels=labels)
    j = np.asarray(jury, dtype=float)
    h = np.asarray(human, dtype=float)
    if j.shape != (s.shape[0],) or h.shape != (s.shape[0],):
        raise ValueError(f"jury and human must each hold {s.shape[0]} scores, one per item")
    # Items with the same (human, jury, judges) scores are one cell with a count: resampling
    # items is a multinomial draw over the cells.
    cells, counts = np.unique(np.column_stack([h, j, s]), axis=0, return_counts=True)
    columns, ch = cells[:, 1:], cells[:, 0]
    point = statistic_draws(counts[None].astype(float), columns, ch, statistic, labels=labels)[0]
    values = [float(v) for v in point[1:]]
    finite = [v for v in values if math.isfinite(v)]
    best = values.index(max(finite)) if finite else None
    difference = point[0] - max(finite) if finite else math.nan
    low, high, verdict, reason = math.nan, math.nan, UNDEFINED, ""
    if not math.isfinite(difference):
        reason = f"{statistic} is undefined for the jury or every judge (constant scores)"
    elif options.n_bootstrap == 0 or s.shape[0] < 2:
        reason = "no interval (no bootstrap resamples, or fewer than 2 items)"
    else:
        low, high = _interval(columns, ch, counts, statistic, options, labels)
        if not (math.isfinite(low) and math.isfinite(high)):
            reason = "the statistic is undefined on most resamples"
        else:
            verdict = BETTER if low > 0 else WORSE if high < 0 else NOT_SHOWN
    return VersusBest(
        statistic, int(s.shape[0]), float(point[0]), values, best, float(difference),
        low, high, options.confidence, options.n_bootstrap, verdict, reason,
    )  # fmt: skip


def _interval(
    columns: Array,
    human: Array,
    counts: NDArray[np.int64],
    statistic: str,
    options: BootstrapOptions,
    labels: Sequence[int],
) -> tuple[float, float]:
    """Percentile interval of jury - best judge over multinomial resamples of the cells."""
    rng = np.random.default_rng(options.seed)
    n, draws = int(counts.sum()), []
    for size in _chunks(options.n_bootstrap):
        w = rng.multinomial(n, counts / n, size=size).astype(float)
        stats = statistic_draws(w, columns, human, statistic, labels=labels)
        draws.append(stats[:, 0] - _best(stats[:, 1:]))
    return percentile_interval(np.concatenate(draws), options.confidence)
