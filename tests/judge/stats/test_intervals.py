"""Intervals of the stage metrics: Wilson checked by hand and against statsmodels (an
independent implementation), the bootstrap against its defining properties and against the
normal-theory interval it approaches for many items."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from judge.stats.intervals import bootstrap_mean_interval, wilson_interval


def test_wilson_by_hand_for_8_of_10() -> None:
    # p = 0.8, z = 1.959964, z^2 = 3.841459:
    # centre = (8 + z^2/2) / (10 + z^2) = 9.920729 / 13.841459 = 0.716740
    # half = z / (10 + z^2) * sqrt(10 * 0.8 * 0.2 + z^2 / 4) = 0.141601 * 1.600114 = 0.226578
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.490162, abs=1e-6)
    assert high == pytest.approx(0.943318, abs=1e-6)


@pytest.mark.parametrize(
    ("k", "n"), [(0, 1), (1, 1), (0, 2), (1, 2), (2, 3), (0, 18), (7, 18), (18, 18), (40, 97)]
)
def test_wilson_matches_statsmodels(k: int, n: int) -> None:
    expected = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert wilson_interval(k, n) == pytest.approx(expected, abs=1e-9)


def test_wilson_other_confidence_matches_statsmodels() -> None:
    expected = proportion_confint(5, 12, alpha=0.10, method="wilson")
    assert wilson_interval(5, 12, confidence=0.90) == pytest.approx(expected, abs=1e-9)


def test_wilson_is_undefined_without_items_and_checks_its_arguments() -> None:
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError, match="successes must be an integer between 0 and n=2"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        wilson_interval(0, -1)
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        wilson_interval(1, 2, confidence=95)


def test_bootstrap_interval_covers_the_mean_and_is_reproducible() -> None:
    values = [1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 5.0, 3.0]
    low, high = bootstrap_mean_interval(values)
    assert low < np.mean(values) < high  # mean 3.125
    assert 1.0 <= low and high <= 5.0  # a mean of resampled values stays within their range
    assert bootstrap_mean_interval(values) == (low, high)  # the same seed, the same interval
    assert bootstrap_mean_interval(values, seed=1) != (low, high)  # the seed is used


def test_bootstrap_interval_of_constant_or_single_values_is_the_point() -> None:
    assert bootstrap_mean_interval([4.0, 4.0, 4.0]) == (4.0, 4.0)
    assert bootstrap_mean_interval([2.0]) == (2.0, 2.0)
    assert all(math.isnan(v) for v in bootstrap_mean_interval([]))


def test_bootstrap_interval_approaches_the_normal_interval_for_many_items() -> None:
    # For n = 400 the mean is close to normal: the interval should be near
    # mean +- 1.96 * sd / sqrt(n) (sd with ddof=0, as the bootstrap resamples the data).
    values = np.random.default_rng(7).integers(1, 6, size=400).astype(float)
    low, high = bootstrap_mean_interval(values.tolist(), n_resamples=4000)
    half = 1.959964 * values.std() / math.sqrt(values.size)
    assert low == pytest.approx(values.mean() - half, abs=0.2 * half)
    assert high == pytest.approx(values.mean() + half, abs=0.2 * half)


def test_bootstrap_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="n_resamples must be an integer >= 1"):
        bootstrap_mean_interval([1.0], n_resamples=0)
    with pytest.raises(ValueError, match="values must be finite"):
        bootstrap_mean_interval([1.0, float("nan")])
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        bootstrap_mean_interval([1.0], confidence=1.0)
