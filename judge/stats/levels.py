"""Agreement above the item level (within groups, between systems), a judge's agreement with
itself across samples, and how many items a target precision needs.

Undefined coefficients are NaN with their reason and one ``UndefinedWarning`` each, as in
``judge.stats.pairs``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from judge.stats.bootstrap import Array, percentile_interval
from judge.stats.coefficient import (
    DEFAULT_OPTIONS,
    BootstrapOptions,
    Coefficient,
    check_options,
    warn_undefined,
)
from judge.stats.matrix import RatingMatrix
from judge.stats.pairs import CORRELATIONS, LABELS
from judge.stats.raters import krippendorff_alphas


@dataclass(frozen=True)
class GroupedCorrelation:
    """Correlations computed within each group, averaged over the groups that define them."""

    n_groups: int
    n_groups_skipped: int
    coefficients: dict[str, Coefficient]  # pearson, spearman, kendall

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_groups": self.n_groups,
            "n_groups_skipped": self.n_groups_skipped,
            **{k: c.to_dict() for k, c in self.coefficients.items()},
        }


@dataclass(frozen=True)
class SystemMeans:
    judge: float
    human: float


@dataclass(frozen=True)
class SystemLevel:
    """Correlations of per-system mean scores, one point per system."""

    n_systems: int
    systems: dict[str, SystemMeans]
    coefficients: dict[str, Coefficient]  # pearson, spearman, kendall

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_systems": self.n_systems,
            "systems": {k: {"judge": m.judge, "human": m.human} for k, m in self.systems.items()},
            **{k: c.to_dict() for k, c in self.coefficients.items()},
        }


@dataclass(frozen=True)
class SelfConsistency:
    """A judge's agreement with itself over repeated samples of the same items."""

    n_items: int
    n_samples: int
    share_disagreeing: float | None
    alpha_ordinal: Coefficient
    alpha_interval: Coefficient

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "n_samples": self.n_samples,
            "share_disagreeing": self.share_disagreeing,
            "alpha_ordinal": self.alpha_ordinal.to_dict(),
            "alpha_interval": self.alpha_interval.to_dict(),
        }

    def named(self) -> Iterator[tuple[str, Coefficient]]:
        yield "self-consistency alpha_ordinal", self.alpha_ordinal
        yield "self-consistency alpha_interval", self.alpha_interval


def _aligned(
    judge: ArrayLike, human: ArrayLike, keys: Sequence[Any], what: str
) -> tuple[Array, Array, NDArray[np.str_]]:
    x = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    k = np.asarray([str(g) for g in keys])
    if not (x.ndim == y.ndim == 1 and x.size == y.size == k.size):
        raise ValueError(f"judge, human and {what} must be 1-D and of the same length")
    return x, y, k


def grouped_correlations(
    judge: ArrayLike,
    human: ArrayLike,
    groups: Sequence[Any],
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    warn: bool = True,
) -> GroupedCorrelation:
    """Correlate within each group, then average over groups (summary-level correlation).

    Groups where either side is constant (or with fewer than 2 items) are skipped and counted.
    The CI resamples groups. The p-value is not defined for an average of correlations.
    """
    options = check_options(options)
    x, y, keys = _aligned(judge, human, groups, "groups")
    per_group: dict[str, list[float]] = {name: [] for name in CORRELATIONS}
    used = skipped = 0
    for key in np.unique(keys):
        mask = keys == key
        gx, gy = x[mask], y[mask]
        if gx.size < 2 or np.ptp(gx) == 0 or np.ptp(gy) == 0:
            skipped += 1
            continue
        used += 1
        for name, fn in CORRELATIONS.items():
            per_group[name].append(float(fn(gx, gy).statistic))
    out: dict[str, Coefficient] = {}
    rng = np.random.default_rng(options.seed)
    n = options.n_bootstrap
    for name, values in per_group.items():
        v = np.asarray(values)
        if v.size == 0:
            out[name] = Coefficient.undefined(
                0,
                "no group with two or more items and varying scores on both sides "
                f"({skipped} skipped)",
            )
            continue
        boot = (
            v[rng.integers(0, v.size, (n, v.size))].mean(axis=1)
            if n and v.size >= 2
            else np.array([])
        )
        low, high = (
            percentile_interval(boot, options.confidence) if boot.size else (math.nan, math.nan)
        )
        out[name] = Coefficient(float(v.mean()), low, high, None, int(v.size))
    if warn:
        warn_undefined((f"grouped {k}", c) for k, c in out.items())
    return GroupedCorrelation(used, skipped, out)


