"""Judge-vs-human agreement on a sample drawn with unequal inclusion probabilities.

A stratified or disagreement-weighted annotation campaign rates some kinds of items more often
than others, so plain coefficients describe the sample, not the judge run. Weighting each item
by ``1 / inclusion probability`` undoes that: every population total a coefficient is built
from (the count of items, the sums of x, y, x², y², xy) is replaced by its Horvitz-Thompson
estimate, and the coefficient is computed from those estimates. With equal weights every
function here equals its unweighted counterpart (scipy's ``pearsonr`` / ``spearmanr``, a plain
mean).

- ``weighted_pearson``: mean, variances and covariance with weights ``w``:
  ``r = sum w (x - mx)(y - my) / sqrt(sum w (x - mx)^2 * sum w (y - my)^2)`` with
  ``mx = sum w x / sum w``.
- ``weighted_spearman``: ``weighted_pearson`` on weighted midranks (``weighted_ranks``).
- ``weighted_mean_difference``: ``sum w (judge - human) / sum w`` (the Hajek estimator of the
  population mean difference).

Multiplying every weight by the same constant changes nothing, so weights need not sum to the
population size. No p-value or interval is given: the usual ones assume a simple random sample
(``p_value`` is None and the interval NaN). An undefined coefficient (fewer than 3 items for a
correlation, constant scores) is NaN with its ``undefined_reason`` and one ``UndefinedWarning``
unless ``warn=False``, as in ``judge.stats.pairs``.

>>> round(weighted_spearman([1, 2, 3, 4], [1, 3, 2, 4], [1, 1, 1, 1]).value, 3)
0.8
>>> weighted_ranks([5, 7, 7], [2, 1, 3]).tolist()  # 5 holds ranks 1-2, the two 7s ranks 3-6
[1.5, 4.5, 4.5]
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from judge.stats.coefficient import Coefficient, as_vector, warn_undefined

Array = NDArray[np.float64]
SIDES = ("the judge", "the humans")


def _values(values: ArrayLike, name: str) -> Array:
    return as_vector(values, name, missing="unrated")


def _weights(weights: ArrayLike, size: int) -> Array:
    w = _values(weights, "weights")
    if w.size != size:
        raise ValueError(f"weights must have one value per item ({w.size} != {size})")
    if w.size and w.min() <= 0:
        raise ValueError(
            f"weights must be positive (1 / inclusion probability), got minimum {w.min():g}"
        )
    return w


def _paired(judge: ArrayLike, human: ArrayLike, weights: ArrayLike) -> tuple[Array, Array, Array]:
    x, y = _values(judge, "judge"), _values(human, "human")
    if x.size != y.size:
        raise ValueError(f"judge and human must have the same length ({x.size} != {y.size})")
    return x, y, _weights(weights, x.size)


def weighted_ranks(values: ArrayLike, weights: ArrayLike) -> Array:
    """Weighted midranks: a value's rank is the total weight of the smaller values plus half
    of its tie block's weight, plus 1/2.

    With whole-number weights this is exactly the midrank the value gets when each item is
    repeated ``weight`` times (a tie block of total weight W after C smaller copies holds
    ranks C+1..C+W, whose mean is C + (W+1)/2); with weights 1 it is scipy's ``rankdata``.
    The constant 1/2 changes no correlation; it only makes those two identities exact.
    """
    v = _values(values, "values")
    w = _weights(weights, v.size)
    distinct, block = np.unique(v, return_inverse=True)
    block_weight = np.bincount(block, weights=w, minlength=distinct.size)
    below = np.cumsum(block_weight) - block_weight  # weight of the strictly smaller values
    return np.asarray((below + (block_weight + 1) / 2)[block], dtype=np.float64)


def _reason(x: Array, y: Array) -> str | None:
    if x.size < 3:
        return "no items" if x.size == 0 else f"fewer than 3 items (n={x.size})"
    said = [
        f"{side} gave every item {v[0]:g}"
        for side, v in zip(SIDES, (x, y), strict=True)
        if np.ptp(v) == 0
    ]
    return "constant ratings: " + " and ".join(said) if said else None


def _pearson(x: Array, y: Array, w: Array) -> float:
    share = w / w.sum()
    dx, dy = x - share @ x, y - share @ y
    value = float(share @ (dx * dy) / math.sqrt(float(share @ dx**2) * float(share @ dy**2)))
    return max(-1.0, min(1.0, value))  # rounding can step just past +-1


def _result(name: str, value: float, reason: str | None, n: int, warn: bool) -> Coefficient:
    if reason is not None:
        out = Coefficient.undefined(n, reason)
    else:
        out = Coefficient(value, math.nan, math.nan, None, n)
    if warn:
        warn_undefined([(name, out)], stacklevel=4)
    return out


def weighted_pearson(
    judge: ArrayLike, human: ArrayLike, weights: ArrayLike, *, warn: bool = True
) -> Coefficient:
    """Pearson's r of per-item ``judge`` and ``human`` scores, item i weighted by
    ``weights[i]`` (1 / its inclusion probability): an estimate of the judge run's r.

    >>> weighted_pearson([1, 2, 3], [1, 2, 4], [1, 1, 1]).value == weighted_pearson(
    ...     [1, 2, 3], [1, 2, 4], [5, 5, 5]).value
    True
    """
    x, y, w = _paired(judge, human, weights)
    reason = _reason(x, y)
    value = math.nan if reason else _pearson(x, y, w)
    return _result("weighted pearson", value, reason, int(x.size), warn)


def weighted_spearman(
    judge: ArrayLike, human: ArrayLike, weights: ArrayLike, *, warn: bool = True
) -> Coefficient:
    """Spearman's rho with weights: ``weighted_ranks`` of each side (ties share a midrank),
    then ``weighted_pearson`` of the ranks with the same weights. With whole-number weights
    this equals scipy's ``spearmanr`` on the items repeated ``weight`` times."""
    x, y, w = _paired(judge, human, weights)
    reason = _reason(x, y)
    value = math.nan if reason else _pearson(weighted_ranks(x, w), weighted_ranks(y, w), w)
    return _result("weighted spearman", value, reason, int(x.size), warn)


def weighted_mean_difference(
    judge: ArrayLike, human: ArrayLike, weights: ArrayLike, *, warn: bool = True
) -> Coefficient:
    """Weighted mean of ``judge - human`` (negative: the judge is harsher), an estimate of the
    mean difference over the whole judge run; undefined only with no items.

    >>> weighted_mean_difference([4, 2], [3, 2], [3, 1]).value
    0.75
    """
    x, y, w = _paired(judge, human, weights)
    reason = None if x.size else "no items"
    value = math.nan if reason else float(w @ (x - y) / w.sum())
    return _result("weighted mean_difference", value, reason, int(x.size), warn)


def effective_size(weights: ArrayLike) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2``: how many equally weighted items
    the weighted sample is worth (n with equal weights, fewer the more unequal they are).

    >>> effective_size([1, 1, 1, 1]), effective_size([3, 1])
    (4.0, 1.6)
    """
    w = _values(weights, "weights")
    if w.size and w.min() <= 0:
        raise ValueError(
            f"weights must be positive (1 / inclusion probability), got minimum {w.min():g}"
        )
    return float(w.sum() ** 2 / (w @ w)) if w.size else 0.0
