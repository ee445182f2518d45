"""The closed forms that replaced scipy.stats calls on the figures' path (so that commands
reading figures, ``fairjudge gate`` first, start without importing scipy.stats) against
scipy.stats itself, the independent reference, to 1e-12 over grids of their arguments:

- ``wilson_interval`` = ``binomtest(k, n).proportion_ci(method="wilson")``;
- ``mean_interval`` = ``t.interval(confidence, n - 1, loc=mean, scale=sem)``;
- ``rank_correlation_interval``'s normal quantile = ``norm.ppf``;
- ``mcnemar_exact`` = ``binomtest(k, n, 0.5).pvalue`` (two-sided);
- ``min_detectable_shift``'s t quantiles = ``t.ppf``.

Relative 1e-12 where a value can be tiny (binomial tails down to 1e-300), absolute 1e-12
for interval bounds in [0, 1] or on a score scale."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from judge.stats.intervals import mean_interval, rank_correlation_interval, wilson_interval
from judge.stats.paired import mcnemar_exact, min_detectable_shift

CONFIDENCES = (0.5, 0.8, 0.9, 0.95, 0.99, 0.999)


@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_wilson_equals_scipys_proportion_ci(confidence: float) -> None:
    sizes = [*range(1, 26), 40, 97, 100, 250, 999, 1000, 10_000, 123_457]
    for n in sizes:
        ks = range(n + 1) if n <= 25 else sorted({0, 1, 2, n // 3, n // 2, n - 1, n})
        for k in ks:
            ref = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
            low, high = wilson_interval(k, n, confidence=confidence)
            assert abs(low - ref.low) <= 1e-12 and abs(high - ref.high) <= 1e-12, (k, n)


@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_mean_interval_equals_scipys_t_interval(confidence: float) -> None:
    rng = np.random.default_rng(7)
    for n in [5, 6, 7, 10, 19, 30, 31, 100, 1000, 25_000]:
        for draw in range(5):
            # 1-5 scores (ties), then spread-out reals, then a large offset with tiny spread
            values = [
                rng.integers(1, 6, n).astype(float),
                rng.normal(3, 1.5, n),
                1e6 + rng.normal(0, 1e-3, n),
            ][draw % 3]
            if np.ptp(values) == 0:
                continue
            ref_low, ref_high = stats.t.interval(
                confidence, n - 1, loc=float(values.mean()), scale=float(stats.sem(values))
            )
            got = mean_interval(list(values), confidence=confidence)
            tol = 1e-12 * max(1.0, abs(float(values.mean())))  # absolute, in the values' unit
            assert got.low == pytest.approx(ref_low, abs=tol, rel=0), (n, draw)
            assert got.high == pytest.approx(ref_high, abs=tol, rel=0), (n, draw)


@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_rank_correlation_interval_uses_the_normal_quantile(confidence: float) -> None:
    for n in [4, 5, 10, 50, 1000]:
        for rho in np.linspace(-0.99, 0.99, 23):
            # Fisher z interval, its quantile from scipy.stats (the module's own formula)
            half = float(stats.norm.ppf((1 + confidence) / 2)) * math.sqrt(1.06 / (n - 3))
            z = math.atanh(float(rho))
            got = rank_correlation_interval(float(rho), n, confidence=confidence)
            assert got.low == pytest.approx(math.tanh(z - half), abs=1e-12, rel=0)
            assert got.high == pytest.approx(math.tanh(z + half), abs=1e-12, rel=0)


def test_mcnemar_exact_equals_scipys_two_sided_binomtest() -> None:
    rng = np.random.default_rng(11)
    checked = 0
    for n in [*range(1, 61), 365, 999, 1000, 1658, 2546, 5000]:
        ks = range(n + 1) if n <= 60 else sorted(
            {0, 1, 2, n // 2 - 1, n // 2, (n + 1) // 2, n - 1, n, *rng.integers(0, n + 1, 15)}
        )  # fmt: skip
        for k in ks:
            ref = stats.binomtest(int(k), n, 0.5).pvalue
            got = mcnemar_exact(int(k), n)
            # relative where the tail is tiny; none below the smallest normal double, where
            # both underflow (scipy gives 5e-324, a subnormal, for 1 of 1658)
            assert abs(got - ref) <= 1e-12 * ref + 1e-300, (k, n, got, ref)
            checked += 1
    assert checked > 1_900
    assert mcnemar_exact(0, 0) == 1.0  # no discordant pair: nothing to test
    with pytest.raises(ValueError, match="between 0 and changed=3"):
        mcnemar_exact(4, 3)


def test_min_detectable_shift_equals_the_t_quantile_formula() -> None:
    for n in [2, 3, 5, 10, 25, 100, 10_000]:
        for alpha in (0.01, 0.05, 0.1):
            for power in (0.5, 0.8, 0.9, 0.99):
                # the docstring's formula with scipy.stats's quantiles
                ref = (
                    (stats.t.ppf(1 - alpha / 2, n - 1) + stats.t.ppf(power, n - 1))
                    * 1.3
                    / math.sqrt(n)
                )
                got = min_detectable_shift(1.3, n, alpha=alpha, power=power)
                assert got == pytest.approx(ref, rel=1e-12, abs=0), (n, alpha, power)
