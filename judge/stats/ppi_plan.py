"""How many human ratings a prediction-powered mean needs (PPI++, ``judge.stats.ppi``).

**Planning** (``plan_human_ratings``). With the best ``lam`` and the population values, the
PPI++ variance (``judge.stats.ppi``) is ``(sd**2 / n) * (1 - rho**2 * N / (n + N))`` for the
judge-human correlation ``rho`` and ``N`` unrated items (minimise ``(sd**2 - 2 lam c +
lam**2 s**2) / n + lam**2 s**2 / N`` over ``lam``, with ``c`` the covariance and ``s`` the
judge's sd: ``lam = (c / s**2) N / (n + N)``, ppi_py's tuned ``lam``). For ``N`` much larger
than ``n`` it is ``(1 - rho**2) sd**2 / n``. (This takes the judge's variance to be the same
on rated and unrated items, as it is when the rated ones are a random sample.) Setting ``z *
sqrt(variance)`` equal to the target half-width ``h`` and solving for ``n`` gives:

- ``n_unlabelled=N``: ``N`` unrated items whatever ``n`` is (the judge scores more items as
  people rate more): a quadratic;
- ``n_judged=M``: a fixed set of ``M`` judged items of which people rate ``n``, so that the
  unrated ones are the other ``N = M - n`` (ppi_py's convention, as ``annotation.estimates``
  passes them). Then ``n + N = M`` and the variance is ``(sd**2 / n) (1 - rho**2 (M - n) /
  M) = sd**2 (1 - rho**2) / n + sd**2 rho**2 / M``, linear in ``1 / n``: ``n = sd**2 (1 -
  rho**2) / (T - sd**2 rho**2 / M)`` for ``T = (h / z)**2``. Rating all ``M`` gives the
  human-only variance ``sd**2 / M``; a target below it is out of reach, and the plan then
  asks for the human-only count (more than ``M``: ``n_ppi > M`` says so).

A human-only mean needs ``z**2 sd**2 / h**2``.

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
    n_judged: int | None = None  # judged items, rated ones included (the other convention)


def plan_human_ratings(
    *,
    rho: float,
    half_width: float,
    sd: float | None = None,
    variance: float | None = None,
    n_unlabelled: int | None = None,
    n_judged: int | None = None,
    alpha: float = 0.05,
) -> RatingsPlan:
    """Human ratings needed for an interval of ``half_width`` around the humans' mean.

    ``rho``: the judge-human correlation from a pilot; ``sd`` (or ``variance``, give one): the
    humans' spread; ``n_unlabelled``: judged items without a rating (None: as many as needed,
    ``N`` much larger than ``n``), or instead ``n_judged``: the judged items of which the
    ratings are drawn (the unrated ones are the ``M - n`` others). With ``T = (half_width /
    z)**2``, ``z = z(1 - alpha/2)``:

    - human-only: ``n = z**2 sd**2 / half_width**2``;
    - PPI++, unlimited judge scores: ``n = (1 - rho**2) z**2 sd**2 / half_width**2``;
    - PPI++, ``N`` judge scores: the variance ``sd**2 (n + (1 - rho**2) N) / (n (n + N))``
      equals ``T`` at the positive root of
      ``T n**2 + (T N - sd**2) n - (1 - rho**2) sd**2 N = 0``;
    - PPI++, ``M`` judged items of which ``n`` are rated: ``n = (1 - rho**2) sd**2 / (T -
      rho**2 sd**2 / M)``, out of reach (the human-only count) when ``T <= sd**2 / M``.

    Rounded up, and at least 2 (the estimators need 2 ratings). Assumes the tuned ``lam``
    is not clipped: a negative ``rho`` is clipped to ``lam = 0`` and saves nothing (planned
    as ``rho = 0``), and a judge whose scores spread much less than people's (``sd_judge <
    rho * sd``) may need ``lam > 1``, which is clipped to 1 and saves less than planned.

    >>> p = plan_human_ratings(rho=0.8, sd=1.0, half_width=0.1)
    >>> p.n_ppi, p.n_human_only  # 0.36 * 384.1 -> 139; 1.959964**2 / 0.01 -> 385
    (139, 385)
    >>> q = plan_human_ratings(rho=0.8, sd=1.0, half_width=0.1, n_judged=1000)
    >>> q.n_ppi  # 0.36 / (0.1**2 / 1.959964**2 - 0.64 / 1000) = 183.4
    184
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
    if n_judged is not None and (
        isinstance(n_judged, bool) or not isinstance(n_judged, numbers.Integral) or n_judged < 1
    ):
        raise ValueError(f"n_judged must be a positive whole number or None, got {n_judged!r}")
    if n_judged is not None and n_unlabelled is not None:
        raise ValueError("give at most one of n_unlabelled and n_judged")
    z = _z(level)
    s2 = spread**2
    target = (h / z) ** 2
    keep = 1 - max(float(rho), 0.0) ** 2  # share of the human variance the judge leaves
    human_only = s2 / target
    if n_judged is not None:
        # The unrated part is M - n: linear in 1 / n (module docstring); out of reach when
        # even rating all M items (variance s2 / M) is wider than the target.
        spare = target - (1 - keep) * s2 / n_judged
        reachable = target > s2 / n_judged
        ppi = keep * s2 / spare if reachable else human_only
    elif n_unlabelled is None:
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
        None if n_judged is None else int(n_judged),
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
