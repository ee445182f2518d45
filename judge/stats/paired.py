"""Paired differences tested exactly: the sign-flip permutation test of their mean, exact
McNemar for verdicts that changed, Holm's step-down correction, a percentile bootstrap
interval of the mean, and an equivalence test (two one-sided tests against a margin).

Why a sign-flip test: under "no effect" each pair's difference is as likely to have come out
with the opposite sign, so the mean's null distribution is that of ``sum(+-|d_i|) / n`` over
all 2**n sign patterns. It uses the differences' sizes (unlike the sign test), needs no
normal approximation (unlike Wilcoxon's with ties and zeros, which are the rule for scores on
a 1-5 scale) and gives an exact p at any n:

- differences on a grid (scores are whole points, or means of a few samples: every value a
  multiple of some 1/L) are counted exactly for any n by adding one pair at a time to the
  distribution of the sum on that grid;
- otherwise (expected scores from log-probabilities) all 2**m patterns are enumerated for up to
  ``EXACT_MAX`` non-zero differences, and a seeded Monte Carlo sample is drawn beyond.

With m non-zero differences, the smallest p the test can give is 2 / 2**m (all signs the
same), whatever the sizes: with 5 changed pairs it is 0.0625, so no shift can be detected at
0.05. ``min_p`` reports it so that a caller can say "too few pairs" instead of testing.

This module imports no project module, and of scipy only ``scipy.special``.

>>> r = sign_flip_test([-2, -2, -2, -2, -2, -2, 0, 0])
>>> r.p_value, r.min_p, r.method
(0.03125, 0.03125, 'exact')
>>> holm([0.01, 0.04, 0.03])
[0.03, 0.06, 0.06]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import special

Alternative = Literal["two-sided", "greater", "less"]
EXACT_MAX = 16
"""Non-zero differences off any grid up to which all sign patterns are enumerated."""
GRID_CELLS = 5e7
"""Work (pairs x grid points) up to which the grid count is exact; Monte Carlo beyond."""
MAX_DENOMINATOR = 2520
"""Finest grid tried: 1/2520 covers means of up to 10 samples (lcm of 1..10)."""
N_RESAMPLES = 20_000
BOOTSTRAP_CHUNK = 1_000_000
"""Resampled values drawn at once by ``bootstrap_mean_cis`` (at least 500 resamples)."""
_TIE = 1e-9  # relative slack so that sums equal in exact arithmetic count as ties


@dataclass(frozen=True)
class SignFlip:
    """A sign-flip permutation test of ``mean(values) - null``."""

    n: int
    nonzero: int  # differences not equal to the null value: only they can flip
    mean: float  # mean of the values (NaN with none)
    p_value: float  # NaN with no values
    min_p: float  # the smallest p attainable with ``nonzero`` differences (1 with none)
    method: str  # "exact" or "monte carlo (N draws, seed S)"
    alternative: str


def _check(values: Sequence[float] | NDArray[np.float64], name: str = "values") -> np.ndarray:
    data = np.asarray(list(values), dtype=float)
    if data.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if not np.isfinite(data).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return data


def min_attainable_p(nonzero: int, alternative: Alternative = "two-sided") -> float:
    """The smallest p a sign-flip (or sign) test can give with ``nonzero`` differences.

    >>> min_attainable_p(5), min_attainable_p(5, "less")
    (0.0625, 0.03125)
    """
    if nonzero < 0:
        raise ValueError(f"nonzero must be non-negative, got {nonzero}")
    if nonzero == 0:
        return 1.0
    return min(1.0, (2.0 if alternative == "two-sided" else 1.0) * 0.5**nonzero)


def _grid(x: np.ndarray) -> np.ndarray | None:
    """``|x|`` as whole multiples of one step (divided by their gcd), or None when no grid
    up to 1/MAX_DENOMINATOR fits or the exact count would be too much work."""
    denominators = 1
    for v in np.unique(np.abs(x)):
        f = Fraction(float(v)).limit_denominator(MAX_DENOMINATOR)
        if abs(float(f) - v) > 1e-9 * max(1.0, abs(v)):
            return None
        denominators = math.lcm(denominators, f.denominator)
    k = np.rint(np.abs(x) * denominators).astype(np.int64)
    g = int(np.gcd.reduce(k)) if k.size else 1
    k //= max(g, 1)
    if k.size * int(k.sum()) > GRID_CELLS:
        return None
    return k


def _exact_on_grid(k: np.ndarray, observed: int, alternative: Alternative) -> float:
    """P(S >= observed), P(S <= observed) or P(|S| >= |observed|) for S = sum(+-k_i), by
    adding one pair at a time (halves and sums only: no cancellation, so tiny tails keep
    their precision)."""
    total = int(k.sum())
    dist: np.ndarray = np.zeros(2 * total + 1)
    dist[total] = 1.0  # index total is S = 0
    for step in k:
        s = int(step)
        shifted = np.zeros_like(dist)
        shifted[s:] += dist[: dist.size - s]
        shifted[: dist.size - s] += dist[s:]
        dist = shifted * 0.5
    sums = np.arange(-total, total + 1)
    if alternative == "greater":
        p = dist[sums >= observed].sum()
    elif alternative == "less":
        p = dist[sums <= observed].sum()
    else:
        p = dist[np.abs(sums) >= abs(observed)].sum()
    return float(min(1.0, p))


def _tail(stat: np.ndarray, observed: float, alternative: Alternative, scale: float) -> np.ndarray:
    slack = _TIE * max(1.0, scale)
    if alternative == "greater":
        return np.asarray(stat >= observed - slack)
    if alternative == "less":
        return np.asarray(stat <= observed + slack)
    return np.asarray(np.abs(stat) >= abs(observed) - slack)


def sign_flip_test(
    values: Sequence[float] | NDArray[np.float64],
    *,
    null: float = 0.0,
    alternative: Alternative = "two-sided",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> SignFlip:
    """Sign-flip permutation test that the values are symmetric about ``null`` (their mean
    equals it): exact where it can be (see the module docstring), Monte Carlo otherwise with
    p = (1 + as extreme) / (1 + draws). ``greater``: the alternative is a mean above null.

    >>> sign_flip_test([1, 2, 3, -1]).p_value  # 6 of the 16 sign patterns give |sum| >= 5
    0.375
    >>> sign_flip_test([0.25, 0.25, 0.25], null=0.25).p_value  # nothing can flip
    1.0
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, got {alternative!r}")
    data = _check(values)
    n = int(data.size)
    if n == 0:
        return SignFlip(0, 0, float("nan"), float("nan"), 1.0, "exact", alternative)
    x = data - null
    x = x[np.abs(x) > _TIE * max(1.0, abs(null))]
    m = int(x.size)
    mean = float(data.mean())
    floor = min_attainable_p(m, alternative)
    if m == 0:
        return SignFlip(n, 0, mean, 1.0, 1.0, "exact", alternative)
    k = _grid(x)
    if k is not None:
        signs = np.sign(x).astype(np.int64)
        p = _exact_on_grid(k, int((signs * k).sum()), alternative)
        return SignFlip(n, m, mean, max(p, floor), floor, "exact", alternative)
    observed = float(x.sum())
    scale = float(np.abs(x).sum())
    if m <= EXACT_MAX:
        patterns = ((np.arange(2**m)[:, None] >> np.arange(m)) & 1) * 2 - 1
        sums = patterns @ np.abs(x)
        p = float(_tail(sums, observed, alternative, scale).mean())
        return SignFlip(n, m, mean, max(p, floor), floor, "exact", alternative)
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_resamples, 1000):
        draws = min(1000, n_resamples - start)
        signs = rng.integers(0, 2, size=(draws, m)) * 2 - 1
        hits += int(_tail(signs @ np.abs(x), observed, alternative, scale).sum())
    p = (1 + hits) / (1 + n_resamples)
    method = f"monte carlo ({n_resamples} draws, seed {seed})"
    return SignFlip(n, m, mean, p, floor, method, alternative)


