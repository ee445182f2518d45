"""Prediction-powered inference (PPI, PPI++) for a mean: many judge scores, a few human
ratings, one interval for what the humans would say on average.

Setting (Angelopoulos et al., Science 2023; power tuning: Angelopoulos, Duchi, Zrnic, arXiv
2311.01453). The judge scored every item. People rated ``n`` of them (``y``, with the judge's
scores of those same items in ``yhat``); ``yhat_unlabelled`` holds the judge's scores of
``N`` items nobody rated. For a tuning weight ``lam``::

    estimate = lam * mean(yhat_unlabelled) + mean(y - lam * yhat)
    variance = var(y - lam * yhat) / n + lam**2 * var(yhat_unlabelled) / N

The second mean corrects the judge's bias on the rated items, so the estimate targets the
humans' mean whatever the judge's bias: the judge only has to be *correlated* with people to
help. ``lam = 0`` is the human-only (classical) mean, ``lam = 1`` the original PPI, and
``lam=None`` picks the variance-minimising value from the data (PPI++), clipped to [0, 1]
as ``ppi_py`` (the authors' library) clips it. Its interval is then, to first order, never
wider than the human-only one.

Tuning exactly as ``ppi_py.ppi_mean_ci(..., lam=None)`` does it (ppi_py 0.2.3, ``ppi.py``
``_calc_lam_glm``): with ``theta0`` the ``lam = 1`` estimate, ``g = w (y - theta0)``,
``gh = w (yhat - theta0)``, ``gu = w_u (yhat_unlabelled - theta0)``::

    lam = cov(g, gh) / ((1 + n / N) * var(concatenate(gh, gu)))   then clipped to [0, 1]

with ``cov`` dividing by n and ``var`` by n + N - 1. Variances elsewhere divide by the count
(``numpy.std``'s default, as ppi_py does); intervals are two-sided, ``estimate +-
z(1 - alpha/2) * se`` from ``SMALL_N`` rated items on (Student t below: see "Small
samples"), so ppi_py's numbers are reproduced from 30 ratings on. Note that ppi_py's
``alpha`` defaults to 0.1 (a 90 % interval); here ``alpha`` defaults to 0.05 and every
result carries the one it used.

**Weights** (``weights``, ``weights_unlabelled``: 1 / inclusion probability, from a stratified
or disagreement-weighted sample) turn each mean into a weighted (Hajek) mean, the weights
rescaled to average 1 as ppi_py rescales them. Two variances are offered:

- ``variance="design"`` (default): the linearised variance of that weighted mean,
  ``sum(w_i**2 (r_i - rbar)**2) / (sum w)**2`` for the residuals ``r = y - lam * yhat``; it
  does not change when every score moves by a constant. With ``strata`` (one label per rated
  item) the squares are taken around each stratum's own mean and scaled by
  ``n_h / (n_h - 1)``: the textbook variance of a stratified mean,
  ``sum_h (N_h / N)**2 s_h**2 / n_h`` for weights ``N_h / n_h`` (Cochran, *Sampling
  Techniques*, ch. 5). Without ``strata`` a stratified sample's interval is conservative (it
  also counts the differences between strata that stratifying removed). Each stratum needs
  at least 2 rated items; merge smaller ones, or leave ``strata`` out. This variance is a
  quadratic in ``lam``, ``S_aa - 2 lam S_ab + lam**2 (S_bb + S_u)`` (``S_ab`` the weighted
  cross sum of the deviations of ``y`` and ``yhat`` on the rated items, ``S_bb`` that of
  ``yhat`` with itself, ``S_u`` the unrated part's), so with unequal weights or strata
  ``lam=None`` takes its minimum, ``S_ab / (S_bb + S_u)``, clipped to [0, 1]. With equal
  weights and no strata it is ppi_py's formula above (the same minimum, with the judge's
  variance pooled over rated and unrated items).
  For a sample drawn from a judge run, pass the judge's scores of every judged item as
  ``yhat_unlabelled`` (unweighted): the unrated part then targets the run's mean, and its
  variance term, which treats those scores as a sample, errs a little on the wide side.
- ``variance="ppi_py"``: ppi_py's own arithmetic, ``std(w * r) / sqrt(n)``: the variance of
  an unnormalised (Horvitz-Thompson) mean. It grows with the distance of the scores from 0,
  so on a 1-5 scale a weighted human-only interval comes out far too wide (in the
  stratified simulations of tests/judge/stats/test_ppi.py it covers more than 99 % of the
  time where 95 % is asked). Kept so that results can be compared with ppi_py's.

With equal weights and no strata the two are the same number, equal to ppi_py's.

**Small samples.** The normal interval's coverage is not assured under ``SMALL_N`` (30)
rated items (per group, for a gap): there ``small_sample`` is True, and the interval is a
Student t one, ``estimate +- t(1 - alpha/2, n - 1) * se`` (``interval`` says "t, n-1 df"),
wider than the normal one (7 % at 20 ratings). A gap with a small group takes the t
quantile at ``min(n_a, n_b) - 1`` degrees of freedom, the fewest Welch's approximation can
give, so it errs on the wide side. ``t_below=0`` keeps every interval normal, as ppi_py's
are. Fewer than 2 rated items is refused (no variance to estimate).

**A gap** between two groups (``ppi_gap``: A minus B) is one estimate with its own interval:
the groups are rated and judged independently, so the variances add. Each group is tuned on
its own data, which is not only acceptable but optimal: the gap's variance is the sum of two
terms that each depend only on their own group's ``lam``.

**Planning** the number of ratings: ``judge.stats.ppi_plan``.

This module imports no project module.

>>> r = ppi_mean([1, 2, 3, 4], [1, 2, 3, 4], [2, 2, 4, 4], lam=1)
>>> r.estimate, r.se  # a perfect judge: the judge's mean, with the judge's standard error
(3.0, 0.5)
>>> c = classical_mean([1, 2, 3, 4, 5], t_below=0)
>>> round(c.ci_low, 4), round(c.ci_high, 4)  # 3 +- 1.959964 * sqrt(2 / 5)
(1.7604, 4.2396)
>>> c = classical_mean([1, 2, 3, 4, 5])  # 5 ratings: a t interval, 4 df
>>> round(c.ci_low, 4), round(c.ci_high, 4), c.interval  # 3 +- 2.776445 * sqrt(2 / 5)
(1.244, 4.756, 't, 4 df')
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

Array = NDArray[np.float64]
Variance = Literal["design", "ppi_py"]
VARIANCES = ("design", "ppi_py")
SMALL_N = 30
"""Rated items below which an estimate is flagged (``small_sample``) and its interval is a
Student t one (see the module docstring)."""


@dataclass(frozen=True)
class MeanEstimate:
    """A mean of human ratings (or of judge scores) with its two-sided interval (normal, or
    Student t under ``t_below`` rated items: ``interval`` says which).

        ``method`` is "ppi", "classical" (human ratings only) or "judge-only". ``n`` counts human
        ratings, ``N`` judge scores without one. ``effective_n`` is how many human-only ratings
        would give an interval as narrow (``n * var_classical / var_ppi``, both estimated from the
        same ratings); ``ratings_saved`` is ``effective_n - n``, negative when the judge made the
        interval wider (a fixed ``lam`` can; the tuned one only when the rated items are not like
        the unrated ones, e.g. the judge's scores spread far less on the unrated). Both are NaN
        for "judge-only", which uses no human rating and says nothing about what people say.
    """

    method: str
    estimate: float
    ci_low: float
    ci_high: float
    se: float
    alpha: float  # the interval covers with probability 1 - alpha (two-sided)
    lam: float  # the tuning weight used (0 for classical, NaN for judge-only)
    n: int
    N: int  # judge scores without a human rating (the papers' capital N)
    effective_n: float
    ratings_saved: float
    variance: str  # how the variance was computed: "design", "design, stratified", "ppi_py"
    small_sample: bool  # fewer than SMALL_N rated items: the interval is approximate
    interval: str = "normal"  # or "t, K df" for a small sample

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


@dataclass(frozen=True)
class GapEstimate:
    """Group A's mean minus group B's, with the interval of the difference itself (the
    groups are independent: variances add). ``effective_n`` counts the human ratings of both
    groups that a human-only gap would need for the same width."""

    estimate: float
    ci_low: float
    ci_high: float
    se: float
    alpha: float
    a: MeanEstimate
    b: MeanEstimate
    effective_n: float
    ratings_saved: float
    interval: str = "normal"

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    @property
    def small_sample(self) -> bool:
        """Either group has fewer than SMALL_N rated items."""
        return self.a.small_sample or self.b.small_sample


@dataclass(frozen=True)
class Group:
    """One group's data for ``ppi_gap``: the same arguments as ``ppi_mean``."""

    y: ArrayLike
    yhat: ArrayLike
    yhat_unlabelled: ArrayLike
    weights: ArrayLike | None = None
    weights_unlabelled: ArrayLike | None = None
    strata: Sequence[object] | None = None


# ---------------------------------------------------------------- validation


def _vector(values: ArrayLike, name: str) -> Array:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty; it needs at least one score")
    if not np.all(np.isfinite(array)):
        bad = int(np.count_nonzero(~np.isfinite(array)))
        raise ValueError(
            f"{name} contains {bad} NaN or infinite value(s); drop unrated or unscored "
            "items before estimating"
        )
    return array


def _weights(weights: ArrayLike | None, size: int, name: str) -> Array:
    """Weights rescaled to average 1 (ppi_py's ``construct_weight_vector``); ones if None."""
    if weights is None:
        return np.ones(size)
    w = _vector(weights, name)
    if w.size != size:
        raise ValueError(f"{name} must have one weight per item ({w.size} != {size})")
    if w.min() <= 0:
        raise ValueError(
            f"{name} must be positive (1 / inclusion probability), got minimum {w.min():g}"
        )
    return w / w.sum() * size


def _alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 (0.05 for a 95 % interval), got {alpha!r}")
    return float(alpha)


def _lam(lam: float | None) -> float | None:
    if lam is None:
        return None
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or not 0 <= lam <= 1:
        raise ValueError(f"lam must be None (tuned) or a number in [0, 1], got {lam!r}")
    return float(lam)


def _strata(strata: Sequence[object] | None, size: int) -> NDArray[np.int64] | None:
    """Stratum codes 0..K-1 per rated item; each stratum must hold at least 2 items."""
    if strata is None:
        return None
    labels = np.asarray(strata)
    if labels.ndim != 1 or labels.size != size:
        raise ValueError(f"strata must have one label per rated item ({labels.size} != {size})")
    names, codes = np.unique(labels, return_inverse=True)
    counts = np.bincount(codes)
    if counts.min() < 2:
        small = [str(s) for s, c in zip(names, counts, strict=True) if c < 2]
        raise ValueError(
            f"strata {small} have fewer than 2 rated items, so their variance cannot be "
            "estimated; merge them with a neighbouring stratum or leave strata out (a "
            "conservative interval)"
        )
    return codes.astype(np.int64)


def _variance_mode(variance: str, codes: NDArray[np.int64] | None) -> str:
    if variance not in VARIANCES:
        raise ValueError(f"variance must be one of {VARIANCES}, got {variance!r}")
    if variance == "ppi_py" and codes is not None:
        raise ValueError("strata need variance='design' (ppi_py has no stratified variance)")
    if variance == "design" and codes is not None:
        return "design, stratified"
    return variance


@dataclass(frozen=True)
class _Data:
    y: Array
    yhat: Array
    yhat_u: Array  # empty for the classical estimate
    w: Array  # labelled weights, average 1
    w_u: Array
    codes: NDArray[np.int64] | None
    equal_weights: bool
    variance: str

    @property
    def n(self) -> int:
        return int(self.y.size)

    @property
    def N(self) -> int:  # the papers' capital N
        return int(self.yhat_u.size)


def _prepare(
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_unlabelled: ArrayLike,
    weights: ArrayLike | None,
    weights_unlabelled: ArrayLike | None,
    strata: Sequence[object] | None,
    variance: str,
) -> _Data:
    y_, yhat_ = _vector(y, "y"), _vector(yhat, "yhat")
    if y_.size != yhat_.size:
        raise ValueError(
            f"y and yhat must hold the same rated items in the same order "
            f"({y_.size} != {yhat_.size})"
        )
    if y_.size < 2:
        raise ValueError("y needs at least 2 human ratings to estimate a variance, got 1")
    yhat_u = _vector(yhat_unlabelled, "yhat_unlabelled")
    codes = _strata(strata, y_.size)
    return _Data(
        y_,
        yhat_,
        yhat_u,
        _weights(weights, y_.size, "weights"),
        _weights(weights_unlabelled, yhat_u.size, "weights_unlabelled"),
        codes,
        _all_equal(weights) and _all_equal(weights_unlabelled),
        _variance_mode(variance, codes),
    )


def _all_equal(weights: ArrayLike | None) -> bool:
    if weights is None:
        return True
    w = np.asarray(weights, dtype=float)
    return bool(np.all(w == w[0]))


# ---------------------------------------------------------------- variances


def _centred_products(x: Array, y: Array, codes: NDArray[np.int64] | None) -> float:
    """``sum((x - xbar) (y - ybar))``: one mean and no scaling without strata; with strata,
    each stratum's own means and a factor ``n_h / (n_h - 1)``."""
    if codes is None:
        return float(np.sum((x - x.mean()) * (y - y.mean())))
    counts = np.bincount(codes).astype(float)
    xc = x - (np.bincount(codes, x) / counts)[codes]
    yc = y - (np.bincount(codes, y) / counts)[codes]
    per_stratum = np.bincount(codes, xc * yc)
    return float(np.sum(per_stratum * counts / (counts - 1)))


def _labelled_variance(d: _Data, lam: float) -> float:
    """Variance of ``mean(w (y - lam yhat))`` (the rated items' part)."""
    r = d.y - lam * d.yhat
    if d.variance == "ppi_py":
        return float(np.var(d.w * r) / d.n)
    # Linearised weighted mean: z = w (r - rbar_w); sum(w) = n after rescaling.
    z = d.w * (r - np.sum(d.w * r) / d.n)
    return _centred_products(z, z, d.codes) / d.n**2


def _unlabelled_variance(d: _Data, lam: float) -> float:
    """Variance of ``lam * mean(w_u yhat_u)`` (the unrated items' part)."""
    if d.N == 0 or lam == 0:
        return 0.0
    if d.variance == "ppi_py":
        return float(np.var(d.w_u * (lam * d.yhat_u)) / d.N)
    z = d.w_u * (d.yhat_u - np.sum(d.w_u * d.yhat_u) / d.N)
    return lam**2 * float(np.sum(z * z)) / d.N**2


def _ppi_py_lam(d: _Data) -> float:
    """``lam`` as ppi_py's ``_calc_lam_glm`` computes it for a mean (clip=True)."""
    theta0 = float(np.mean(d.w_u * d.yhat_u) + np.mean(d.w * (d.y - d.yhat)))
    g = d.w * (d.y - theta0)
    gh = d.w * (d.yhat - theta0)
    gu = d.w_u * (d.yhat_u - theta0)
    cov = float(np.sum((g - g.mean()) * (gh - gh.mean())) / d.n)
    pooled = float(np.var(np.concatenate([gh, gu]), ddof=1))
    if pooled == 0:
        return 0.0  # a constant judge carries no information
    return float(np.clip(cov / ((1 + d.n / d.N) * pooled), 0.0, 1.0))


def _design_lam(d: _Data) -> float:
    """``lam`` minimising the design variance ``S_aa - 2 lam S_ab + lam**2 (S_bb + S_u)``."""
    a = d.w * (d.y - np.sum(d.w * d.y) / d.n)
    b = d.w * (d.yhat - np.sum(d.w * d.yhat) / d.n)
    s_ab = _centred_products(a, b, d.codes) / d.n**2
    s_bb = _centred_products(b, b, d.codes) / d.n**2
    s_u = _unlabelled_variance(d, 1.0)
    if s_bb + s_u == 0:
        return 0.0
    return float(np.clip(s_ab / (s_bb + s_u), 0.0, 1.0))


def _tuned_lam(d: _Data) -> float:
    if d.variance == "ppi_py" or (d.equal_weights and d.codes is None):
        return _ppi_py_lam(d)
    return _design_lam(d)


def _z(alpha: float) -> float:
    # The standard library's normal quantile: the same number as scipy's norm.ppf to about
    # 1e-16, at a hundredth of the cost (it matters when simulations call this 10,000 times).
    return NormalDist().inv_cdf(1 - alpha / 2)


def _df(n: int, t_below: int) -> int | None:
    """Degrees of freedom of a small sample's t interval; None: a normal interval."""
    return n - 1 if n < t_below else None


def _interval(
    estimate: float, se: float, alpha: float, df: int | None = None
) -> tuple[float, float]:
    """``estimate +- q * se``: ``q`` the normal quantile, or Student t's at ``df``."""
    q = _z(alpha) if df is None else float(stats.t.ppf(1 - alpha / 2, df))
    return estimate - q * se, estimate + q * se


def _interval_name(df: int | None) -> str:
    return "normal" if df is None else f"t, {df} df"


def _t_below(t_below: int) -> int:
    if isinstance(t_below, bool) or not isinstance(t_below, numbers.Integral) or t_below < 0:
        raise ValueError(f"t_below must be a whole number >= 0 (0: normal), got {t_below!r}")
    return int(t_below)


def _effective_n(n: int, var_classical: float, var_ppi: float) -> float:
    if var_ppi == 0:
        return float(n) if var_classical == 0 else math.inf
    return n * var_classical / var_ppi


def _estimate(
    d: _Data, lam: float | None, alpha: float, method: str, t_below: int = SMALL_N
) -> MeanEstimate:
    used = _tuned_lam(d) if lam is None else lam
    estimate = float(np.mean(d.w_u * (used * d.yhat_u)) if d.N else 0.0) + float(
        np.mean(d.w * (d.y - used * d.yhat))
    )
    var = _labelled_variance(d, used) + _unlabelled_variance(d, used)
    var_classical = _labelled_variance(d, 0.0)
    se = math.sqrt(var)
    df = _df(d.n, t_below)
    low, high = _interval(estimate, se, alpha, df)
    effective = _effective_n(d.n, var_classical, var)
    return MeanEstimate(
        method=method,
        estimate=estimate,
        ci_low=low,
        ci_high=high,
        se=se,
        alpha=alpha,
        lam=used,
        n=d.n,
        N=d.N,
        effective_n=effective,
        ratings_saved=effective - d.n,
        variance=d.variance,
        small_sample=d.n < SMALL_N,
        interval=_interval_name(df),
    )


# ---------------------------------------------------------------- public estimators


def ppi_mean(
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_unlabelled: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    weights_unlabelled: ArrayLike | None = None,
    strata: Sequence[object] | None = None,
    lam: float | None = None,
    alpha: float = 0.05,
    variance: Variance = "design",
    t_below: int = SMALL_N,
) -> MeanEstimate:
    """The prediction-powered estimate of the humans' mean rating, with its interval.

    ``y``: human ratings of ``n`` items; ``yhat``: the judge's scores of those items, in the
    same order; ``yhat_unlabelled``: the judge's scores of ``N`` *other* items, nobody rated
    (ppi_py's convention: an item is in one set or the other, never both; for a weighted
    sample of a fixed set of judged items see ``judge.stats.ppi_run``). ``lam=None`` tunes
    the weight (PPI++); a number in [0, 1] fixes it. See the module docstring for
    ``weights``, ``strata``, ``variance`` and ``t_below``.

    >>> r = ppi_mean([1, 2, 4, 5], [2, 3, 5, 6], [3, 4, 5, 6], lam=1)  # judge 1 point high
    >>> r.estimate  # judge mean 4.5, less its measured bias of 1
    3.5
    """
    d = _prepare(y, yhat, yhat_unlabelled, weights, weights_unlabelled, strata, variance)
    return _estimate(d, _lam(lam), _alpha(alpha), "ppi", _t_below(t_below))


def classical_mean(
    y: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    strata: Sequence[object] | None = None,
    alpha: float = 0.05,
    variance: Variance = "design",
    t_below: int = SMALL_N,
) -> MeanEstimate:
    """The human-only mean of ``y`` with its interval (``lam = 0``, ``N = 0``): the same
    number as ``ppi_py.classical_mean_ci`` for ``variance="ppi_py"``, and for any
    ``variance`` when unweighted, from ``t_below`` ratings on (below, a t interval)."""
    y_ = _vector(y, "y")
    if y_.size < 2:
        raise ValueError("y needs at least 2 human ratings to estimate a variance, got 1")
    codes = _strata(strata, y_.size)
    d = _Data(
        y_,
        np.zeros(y_.size),
        np.zeros(0),
        _weights(weights, y_.size, "weights"),
        np.zeros(0),
        codes,
        _all_equal(weights),
        _variance_mode(variance, codes),
    )
    return _estimate(d, 0.0, _alpha(alpha), "classical", _t_below(t_below))


def judge_only_mean(
    yhat: ArrayLike, *, weights: ArrayLike | None = None, alpha: float = 0.05
) -> MeanEstimate:
    """The judge's mean score over the items given, with its normal interval: what the judge
    says, biased by whatever bias it has (its interval says nothing about that). ``n`` is 0;
    ``lam``, ``effective_n`` and ``ratings_saved`` are NaN."""
    a = _alpha(alpha)
    s = _vector(yhat, "yhat")
    w = _weights(weights, s.size, "weights")
    estimate = float(np.mean(w * s))
    z = w * (s - estimate)
    se = math.sqrt(float(np.sum(z * z)) / s.size**2)
    low, high = _interval(estimate, se, a)
    return MeanEstimate(
        "judge-only", estimate, low, high, se, a, math.nan, 0, int(s.size), math.nan, math.nan,
        "design", False,
    )  # fmt: skip


def ppi_gap(
    a: Group,
    b: Group,
    *,
    lam: float | None = None,
    alpha: float = 0.05,
    variance: Variance = "design",
    t_below: int = SMALL_N,
) -> GapEstimate:
    """Group A's mean minus group B's (human ratings, judge-powered), each group tuned on its
    own data (see the module docstring), with the interval of the difference.

    >>> g = ppi_gap(Group([3, 5], [3, 5], [4, 4]), Group([1, 3], [1, 3], [2, 2]), lam=1)
    >>> g.estimate, g.a.estimate, g.b.estimate
    (2.0, 4.0, 2.0)
    """
    level = _alpha(alpha)
    fixed = _lam(lam)
    below = _t_below(t_below)
    parts = []
    variances = []
    for group in (a, b):
        d = _prepare(
            group.y,
            group.yhat,
            group.yhat_unlabelled,
            group.weights,
            group.weights_unlabelled,
            group.strata,
            variance,
        )
        parts.append(_estimate(d, fixed, level, "ppi", below))
        variances.append(_labelled_variance(d, 0.0))
    first, second = parts
    estimate = first.estimate - second.estimate
    var = first.se**2 + second.se**2
    se = math.sqrt(var)
    df = gap_df(first.n, second.n, below)
    low, high = _interval(estimate, se, level, df)
    n = first.n + second.n
    effective = _effective_n(n, sum(variances), var)
    return GapEstimate(
        estimate, low, high, se, level, first, second, effective, effective - n,
        _interval_name(df),
    )  # fmt: skip


def gap_df(n_a: int, n_b: int, t_below: int = SMALL_N) -> int | None:
    """Degrees of freedom of a gap's t interval when either group is small (the fewer of the
    two groups' ``n - 1``), else None (normal)."""
    return min(n_a, n_b) - 1 if min(n_a, n_b) < t_below else None


def interval(
    estimate: float, se: float, alpha: float, df: int | None = None
) -> tuple[float, float, str]:
    """``estimate +- q * se`` with ``q`` normal (``df`` None) or Student t's, and the
    interval's name ("normal" or "t, K df"): for callers that combine estimates."""
    low, high = _interval(estimate, se, _alpha(alpha), df)
    return low, high, _interval_name(df)
