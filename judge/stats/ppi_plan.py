"""How many human ratings a prediction-powered mean needs (PPI++, ``judge.stats.ppi``).

**Planning** (``plan_human_ratings``). With the best ``lam`` and the population values, the
PPI++ variance (``judge.stats.ppi``) is ``(sd**2 / n) * (1 - rho**2 * N / (n + N))`` for the
judge-human correlation ``rho`` (minimise ``(sd**2 - 2 lam c + lam**2 s**2) / n + lam**2
s**2 / N`` over ``lam``, with ``c`` the covariance and ``s`` the judge's sd: ``lam = (c /
s**2) N / (n + N)``). For ``N`` much larger than ``n`` it is ``(1 - rho**2) sd**2 / n``.
(This takes the judge's variance to be the same on rated and unrated items, as it is when
the rated ones are a random sample.) Setting ``z * sqrt(variance)`` equal to the target
half-width ``h`` and solving for ``n`` gives a quadratic (see ``plan_human_ratings``); a
human-only mean needs ``z**2 sd**2 / h**2``.

This module imports no project module but ``judge.stats.ppi``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from judge.stats.ppi import _alpha, _z


@dataclass(frozen=True)
class RatingsPlan:
    """How many human ratings a target half-width needs, with and without the judge."""

    n_ppi: int  # human ratings for the PPI++ interval (at least 2)
    n_human_only: int  # human ratings for a human-only interval (at least 2)
    ratings_saved: int  # n_human_only - n_ppi
    rho: float
    sd: float  # the humans' standard deviation planned with
    half_width: float
    alpha: float
    n_unlabelled: int | None  # judged items without a rating; None = as many as wanted


def plan_human_ratings(
    *,
    rho: float,
    half_width: float,
    sd: float | None = None,
    variance: float | None = None,
    n_unlabelled: int | None = None,
    alpha: float = 0.05,
) -> RatingsPlan:
    """Human ratings needed for an interval of ``half_width`` around the humans' mean.

    ``rho``: the judge-human correlation from a pilot; ``sd`` (or ``variance``, give one): the
    humans' spread; ``n_unlabelled``: judged items without a rating (None: as many as needed,
    ``N`` much larger than ``n``). With ``T = (half_width / z)**2``, ``z = z(1 - alpha/2)``:

    - human-only: ``n = z**2 sd**2 / half_width**2``;
    - PPI++, unlimited judge scores: ``n = (1 - rho**2) z**2 sd**2 / half_width**2``;
    - PPI++, ``N`` judge scores: the variance ``sd**2 (n + (1 - rho**2) N) / (n (n + N))``
      equals ``T`` at the positive root of
      ``T n**2 + (T N - sd**2) n - (1 - rho**2) sd**2 N = 0``.

    Rounded up, and at least 2 (the estimators need 2 ratings). Assumes the tuned ``lam``
    is not clipped: a negative ``rho`` is clipped to ``lam = 0`` and saves nothing (planned
    as ``rho = 0``), and a judge whose scores spread much less than people's (``sd_judge <
    rho * sd``) may need ``lam > 1``, which is clipped to 1 and saves less than planned.

    >>> p = plan_human_ratings(rho=0.8, sd=1.0, half_width=0.1)
    >>> p.n_ppi, p.n_human_only  # 0.36 * 384.1 -> 139; 1.959964**2 / 0.01 -> 385
    (139, 385)
    """
    if isinstance(rho, bool) or not isinstance(rho, numbers.Real) or not -1 <= rho <= 1:
        raise ValueError(f"rho must be a correlation in [-1, 1], got {rho!r}")
    if (sd is None) == (variance is None):
        raise ValueError("give exactly one of sd and variance (the humans' spread)")
    spread = _positive(sd, "sd") if sd is not None else math.sqrt(_positive(variance, "variance"))
    h = _positive(half_width, "half_width")
    level = _alpha(alpha)
    if n_unlabelled is not None and (
        isinstance(n_unlabelled, bool)
        or not isinstance(n_unlabelled, numbers.Integral)
        or n_unlabelled < 1
    ):
        raise ValueError(f"n_unlabelled must be a positive integer or None, got {n_unlabelled!r}")
    z = _z(level)
    s2 = spread**2
    target = (h / z) ** 2
    keep = 1 - max(float(rho), 0.0) ** 2  # share of the human variance the judge leaves
    human_only = s2 / target
    if n_unlabelled is None:
        ppi = keep * s2 / target
    else:
        big_n = float(n_unlabelled)
        b = target * big_n - s2
        ppi = (-b + math.sqrt(b * b + 4 * target * keep * s2 * big_n)) / (2 * target)
    # 1e-9: a count that is a whole number in exact arithmetic must not round up to the next
    n_human = max(2, math.ceil(human_only - 1e-9))
    n_ppi = min(n_human, max(2, math.ceil(ppi - 1e-9)))
    return RatingsPlan(
        n_ppi, n_human, n_human - n_ppi, float(rho), spread, h, level,
        None if n_unlabelled is None else int(n_unlabelled),
    )  # fmt: skip


def _positive(value: float | None, name: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)
