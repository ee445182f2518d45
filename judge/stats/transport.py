"""Does a judge's correction transport from one model's answers to another's?

A prediction-powered correction learns the gap between people and the judge on rated answers.
Pooling the rated answers of several models (generation runs judged by the same judge
configuration) into one correction is right only when that gap is the same for every model.
``relation_by_model`` tests it: the least-squares regression of the human value on the
judge's, with a model interaction::

    human = a + b * x + sum_m (c_m + d_m * x) * [model = m] + error,   x = judge - mean(judge)

for every model ``m`` but the reference (the first one). ``c_m`` is the difference in bias
(the human value at the pooled mean judge score, model ``m`` minus the reference), ``d_m`` the
difference in slope; each comes with its t interval, and the joint F-test of every ``c_m``
and ``d_m`` being 0 (the regression without the model terms against the one with them) says
whether the relation differs at all. OLS with the classical (homoscedastic) covariance, the
numbers ``statsmodels.formula.api.ols("human ~ x * C(model)")`` gives (the tests check it);
numpy's ``lstsq`` computes it here, as statsmodels is not a runtime dependency for one fit.

``pooled_calibration`` is the pooled correction for one model: the line ``human = a + b *
judge`` fitted on the rated answers of every model, applied to the mean of that model's judge
scores over all its answers, ``a + b * mean(judge_m)``. (A pooled PPI rectifier, ``mean(y -
lam * yhat)`` over every model's ratings, would not do: its mean, ``a + (b - lam)
E_m[judge]``, still depends on the model unless ``lam = b``.) Its variance is the fitted
line's at that point, ``s**2 (1 / n + (mean(judge_m) - mean(judge))**2 / Sxx)``, plus ``b**2
var(judge_m) / M_m`` for the model's own answers being a sample (the same target as ppi_py's).
A caller pools only when the F-test does not reject (``TransportTest.transports``); otherwise
each model's own ``judge.stats.ppi.ppi_mean`` is the estimate to give.

This module imports no project module but ``judge.stats.ppi``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from judge.stats.ppi import SMALL_N, Group, MeanEstimate, _interval, _interval_name

MIN_PER_MODEL = 3
"""Rated items a model needs for its own intercept and slope (and one degree of freedom)."""


class TransportRefused(ValueError):
    """The data cannot support the test (one model only, too few ratings, no spread)."""


@dataclass(frozen=True)
class ModelDifference:
    """One model's judge-human relation against the reference model's."""

    model: str
    n: int
    bias: float  # difference in the human value at the pooled mean judge score
    bias_low: float
    bias_high: float
    slope: float  # difference in the slope of human on judge
    slope_low: float
    slope_high: float


@dataclass(frozen=True)
class TransportTest:
    """The regression's model terms and their joint F-test."""

    reference: str
    n_reference: int
    centre: float  # the pooled mean judge score, where the bias differences are measured
    differences: tuple[ModelDifference, ...]
    f_statistic: float
    df_num: int
    df_den: int
    p_value: float
    alpha: float  # the intervals' level

    def transports(self, level: float) -> bool:
        """The same relation for every model, as far as the F-test at ``level`` can tell."""
        return self.p_value >= level