def mcnemar_exact(changed_up: int, changed: int) -> float:
    """Exact McNemar: the two-sided binomial test (p = 1/2) of ``changed_up`` of the
    ``changed`` discordant pairs having moved up, as ``scipy.stats.binomtest(changed_up,
    changed, 0.5).pvalue`` gives it. With p = 1/2 the distribution is symmetric, so the p
    is twice the smaller tail, ``P(X <= j)`` for ``j = min(k, n - k)``, capped at 1; the tail
    is Boost's regularised incomplete beta (``special.betaincc(j + 1, n - j, 1/2)``), the
    function scipy's own binomial distribution calls. 1 with no discordant pair.

    >>> mcnemar_exact(0, 5), mcnemar_exact(3, 6)
    (0.0625, 1.0)
    """
    k, n = int(changed_up), int(changed)
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"changed_up must lie between 0 and changed={n}, got {k}")
    if n == 0:
        return 1.0
    j = min(k, n - k)
    return float(min(1.0, 2 * special.betaincc(j + 1, n - j, 0.5)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control under any dependence
    between the tests): the i-th smallest p times (m - i + 1), made non-decreasing, capped
    at 1. A p-value is significant at alpha after correction when its adjusted value is at
    most alpha."""
    p = np.asarray(list(p_values), dtype=float)
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p_values must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return [float(v) for v in out]


def bootstrap_mean_ci(
    values: Sequence[float] | NDArray[np.float64],
    *,
    level: float = 0.95,
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (values resampled with replacement); NaN
    with fewer than two values, or with ``n_bootstrap=0`` (no interval wanted).

    >>> bootstrap_mean_ci([-2.0, -2.0, -2.0])
    (-2.0, -2.0)
    """
    return bootstrap_mean_cis(values, levels=(level,), n_bootstrap=n_bootstrap, seed=seed)[0]


def bootstrap_mean_cis(
    values: Sequence[float] | NDArray[np.float64],
    *,
    levels: Sequence[float],
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> list[tuple[float, float]]:
    """``bootstrap_mean_ci`` at several levels from one set of resampled means: each
    interval equals the one ``bootstrap_mean_ci`` gives alone with the same seed."""
    for level in levels:
        if not 0 < level < 1:
            raise ValueError(f"level must be between 0 and 1 (exclusive), got {level!r}")
    data = _check(values)
    if data.size < 2 or n_bootstrap == 0:
        return [(float("nan"), float("nan")) for _ in levels]
    rng = np.random.default_rng(seed)
    means = np.empty(n_bootstrap)
    # Chunks of resamples keep memory flat for large n (one chunk for small n: the draws,
    # hence the intervals, are the same whatever the chunk size).
    rows = max(500, BOOTSTRAP_CHUNK // data.size)
    for start in range(0, n_bootstrap, rows):
        stop = min(n_bootstrap, start + rows)
        means[start:stop] = data[rng.integers(0, data.size, (stop - start, data.size))].mean(1)
    tails = [(1 - level) / 2 * 100 for level in levels]
    bounds = np.percentile(means, [q for tail in tails for q in (tail, 100 - tail)])
    return [(float(bounds[2 * i]), float(bounds[2 * i + 1])) for i in range(len(levels))]


@dataclass(frozen=True)
class Equivalence:
    """Two one-sided tests that the mean lies within ``(-margin, +margin)``: ``p_value`` is
    the larger of the two; ``equivalent`` when it is at most alpha. ``method`` says how."""

    margin: float
    p_value: float
    equivalent: bool
    method: str


def equivalence_test(
    values: Sequence[float] | NDArray[np.float64],
    *,
    margin: float,
    alpha: float = 0.05,
    bound: float = 4.0,
) -> Equivalence:
    """TOST (Schuirmann 1987) of ``|mean| < margin``: one-sample t-tests against
    ``-margin`` (alternative greater) and ``+margin`` (less), each at ``alpha``.

    When the values do not vary (typically: no score changed) the t statistic is undefined;
    then the only way the true mean can reach the margin is through pairs unlike every pair
    seen, each at most ``bound`` away (4 on a 1-5 scale). With n identical values v, the
    one-sided Clopper-Pearson bound on the share of such pairs is 1 - alpha**(1/n), so
    equivalence holds when ``|v| + bound * (1 - alpha**(1/n)) < margin``: with v = 0, margin
    0.25 and bound 4 that takes 47 pairs.

    >>> equivalence_test([0.0] * 47, margin=0.25).equivalent
    True
    >>> equivalence_test([0.0] * 46, margin=0.25).equivalent
    False
    """
    if margin <= 0:
        raise ValueError(f"margin must be positive, got {margin!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {alpha!r}")
    data = _check(values)
    n = int(data.size)
    if n < 2:
        return Equivalence(margin, float("nan"), False, "too few pairs")
    if np.all(data == data[0]):
        reach = abs(float(data[0])) + bound * (1 - alpha ** (1 / n))
        ok = reach < margin
        # The p-value of that bound: the alpha at which it would just reach the margin.
        room = (margin - abs(float(data[0]))) / bound
        p = float((1 - room) ** n) if 0 < room < 1 else (0.0 if room >= 1 else 1.0)
        return Equivalence(margin, p, ok, "no variation: Clopper-Pearson bound")
    # the two one-sample t-tests, computed directly (scipy.stats.ttest_1samp gives the same
    # figures with a large per-call overhead that a simulation of thousands of audits feels)
    se = float(data.std(ddof=1)) / math.sqrt(n)
    mean = float(data.mean())
    lower = special.stdtr(n - 1, -(mean + margin) / se)  # P(T >= t) for H0: mean <= -margin
    upper = special.stdtr(n - 1, (mean - margin) / se)  # P(T <= t) for H0: mean >= +margin
    p = float(max(lower, upper))
    return Equivalence(margin, p, p <= alpha, "TOST (t)")


POWER = 0.8


def min_detectable_shift(sd: float, n: int, *, alpha: float = 0.05, power: float = POWER) -> float:
    """The smallest mean shift a two-sided paired test at ``alpha`` detects with probability
    ``power`` from ``n`` paired differences of standard deviation ``sd``: the usual
    t-approximation ``(t[1 - alpha/2, n-1] + t[power, n-1]) * sd / sqrt(n)`` (NaN with fewer
    than two pairs or an undefined ``sd``; 0 when nothing varies, which says nothing about
    power: a caller reports that case apart).

    >>> round(min_detectable_shift(1.0, 25), 4)
    0.5842
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {alpha!r}")
    if not 0 < power < 1:
        raise ValueError(f"power must be between 0 and 1 (exclusive), got {power!r}")
    if n < 2 or sd != sd or sd < 0:
        return float("nan")
    df = n - 1
    # scipy.stats.t.ppf is special.stdtrit (tests/judge/stats/test_interval_forms.py)
    quantiles = float(special.stdtrit(df, 1 - alpha / 2) + special.stdtrit(df, power))
    return quantiles * float(sd) / math.sqrt(n)
