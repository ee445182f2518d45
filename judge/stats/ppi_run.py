"""Prediction-powered means for a probability sample drawn from a fixed set of judged items
(a weighted rating campaign of a judge run), with a variance that accounts for the overlap.

``judge.stats.ppi.ppi_mean`` follows ppi_py: the rated items and the judge-only items are two
separate samples. A stratified or disagreement campaign draws its rated items *from* the run's
judged items with unequal, known probabilities ``pi``, and the probabilities of the items it
did not draw are not stored, so the unrated items cannot be weighted back to the run. Here
the judge's part is the mean over *every* judged item (the rated ones included), so it needs
no weight, and the variance is taken for that overlap::

    estimate = lam * mean(yhat_all) + sum(w (y - lam * yhat)) / sum(w),   w = 1 / pi

Against the run's own human mean ``theta_M`` (over its ``M`` judged items), ``estimate -
theta_M`` is the sampling error of the weighted mean of the residuals ``r = y - lam * yhat``
alone: the judge's mean over the whole run is known exactly, it adds no error. So the
variance has two parts, independent of each other:

- the design variance of the weighted (Hajek) mean of ``r``, linearised, with the finite
  population correction ``1 - pi``: ``sum((1 - pi_i) a_i**2)`` for ``a_i = w_i (r_i - rbar)
  / sum(w)``; with ``strata`` (one label per rated item) the squares are taken around each
  stratum's mean and scaled by ``n_h / (n_h - 1)`` (Cochran's stratified variance with its
  correction, ``sum_h W_h**2 (1 - f_h) s_h**2 / n_h``);
- ``s_y**2 / M``, the variance of the run's own mean around the mean of the population its
  items come from (``s_y**2`` the weighted variance of the ratings): the same target as
  ppi_py's, answers *like* these rather than these answers only.

The variance is a quadratic in ``lam`` (the second part does not depend on it), so the tuned
``lam`` is its minimum, ``C(a, b) / C(b, b)`` with ``b`` the judge's scores' ``a``, clipped
to [0, 1] (the regression coefficient of the difference estimator of survey sampling).
``lam = 0`` is the human-only weighted mean with the same variance. For a simple random
sample (``pi = n / M`` for every item) and ``lam = 0`` the variance is ``(1 - n / M) s**2 / n
+ s**2 / M = s**2 / n``, ppi_py's classical one exactly; with a judge it is, to first order,
the variance of ppi_py's convention (``ppi_mean`` with the unrated items), at the weight
``lam * (M - n) / M``.

Intervals: normal, Student t with ``n - 1`` degrees of freedom under ``t_below`` rated items
(``judge.stats.ppi``'s rule). This module imports no project module but ``judge.stats.ppi``.

>>> r = ppi_run_mean([1, 3], [2, 4], [2, 4, 6, 8], probabilities=[0.5, 0.5], lam=1)
>>> r.estimate  # judge mean 5 over the 4 items, less its bias of 1 on the 2 rated
4.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from judge.stats.ppi import (
    SMALL_N,
    GapEstimate,
    MeanEstimate,
    _alpha,
    _df,
    _effective_n,
    _interval,
    _interval_name,
    _lam,
    _strata,
    _t_below,
    _vector,
    gap_df,
)

Array = NDArray[np.float64]


@dataclass(frozen=True)
class RunGroup:
    """One group's data for ``ppi_run_gap``: the same arguments as ``ppi_run_mean``."""

    y: ArrayLike
    yhat: ArrayLike
    yhat_all: ArrayLike
    probabilities: ArrayLike
    strata: Sequence[object] | None = None


@dataclass(frozen=True)
class _Sample:
    y: Array
    yhat: Array
    judge_mean: float
    M: int
    w: Array  # 1 / pi
    keep: Array  # 1 - pi, the finite population correction
    codes: NDArray[np.int64] | None

    @property
    def n(self) -> int:
        return int(self.y.size)


def _prepare(
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_all: ArrayLike,
    probabilities: ArrayLike,
    strata: Sequence[object] | None,
) -> _Sample:
    y_, yhat_, every = _vector(y, "y"), _vector(yhat, "yhat"), _vector(yhat_all, "yhat_all")
    if y_.size != yhat_.size:
        raise ValueError(
            f"y and yhat must hold the same rated items in the same order "
            f"({y_.size} != {yhat_.size})"
        )
    if y_.size < 2:
        raise ValueError("y needs at least 2 human ratings to estimate a variance, got 1")
    if every.size < y_.size:
        raise ValueError(
            f"yhat_all holds every judged item, the rated ones included: {every.size} scores "
            f"for {y_.size} rated items"
        )
    pi = _vector(probabilities, "probabilities")
    if pi.size != y_.size:
        raise ValueError(f"probabilities must have one per rated item ({pi.size} != {y_.size})")
    if pi.min() <= 0 or pi.max() > 1:
        raise ValueError(
            "probabilities must be inclusion probabilities in (0, 1], got "
            f"[{pi.min():g}, {pi.max():g}]"
        )
    codes = _strata(strata, y_.size)
    return _Sample(y_, yhat_, float(every.mean()), int(every.size), 1 / pi, 1 - pi, codes)