def _design(x: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    columns = [np.ones_like(x), x]
    for m in range(1, k):
        dummy = (codes == m).astype(float)
        columns += [dummy, dummy * x]
    return np.column_stack(columns)


def _checked(
    y: ArrayLike, yhat: ArrayLike, models: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    h, j = np.asarray(y, dtype=float), np.asarray(yhat, dtype=float)
    if h.ndim != 1 or h.shape != j.shape or len(models) != h.size:
        raise ValueError("y, yhat and models must hold one value per rated item each")
    if not (np.all(np.isfinite(h)) and np.all(np.isfinite(j))):
        raise ValueError("y and yhat must be finite: leave unrated or unscored items out")
    names = list(dict.fromkeys(str(m) for m in models))
    if len(names) < 2:
        raise TransportRefused(f"transport needs ratings of two models or more, got {names}")
    codes = np.array([names.index(str(m)) for m in models])
    for code, name in enumerate(names):
        judged = j[codes == code]
        if judged.size < MIN_PER_MODEL:
            raise TransportRefused(
                f"model {name!r} has {judged.size} rated item(s); {MIN_PER_MODEL} are needed "
                "for its own bias and slope"
            )
        if np.all(judged == judged[0]):
            raise TransportRefused(
                f"the judge gives every rated item of model {name!r} the same value, so its "
                "slope cannot be measured"
            )
    return h, j, names, codes


def relation_by_model(
    y: ArrayLike, yhat: ArrayLike, models: Sequence[str], *, alpha: float = 0.05
) -> TransportTest:
    """Regress the human values ``y`` on the judge's ``yhat`` with a model interaction (see
    the module docstring); ``models`` names each rated item's model, the first one seen is
    the reference. ``TransportRefused`` when a model has fewer than ``MIN_PER_MODEL`` rated
    items or the judge gives all of them one value."""
    h, j, names, codes = _checked(y, yhat, models)
    centre = float(j.mean())
    x = j - centre
    full = _design(x, codes, len(names))
    n, p = full.shape
    if n <= p:
        raise TransportRefused(f"{n} rated items cannot fit {p} coefficients")
    beta, *_ = np.linalg.lstsq(full, h, rcond=None)
    rss = float(np.sum((h - full @ beta) ** 2))
    restricted = full[:, :2]
    beta_r, *_ = np.linalg.lstsq(restricted, h, rcond=None)
    rss_r = float(np.sum((h - restricted @ beta_r) ** 2))
    df_den, df_num = n - p, p - 2
    cov = rss / df_den * np.linalg.inv(full.T @ full)
    q = float(stats.t.ppf(1 - alpha / 2, df_den))
    differences = []
    for m in range(1, len(names)):
        c, d = 2 * m, 2 * m + 1
        se_c, se_d = math.sqrt(cov[c, c]), math.sqrt(cov[d, d])
        differences.append(
            ModelDifference(
                names[m],
                int(np.sum(codes == m)),
                float(beta[c]),
                float(beta[c] - q * se_c),
                float(beta[c] + q * se_c),
                float(beta[d]),
                float(beta[d] - q * se_d),
                float(beta[d] + q * se_d),
            )  # fmt: skip
        )
    f, p_value = _f_test(rss_r, rss, df_num, df_den)
    return TransportTest(
        names[0], int(np.sum(codes == 0)), centre, tuple(differences), f, df_num, df_den,
        p_value, float(alpha),
    )  # fmt: skip


def _f_test(rss_restricted: float, rss: float, df_num: int, df_den: int) -> tuple[float, float]:
    """(F, p) of the model terms; a perfect fit is decided without dividing by 0."""
    gain = max(0.0, rss_restricted - rss)
    if rss <= 1e-12 * max(1.0, rss_restricted):
        return (math.inf, 0.0) if gain > 1e-12 else (math.nan, 1.0)
    f = (gain / df_num) / (rss / df_den)
    return float(f), float(stats.f.sf(f, df_num, df_den))


def pooled_calibration(
    groups: Mapping[str, Group], model: str, *, alpha: float = 0.05, t_below: int = SMALL_N
) -> MeanEstimate:
    """``model``'s mean human value through the correction learnt on the rated items of every
    group (see the module docstring): valid only where the correction transports. ``n`` is
    the pooled ratings, ``N`` the model's unrated items; ``lam`` is the pooled slope."""
    ys = np.concatenate([np.asarray(g.y, dtype=float) for g in groups.values()])
    xs = np.concatenate([np.asarray(g.yhat, dtype=float) for g in groups.values()])
    own = groups[model]
    rated, unrated = np.asarray(own.yhat, dtype=float), np.asarray(own.yhat_unlabelled, float)
    judged = np.concatenate([rated, unrated])
    n, centre = ys.size, float(xs.mean())
    sxx = float(np.sum((xs - centre) ** 2))
    if n < 3 or sxx == 0:
        raise TransportRefused("a pooled correction needs 3 rated items with a judge spread")
    slope = float(np.sum((xs - centre) * (ys - ys.mean()))) / sxx
    residual = float(np.sum((ys - ys.mean() - slope * (xs - centre)) ** 2)) / (n - 2)
    shift = float(judged.mean()) - centre
    estimate = float(ys.mean()) + slope * shift
    var = residual * (1 / n + shift**2 / sxx) + slope**2 * float(judged.var()) / judged.size
    df = n - 2 if n < t_below else None
    low, high = _interval(estimate, math.sqrt(var), alpha, df)
    own_var = float(np.var(np.asarray(own.y, dtype=float))) / max(1, rated.size)
    effective = rated.size * own_var / var if var > 0 else math.inf
    return MeanEstimate(
        "pooled calibration", estimate, low, high, math.sqrt(var), alpha, slope, n,
        int(unrated.size), effective, effective - rated.size, "pooled", n < SMALL_N,
        _interval_name(df),
    )  # fmt: skip
