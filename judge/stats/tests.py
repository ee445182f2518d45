"""Significance tests for the audit suites and the judge's own checks: exact binomial,
chi-square independence, Kruskal-Wallis, a t-interval for a mean, and paired score shifts
(Wilcoxon signed-rank with a bootstrap CI of the mean difference).

Each test returns a small frozen result that keeps the counts behind the figure. Where a
test cannot be run on the data (too few observations, an undefined statistic) the result
says ``tested=False`` with the reason and NaN figures, rather than raising: an audit report
shows "not tested" for that row and carries on. Arguments that are simply wrong (negative
counts, a probability outside (0, 1)) raise ``ValueError`` naming the argument.

This module imports no project module (an import-linter contract checks it).

>>> r = binomial_two_sided(108, 221)
>>> round(r.p_value, 3)
0.788
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

NAN = float("nan")


@dataclass(frozen=True)
class BinomialResult:
    """Exact two-sided binomial test of ``successes`` out of ``trials`` against ``p_null``."""

    successes: int
    trials: int
    p_null: float
    share: float  # successes / trials (NaN with no trials)
    ci_low: float  # Wilson score interval of the share at ``ci_level``
    ci_high: float
    ci_level: float
    p_value: float
    tested: bool
    reason: str = ""


@dataclass(frozen=True)
class ChiSquareResult:
    """Pearson chi-square test of independence on a contingency table (rows x columns)."""

    table: tuple[tuple[int, ...], ...]
    expected: tuple[tuple[float, ...], ...]  # empty when the margins make it undefined
    min_expected: float  # the smallest expected count (NaN when undefined)
    statistic: float
    dof: int
    p_value: float
    tested: bool
    reason: str = ""


@dataclass(frozen=True)
class KruskalResult:
    """Kruskal-Wallis H test that several groups come from the same distribution."""

    group_sizes: tuple[int, ...]
    statistic: float
    p_value: float
    tested: bool
    reason: str = ""


@dataclass(frozen=True)
class MeanInterval:
    """Mean with its Student-t confidence interval."""

    n: int
    mean: float  # NaN with no values
    sd: float  # sample standard deviation (ddof=1); NaN with fewer than two values
    low: float  # NaN with fewer than two values
    high: float
    level: float
    tested: bool
    reason: str = ""


def _check_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _check_level(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ValueError(f"{name} must be between 0 and 1 (exclusive), got {value!r}")


def binomial_two_sided(
    successes: int, trials: int, p: float = 0.5, *, ci_level: float = 0.95
) -> BinomialResult:
    """Exact two-sided binomial test (seed 000's Wilson-Sterne method).

    The two-sided p-value is the total probability, under ``Binomial(trials, p)``, of every
    outcome no more likely than the one observed; ``scipy.stats.binomtest`` computes exactly
    that (with a tiny relative tolerance so ties in floating point count as ties). With no
    trials there is nothing to test: ``tested=False``.

    >>> r = binomial_two_sided(98, 186)
    >>> round(r.p_value, 3), round(r.share, 3)
    (0.509, 0.527)
    """
    successes = _check_count("successes", successes)
    trials = _check_count("trials", trials)
    if successes > trials:
        raise ValueError(f"successes ({successes}) must not exceed trials ({trials})")
    _check_level("p", p)
    _check_level("ci_level", ci_level)
    if trials == 0:
        return BinomialResult(
            successes, trials, p, NAN, NAN, NAN, ci_level, NAN, False, "no trials"
        )
    result = stats.binomtest(successes, trials, p, alternative="two-sided")
    ci = result.proportion_ci(confidence_level=ci_level, method="wilson")
    return BinomialResult(
        successes=successes,
        trials=trials,
        p_null=p,
        share=successes / trials,
        ci_low=float(ci.low),
        ci_high=float(ci.high),
        ci_level=ci_level,
        p_value=float(result.pvalue),
        tested=True,
    )


def chi_square_independence(
    table: Sequence[Sequence[int]], *, min_expected: float = 5, yates: bool = False
) -> ChiSquareResult:
    """Pearson chi-square test of independence, run only when every expected count is at
    least ``min_expected``.

    No continuity correction by default, for every shape including 2 x 2: Yates' correction
    is known to over-correct (p-values too large), it would make a 2 x 2 table's statistic
    differ in kind from a larger table's, and the small-sample case it guards against is
    already excluded by the expected-count gate. ``yates=True`` applies it to 2 x 2 tables
    (SciPy applies it only where there is one degree of freedom).

    The gate is on expected counts, the textbook condition for the chi-square
    approximation. Seed 000 words its rule as "cells with fewer than five observations"; on
    its Table 4 both readings skip and keep the same rows (levels 10, 15, 20 skipped; level 5
    and all levels tested, smallest expected counts 5.40 and 8.38).
    """
    if isinstance(min_expected, bool) or not isinstance(min_expected, (int, float)):
        raise ValueError(f"min_expected must be a number, got {min_expected!r}")
    if min_expected < 0:
        raise ValueError(f"min_expected must be non-negative, got {min_expected!r}")
    rows = [list(row) for row in table]
    if len(rows) < 2 or any(len(row) != len(rows[0]) for row in rows) or len(rows[0]) < 2:
        raise ValueError("table must be a rectangular table with at least 2 rows and 2 columns")
    counts = tuple(
        tuple(_check_count(f"table[{i}][{j}]", v) for j, v in enumerate(row))
        for i, row in enumerate(rows)
    )
    observed = np.array(counts, dtype=float)
    dof = (observed.shape[0] - 1) * (observed.shape[1] - 1)
    row_totals = observed.sum(axis=1)
    col_totals = observed.sum(axis=0)
    if (row_totals == 0).any() or (col_totals == 0).any():
        return ChiSquareResult(
            counts, (), NAN, NAN, dof, NAN, False, "a row or column total is zero"
        )
    expected = np.outer(row_totals, col_totals) / observed.sum()
    expected_t = tuple(tuple(float(v) for v in row) for row in expected)
    smallest = float(expected.min())
    if smallest < min_expected:
        reason = f"smallest expected count {smallest:.2f} is below {min_expected:g}"
        return ChiSquareResult(counts, expected_t, smallest, NAN, dof, NAN, False, reason)
    result = stats.chi2_contingency(observed, correction=yates)
    return ChiSquareResult(
        table=counts,
        expected=expected_t,
        min_expected=smallest,
        statistic=float(result.statistic),
        dof=int(result.dof),
        p_value=float(result.pvalue),
        tested=True,
    )


def kruskal_wallis(groups: Sequence[Sequence[float]]) -> KruskalResult:
    """Kruskal-Wallis H test across ``groups`` (empty groups are left out).

    Not tested (never an exception) with fewer than two non-empty groups, or when every
    value is the same (the statistic is 0/0 then).
    """
    arrays = [np.asarray(list(g), dtype=float) for g in groups]
    for i, a in enumerate(arrays):
        if np.isnan(a).any():
            raise ValueError(f"groups[{i}] contains NaN")
    sizes = tuple(int(a.size) for a in arrays)
    present = [a for a in arrays if a.size]
    if len(present) < 2:
        return KruskalResult(sizes, NAN, NAN, False, "fewer than two non-empty groups")
    pooled = np.concatenate(present)
    if np.all(pooled == pooled[0]):
        return KruskalResult(sizes, NAN, NAN, False, "all values are identical")
    result = stats.kruskal(*present)
    return KruskalResult(sizes, float(result.statistic), float(result.pvalue), True)


def mean_ci(values: Sequence[float], level: float = 0.95) -> MeanInterval:
    """Mean of ``values`` with its Student-t interval ``mean ± t(level, n-1) · sd/√n``.

    >>> r = mean_ci([1.0, 2.0, 3.0])
    >>> r.mean, round(r.low, 3), round(r.high, 3)
    (2.0, -0.484, 4.484)
    """
    _check_level("level", level)
    data = np.asarray(list(values), dtype=float)
    if np.isnan(data).any():
        raise ValueError("values contains NaN")
    n = int(data.size)
    if n == 0:
        return MeanInterval(0, NAN, NAN, NAN, NAN, level, False, "no values")
    mean = float(data.mean())
    if n == 1:
        return MeanInterval(1, mean, NAN, NAN, NAN, level, False, "one value: no interval")
    sd = float(data.std(ddof=1))
    half = float(stats.t.ppf((1 + level) / 2, n - 1)) * sd / math.sqrt(n)
    return MeanInterval(n, mean, sd, mean - half, mean + half, level, True)


@dataclass(frozen=True)
class PairedShift:
    """How paired scores move (e.g. a judge's score of an answer and of its counterfactual
    copy): the share of pairs whose score changed, the mean difference ``after - before``
    with a bootstrap CI, and the Wilcoxon signed-rank test (zero differences dropped, as
    Wilcoxon's original test does). ``tested`` is False, with the reason, where the test
    cannot run (no pairs, or every difference zero)."""

    n: int
    changed: int
    share_changed: float
    mean_difference: float
    ci_low: float
    ci_high: float
    level: float
    wilcoxon_statistic: float
    p_value: float
    tested: bool
    reason: str | None = None

    @property
    def ci_excludes_zero(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0


def paired_shift(
    before: Sequence[float],
    after: Sequence[float],
    *,
    level: float = 0.95,
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> PairedShift:
    """Paired differences ``after - before``: share changed, mean with a percentile bootstrap
    CI over pairs (``scipy.stats.bootstrap``), and ``scipy.stats.wilcoxon``.

    >>> r = paired_shift([3, 3, 4, 2], [3, 4, 4, 3])
    >>> r.changed, r.share_changed, r.mean_difference
    (2, 0.5, 0.5)
    """
    _check_level("level", level)
    x = np.asarray(list(before), dtype=float)
    y = np.asarray(list(after), dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"before and after differ in length: {x.size} and {y.size}")
    if np.isnan(x).any() or np.isnan(y).any():
        raise ValueError("scores contain NaN: pair only scored judgments")
    d = y - x
    n = int(d.size)
    if n == 0:
        return PairedShift(0, 0, NAN, NAN, NAN, NAN, level, NAN, NAN, False, "no pairs")
    changed = int(np.count_nonzero(d))
    mean = float(d.mean())
    if changed == 0:
        return PairedShift(n, 0, 0.0, 0.0, 0.0, 0.0, level, NAN, NAN, False, "no score changed")
    if n == 1:
        low = high = NAN
    else:
        boot = stats.bootstrap(
            (d,), np.mean, confidence_level=level, n_resamples=n_bootstrap,
            method="percentile", random_state=np.random.default_rng(seed),
        )  # fmt: skip
        low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    test = stats.wilcoxon(d, zero_method="wilcox")
    return PairedShift(
        n, changed, changed / n, mean, low, high, level,
        float(test.statistic), float(test.pvalue), True,
    )  # fmt: skip
