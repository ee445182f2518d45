"""Krippendorff's alpha from coincidence matrices, vectorised over bootstrap resamples.

``judge.stats.raters.krippendorff_alphas`` calls the ``krippendorff`` package once per
resample and level: exact, but a second or more per thousand resamples of a few thousand
items. A qualification (``judge.qualify_rule``) needs the interval of one level for the
judge against the humans and for the humans among themselves on every qualification, so
here alpha is computed for every resample at once from each unit's contribution to the
coincidence matrix (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"):

    o_ck = sum_u n_uc (n_uk - [c == k]) / (m_u - 1)      (units with m_u >= 2 values)
    D_o  = sum_ck o_ck d_ck / n,   D_e = sum_ck n_c n_k d_ck / (n (n - 1)),   alpha = 1 - D_o / D_e

with n_uc the number of values c unit u received, m_u their sum, n_c = sum_k o_ck, n their
total, and d_ck the level's distance: (c - k)^2 for interval, [c != k] for nominal. A
resample of units is a vector of how many times each unit was drawn, so every resample's
coincidence matrix is one matrix product. tests/judge/stats/test_coincidence.py checks the
values against the package to 1e-9.

>>> counts = np.array([[2, 0], [0, 2], [1, 1]])  # three units of two values on a 0/1 scale
>>> round(alpha_from_counts(counts, [0.0, 1.0], level="nominal"), 6)
0.444444
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]
LEVELS = ("nominal", "interval")


def distances(domain: Sequence[float], level: str) -> Array:
    """(q, q) squared distances between the values of ``domain`` at ``level``."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    v = np.asarray(domain, dtype=np.float64)
    if level == "nominal":
        return np.asarray(v[:, None] != v[None, :], dtype=np.float64)
    return np.asarray((v[:, None] - v[None, :]) ** 2, dtype=np.float64)


def unit_coincidences(counts: ArrayLike) -> Array:
    """(units, q * q): each pairable unit's contribution to the coincidence matrix, from
    (units, q) value counts; units with fewer than two values contribute nothing."""
    c = np.asarray(counts, dtype=np.float64)
    m = c.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(m >= 2, 1.0 / (m - 1), 0.0)
    outer = c[:, :, None] * c[:, None, :]
    outer -= c[:, :, None] * np.eye(c.shape[1])[None]  # n_uc (n_uk - [c == k])
    return np.asarray((outer * scale[:, None, None]).reshape(c.shape[0], -1), dtype=np.float64)


def alpha_from_coincidences(o: Array, d: Array) -> Array:
    """(B,) alpha of (B, q * q) coincidence matrices with (q, q) distances ``d``; NaN where
    fewer than two values are pairable or every pairable value is the same (D_e = 0)."""
    q = d.shape[0]
    o3 = o.reshape(o.shape[0], q, q)
    n_c = o3.sum(axis=2)
    n = n_c.sum(axis=1)
    observed = np.einsum("bck,ck->b", o3, d)
    expected = np.einsum("bc,bk,ck->b", n_c, n_c, d)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = 1.0 - (n - 1) * observed / expected
    return np.asarray(np.where((n >= 2) & (expected > 0), out, np.nan), dtype=np.float64)


def alpha_from_counts(counts: ArrayLike, domain: Sequence[float], *, level: str) -> float:
    """Alpha of (units, q) value counts over ``domain`` (NaN when undefined)."""
    o = unit_coincidences(counts).sum(axis=0, keepdims=True)
    return float(alpha_from_coincidences(o, distances(domain, level))[0])


def bootstrap_alpha(
    counts: ArrayLike,
    domain: Sequence[float],
    *,
    level: str,
    n_resamples: int,
    rng: np.random.Generator,
) -> tuple[float, Array]:
    """Alpha and its ``n_resamples`` bootstrap values: each resample draws as many pairable
    units as there are, with replacement (a multinomial count per unit, as drawing indices
    would give). Resamples where alpha is undefined are NaN."""
    per_unit = unit_coincidences(counts)
    per_unit = per_unit[per_unit.sum(axis=1) > 0]  # only pairable units are resampled
    d = distances(domain, level)
    value = float(alpha_from_coincidences(per_unit.sum(axis=0, keepdims=True), d)[0])
    n = per_unit.shape[0]
    if n < 2 or n_resamples == 0:
        return value, np.full(n_resamples, math.nan)
    draws = rng.multinomial(n, np.full(n, 1.0 / n), size=n_resamples).astype(np.float64)
    return value, alpha_from_coincidences(draws @ per_unit, d)


def value_counts(values: Array, domain: Sequence[float]) -> Array:
    """(units, q) counts of each domain value per unit, from a (coders, units) matrix with
    NaN for a missing value (the package's reliability data)."""
    v = np.asarray(values, dtype=np.float64)
    return np.stack([np.sum(v == x, axis=0) for x in domain], axis=1).astype(np.float64)