def _linearised(s: _Sample, values: Array) -> Array:
    """Each rated item's share of the weighted mean's error: ``w (x - xbar_w) / sum(w)``."""
    total = float(s.w.sum())
    return s.w * (values - float(np.sum(s.w * values)) / total) / total


def _products(s: _Sample, x: Array, z: Array) -> float:
    """``C(x, z)``: the design covariance of two linearised means, with ``1 - pi``."""
    if s.codes is None:
        return float(np.sum(s.keep * x * z))
    counts = np.bincount(s.codes).astype(float)
    xc = x - (np.bincount(s.codes, x) / counts)[s.codes]
    zc = z - (np.bincount(s.codes, z) / counts)[s.codes]
    keep = np.bincount(s.codes, s.keep) / counts  # one pi per stratum in a stratified design
    per_stratum = np.bincount(s.codes, xc * zc)
    return float(np.sum(keep * per_stratum * counts / (counts - 1)))


def _estimate(
    s: _Sample, lam: float | None, alpha: float, method: str, t_below: int
) -> MeanEstimate:
    a, b = _linearised(s, s.y), _linearised(s, s.yhat)
    c_aa, c_ab, c_bb = _products(s, a, a), _products(s, a, b), _products(s, b, b)
    if lam is None:
        lam = float(np.clip(c_ab / c_bb, 0.0, 1.0)) if c_bb > 0 else 0.0
    total = float(s.w.sum())
    y_bar, yhat_bar = float(np.sum(s.w * s.y)) / total, float(np.sum(s.w * s.yhat)) / total
    superpopulation = float(np.sum(s.w * (s.y - y_bar) ** 2)) / total / s.M
    var = max(0.0, c_aa - 2 * lam * c_ab + lam**2 * c_bb) + superpopulation
    var_classical = c_aa + superpopulation
    estimate = lam * s.judge_mean + y_bar - lam * yhat_bar
    se = math.sqrt(var)
    df = _df(s.n, t_below)
    low, high = _interval(estimate, se, alpha, df)
    effective = _effective_n(s.n, var_classical, var)
    design = "design, run sample" + (", stratified" if s.codes is not None else "")
    return MeanEstimate(
        method, estimate, low, high, se, alpha, lam, s.n, s.M - s.n, effective,
        effective - s.n, design, s.n < SMALL_N, _interval_name(df),
    )  # fmt: skip


def ppi_run_mean(
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_all: ArrayLike,
    *,
    probabilities: ArrayLike,
    strata: Sequence[object] | None = None,
    lam: float | None = None,
    alpha: float = 0.05,
    t_below: int = SMALL_N,
) -> MeanEstimate:
    """The prediction-powered mean of the humans' ratings for rated items drawn from the
    judged ones with inclusion ``probabilities`` (see the module docstring). ``y``, ``yhat``:
    the rated items' human and judge values; ``yhat_all``: the judge's values of every judged
    item, the rated ones included. ``lam=None`` tunes the weight; ``lam=0`` is human-only.
    ``N`` in the result counts the judged items without a rating."""
    s = _prepare(y, yhat, yhat_all, probabilities, strata)
    return _estimate(s, _lam(lam), _alpha(alpha), "ppi", _t_below(t_below))


def run_classical_mean(
    y: ArrayLike,
    *,
    population: int,
    probabilities: ArrayLike,
    strata: Sequence[object] | None = None,
    alpha: float = 0.05,
    t_below: int = SMALL_N,
) -> MeanEstimate:
    """The human-only weighted mean of the same design (``lam = 0``): ``population`` is the
    number of items the rated ones were drawn from (``M``)."""
    if isinstance(population, bool) or not isinstance(population, int) or population < 1:
        raise ValueError(f"population must be a positive whole number, got {population!r}")
    size = np.asarray(y).size
    if population < size:
        raise ValueError(f"population ({population}) is smaller than the rated items ({size})")
    s = _prepare(y, y, np.zeros(population), probabilities, strata)
    return _estimate(s, 0.0, _alpha(alpha), "classical", _t_below(t_below))


def ppi_run_gap(
    a: RunGroup,
    b: RunGroup,
    *,
    lam: float | None = None,
    alpha: float = 0.05,
    t_below: int = SMALL_N,
) -> GapEstimate:
    """Group A's mean minus group B's, each as ``ppi_run_mean`` tunes it on its own data;
    the groups' items are disjoint, so the variances add."""
    level, fixed, below = _alpha(alpha), _lam(lam), _t_below(t_below)
    parts, classical = [], []
    for g in (a, b):
        s = _prepare(g.y, g.yhat, g.yhat_all, g.probabilities, g.strata)
        parts.append(_estimate(s, fixed, level, "ppi", below))
        classical.append(_estimate(s, 0.0, level, "classical", below).se ** 2)
    first, second = parts
    estimate = first.estimate - second.estimate
    var = first.se**2 + second.se**2
    df = gap_df(first.n, second.n, below)
    low, high = _interval(estimate, math.sqrt(var), level, df)
    n = first.n + second.n
    effective = _effective_n(n, sum(classical), var)
    return GapEstimate(
        estimate, low, high, math.sqrt(var), level, first, second, effective, effective - n,
        _interval_name(df),
    )  # fmt: skip
