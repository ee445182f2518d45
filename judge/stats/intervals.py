"""Confidence intervals for the stage metrics: a share of items and a mean item score.

A share (k of n items at or above a threshold) gets the Wilson score interval, which stays
inside [0, 1] and keeps close to its nominal coverage for the small cells a factor x stage
table has (the normal approximation collapses to a point at 0/n and n/n). A mean gets a
percentile bootstrap over items, seeded so a report is reproducible. Both are undefined (NaN)
with no items; callers show that as "n/a".

>>> low, high = wilson_interval(8, 10)
>>> round(low, 3), round(high, 3)
(0.49, 0.943)
>>> bootstrap_mean_interval([4.0, 4.0, 4.0])
(4.0, 4.0)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest

N_RESAMPLES = 1000  # bootstrap resamples for a mean's interval
SEED = 0  # the bootstrap's seed: the same data always give the same interval


def _check_confidence(confidence: float) -> None:
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, numbers.Real)
        or not 0 < confidence < 1
    ):
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (no continuity correction) of the proportion ``successes / n``.

    Returns proportions in [0, 1]; (nan, nan) when ``n`` is 0.

    >>> wilson_interval(0, 0)
    (nan, nan)
    >>> wilson_interval(3, 2)
    Traceback (most recent call last):
    ...
    ValueError: successes must be an integer between 0 and n=2, got 3
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if (
        isinstance(successes, bool)
        or not isinstance(successes, numbers.Integral)
        or not 0 <= successes <= n
    ):
        raise ValueError(f"successes must be an integer between 0 and n={n}, got {successes!r}")
    _check_confidence(confidence)
    if n == 0:
        return math.nan, math.nan
    ci = binomtest(int(successes), int(n)).proportion_ci(
        confidence_level=confidence, method="wilson"
    )
    return float(ci.low), float(ci.high)


def bootstrap_mean_interval(
    values: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values``, resampling the values (items)
    with replacement ``n_resamples`` times from a generator seeded with ``seed``.

    (nan, nan) when ``values`` is empty; a single value gives the point (x, x).

    >>> bootstrap_mean_interval([])
    (nan, nan)
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral):
        raise ValueError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    _check_confidence(confidence)
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {data.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError("values must be finite numbers (leave unscored items out)")
    if data.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, data.size, size=(int(n_resamples), data.size))
    means = data[draws].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