def _correlation(fn: Any, a: Array, b: Array) -> float:
    """The statistic, or NaN for constant input (where scipy would warn)."""
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(fn(a, b).statistic)


def system_level(
    judge: ArrayLike,
    human: ArrayLike,
    systems: Sequence[Any],
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    warn: bool = True,
) -> SystemLevel:
    """Correlate per-system mean scores (judge means vs human means), one point per system.

    The CI resamples items within each system and recomputes the system means.
    """
    options = check_options(options)
    x, y, keys = _aligned(judge, human, systems, "systems")
    names, index = np.unique(keys, return_inverse=True)
    sizes = np.bincount(index)
    mx, my = np.bincount(index, x) / sizes, np.bincount(index, y) / sizes
    means = {str(k): SystemMeans(float(a), float(b)) for k, a, b in zip(names, mx, my, strict=True)}
    rng = np.random.default_rng(options.seed)
    members = [np.flatnonzero(index == s) for s in range(names.size)]
    boots = []
    for _ in range(options.n_bootstrap if names.size >= 3 else 0):
        picks = [m[rng.integers(0, m.size, m.size)] for m in members]
        boots.append(
            (np.array([x[p].mean() for p in picks]), np.array([y[p].mean() for p in picks]))
        )
    reason = _system_reason(names.size, mx, my)
    out: dict[str, Coefficient] = {}
    for name, fn in CORRELATIONS.items():
        if reason is not None:
            out[name] = Coefficient.undefined(int(names.size), reason, p_value=math.nan)
            continue
        result = fn(mx, my)
        values = np.array([_correlation(fn, bx, by) for bx, by in boots])
        low, high = (
            percentile_interval(values, options.confidence) if boots else (math.nan, math.nan)
        )
        out[name] = Coefficient(
            float(result.statistic), low, high, float(result.pvalue), int(names.size)
        )
    if warn:
        warn_undefined((f"system-level {k}", c) for k, c in out.items())
    return SystemLevel(int(names.size), means, out)


def _system_reason(n: int, mx: Array, my: Array) -> str | None:
    if n < 3:
        return f"fewer than 3 systems (n={n})"
    said = [
        f"every system has the same mean {side} score ({m[0]:g})"
        for side, m in (("judge", mx), ("human", my))
        if np.ptp(m) == 0
    ]
    return "constant ratings: " + " and ".join(said) if said else None


def self_consistency(
    samples: ArrayLike,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    labels: Sequence[int] = LABELS,
    warn: bool = True,
) -> SelfConsistency:
    """Intra-judge agreement from an items x samples matrix (NaN = unscored sample) on the
    ``labels`` scale (1-5 unless given).

    Alpha treats the samples as raters (with CIs); ``share_disagreeing`` is the share of items
    with two or more scored samples whose scores are not all equal.
    """
    options = check_options(options)
    values = np.asarray(samples, dtype=float)
    if values.ndim != 2:
        raise ValueError("samples must be a 2-D items x samples array")
    usable = values[np.sum(~np.isnan(values), axis=1) >= 2]
    disagree = [np.ptp(row[~np.isnan(row)]) > 0 for row in usable]
    matrix = RatingMatrix(
        [str(i) for i in range(usable.shape[0])],
        [f"sample{k}" for k in range(values.shape[1])],
        usable.T,
    )
    found = krippendorff_alphas(matrix, options=options, labels=labels, warn=False)
    result = SelfConsistency(
        n_items=int(usable.shape[0]),
        n_samples=int(values.shape[1]),
        share_disagreeing=float(np.mean(disagree)) if disagree else None,
        alpha_ordinal=found["alpha_ordinal"],
        alpha_interval=found["alpha_interval"],
    )
    if warn:
        warn_undefined(result.named())
    return result


def items_needed(coefficient: Coefficient, target_half_width: float) -> int | None:
    """Items to rate for a CI half-width of ``target_half_width``, from a pilot estimate.

    Bootstrap CI widths shrink like 1/sqrt(n), so n_needed = n_pilot x (pilot half-width /
    target)^2, rounded up. None when the pilot CI is undefined.

    >>> items_needed(Coefficient(0.6, 0.4, 0.8, None, 50), 0.05)
    800
    """
    if target_half_width <= 0:
        raise ValueError(f"target_half_width must be > 0, got {target_half_width}")
    half = coefficient.half_width
    if not math.isfinite(half) or half <= 0 or coefficient.n < 2:
        return None
    return max(coefficient.n, math.ceil(round(coefficient.n * (half / target_half_width) ** 2, 9)))
