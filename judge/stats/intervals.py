"""The one interval rule for figures over items: a share (k of n items) and a mean item value.

Every report, report.json, dashboard chart and CLI table reads its interval from here, so a
figure shown in two places has one interval:

- **share**: the Wilson score interval (scipy's ``binomtest(...).proportion_ci(method=
  "wilson")``, computed from the same closed form with ``scipy.special.ndtri``'s normal
  quantile). It stays inside [0, 1] and keeps near its nominal coverage on the small cells a
  factor x stage table has; at 0 of n or n of n it still has a width (the normal, Wald,
  interval collapses to a point there). Defined from one item on.
- **mean**: the Student t interval ``mean +- t(1 - alpha/2, n - 1) * sd / sqrt(n)`` (scipy's
  ``t.interval``, its quantiles from ``scipy.special.stdtrit``). Below ``MIN_MEAN_N`` items it
  is "too few": the t interval leans on a roughly normal mean, which a handful of discrete,
  bounded scores do not give. Items that all have the same value give no interval either ("no
  spread"): their sample spread is 0, so the t interval would be a point, claiming a certainty
  that a few identical scores do not carry.

An ``Interval`` without bounds always says why (``reason``); nothing shows it as a number.

Only ``scipy.special`` is imported (a third of a second), not ``scipy.stats`` (over a second):
commands that read intervals and no test, such as ``fairjudge gate``, start faster;
tests/judge/stats/test_interval_forms.py checks every formula against scipy.stats.

>>> i = share_interval(8, 10)
>>> round(i.low, 3), round(i.high, 3), i.method
(0.49, 0.943, 'wilson')
>>> mean_interval([4.0, 4.0]).reason
'too few items for an interval (2; 5 needed)'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

SHARE, MEAN = "wilson", "t"
"""The method of each figure kind, as ``Interval.method`` and report.json's ``ci_method``
write it."""
METHOD_NAMES = {SHARE: "Wilson score", MEAN: "Student t"}
"""Each method's name for legends and column headers."""
MIN_MEAN_N = 5
"""A mean's interval needs at least this many items; below, the figure says "too few"."""


def _check_confidence(confidence: float) -> None:
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, numbers.Real)
        or not 0 < confidence < 1
    ):
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")


@dataclass(frozen=True)
class Interval:
    """An interval in the figure's unit (``scale`` times the raw one), its method and the
    items it rests on; ``low`` and ``high`` are None when there is none, and ``reason`` says
    why (no items, too few, no spread)."""

    low: float | None
    high: float | None
    method: str
    n: int
    reason: str = ""

    @property
    def defined(self) -> bool:
        return self.low is not None and self.high is not None

    def text(self, digits: int = 1, sep: str = ", ") -> str:
        """'[38.6, 80.0]', or the reason in brackets: '(too few items ...)'.

        >>> share_interval(1, 2, scale=100).text(0, "-")
        '[9-91]'
        >>> mean_interval([3.0]).text()
        '(too few items for an interval (1; 5 needed))'
        """
        if self.low is None or self.high is None:
            return f"({self.reason})"
        return f"[{self.low:.{digits}f}{sep}{self.high:.{digits}f}]"


def too_few(n: int) -> str:
    """Why a mean of ``n`` items has no interval."""
    return f"too few items for an interval ({n}; {MIN_MEAN_N} needed)"


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
    # Newcombe's (1998) closed form, the one scipy's proportion_ci(method="wilson") computes;
    # scipy.stats itself is not imported here (a second of start-up for `fairjudge gate`).
    k, m = int(successes), int(n)
    p = k / m
    z = float(special.ndtri(0.5 + 0.5 * confidence))
    denom = 2 * (m + z**2)
    center = (2 * m * p + z**2) / denom
    delta = z / denom * math.sqrt(4 * m * p * (1 - p) + z**2)
    low = 0.0 if k == 0 else center - delta
    high = 1.0 if k == m else center + delta
    return float(low), float(high)


def share_interval(
    successes: int, n: int, *, confidence: float = 0.95, scale: float = 1.0
) -> Interval:
    """The share's interval (Wilson), times ``scale`` (100 for percent); none without items.

    >>> share_interval(0, 0).reason
    'no items'
    """
    low, high = wilson_interval(successes, n, confidence=confidence)
    if n == 0:
        return Interval(None, None, SHARE, 0, "no items")
    return Interval(low * scale, high * scale, SHARE, int(n))


def mean_interval(
    values: Sequence[float], *, confidence: float = 0.95, scale: float = 1.0
) -> Interval:
    """The mean's Student t interval, times ``scale``; none below ``MIN_MEAN_N`` values or
    when every value is the same (see the module docstring).

    >>> i = mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    >>> round(i.low, 3), round(i.high, 3)
    (1.037, 4.963)
    >>> mean_interval([4.0] * 6).reason
    'no spread: all 6 items have the same value'
    """
    _check_confidence(confidence)
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {data.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError("values must be finite numbers (leave unscored items out)")
    n = int(data.size)
    if n == 0:
        return Interval(None, None, MEAN, 0, "no items")
    if n < MIN_MEAN_N:
        return Interval(None, None, MEAN, n, too_few(n))
    if float(np.ptp(data)) == 0:
        return Interval(None, None, MEAN, n, f"no spread: all {n} items have the same value")
    # scipy's t.interval(confidence, n - 1, loc=mean, scale=sem): its quantiles are stdtrit's
    mean, sem = float(data.mean()), float(data.std(ddof=1)) / math.sqrt(n)
    q_low = float(special.stdtrit(n - 1, (1 - confidence) / 2))
    q_high = float(special.stdtrit(n - 1, (1 + confidence) / 2))
    low, high = mean + q_low * sem, mean + q_high * sem
    return Interval(low * scale, high * scale, MEAN, n)


RANK_CORRELATION = "fisher-z"
METHOD_NAMES[RANK_CORRELATION] = "Fisher z (Fieller's variance)"


def rank_correlation_interval(rho: float, n: int, *, confidence: float = 0.95) -> Interval:
    """Spearman's ``rho`` over ``n`` pairs: the Fisher z interval with Fieller, Hartley and
    Pearson's (1957) variance ``1.06 / (n - 3)``; none below 4 pairs or at rho = +-1.

    >>> i = rank_correlation_interval(0.5, 30)
    >>> round(i.low, 3), round(i.high, 3)
    (0.16, 0.734)
    """
    _check_confidence(confidence)
    if n < 4:
        return Interval(
            None, None, RANK_CORRELATION, n, f"too few pairs for an interval ({n}; 4 needed)"
        )
    if not -1 < rho < 1:
        return Interval(None, None, RANK_CORRELATION, n, "rho is +-1: no interval")
    half = float(special.ndtri((1 + confidence) / 2)) * math.sqrt(1.06 / (n - 3))
    z = math.atanh(rho)
    return Interval(math.tanh(z - half), math.tanh(z + half), RANK_CORRELATION, n)


def interval_legend() -> str:
    """The rule in one line, for a legend or a report's notes."""
    return (
        f"95 % intervals: shares {METHOD_NAMES[SHARE]}; means {METHOD_NAMES[MEAN]} "
        f"(none below {MIN_MEAN_N} items: 'too few'; none when every item has the same value)"
    )
