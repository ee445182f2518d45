"""The one interval rule (judge.stats.intervals): Wilson for shares and Student t for means,
each checked by hand and against statsmodels (an implementation independent of the scipy
calls the module makes) at n = 1, 2, 5 and 30; "too few" below 5 items for a mean, and never
a zero-width interval at a handful of items."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import DescrStatsW

from judge.stats.intervals import (
    MIN_MEAN_N,
    mean_interval,
    rank_correlation_interval,
    share_interval,
    wilson_interval,
)


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


# -- the rule at n = 1, 2, 5, 30 -------------------------------------------------------------


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (0, 2), (2, 2), (1, 2), (5, 5), (2, 5),
                                      (0, 30), (11, 30), (30, 30)])  # fmt: skip
def test_share_interval_at_one_two_five_and_thirty_items(k: int, n: int) -> None:
    # Expected: statsmodels' proportion_confint (its own Wilson formula), in percent.
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    ci = share_interval(k, n, scale=100)
    assert (ci.low, ci.high, ci.method, ci.n) == (
        pytest.approx(100 * low, abs=1e-9),
        pytest.approx(100 * high, abs=1e-9),
        "wilson",
        n,
    )
    # Never a point: even 0 of 1 or 2 of 2 keeps a width (the Wald interval would be 0 wide).
    assert ci.high is not None and ci.low is not None and ci.high - ci.low > 10


def test_share_interval_of_one_item_by_hand() -> None:
    # 1 of 1, z = 1.959964, z^2 = 3.841459: centre (1 + z^2/2) / (1 + z^2) = 2.920730 /
    # 4.841459 = 0.603275; half z / (1 + z^2) * sqrt(0 + z^2 / 4) = 0.404829 * 0.979982 =
    # 0.396725 -> [0.206550, 1].
    ci = share_interval(1, 1)
    assert (ci.low, ci.high) == (pytest.approx(0.206550, abs=1e-6), pytest.approx(1.0))


@pytest.mark.parametrize("n", [1, 2])
def test_mean_of_fewer_than_five_items_is_too_few(n: int) -> None:
    ci = mean_interval([5.0, 3.0][:n])
    assert (ci.low, ci.high, ci.n) == (None, None, n)
    assert ci.reason == f"too few items for an interval ({n}; 5 needed)"
    assert MIN_MEAN_N == 5


def test_mean_of_five_items_by_hand_and_against_statsmodels() -> None:
    # 1, 2, 3, 4, 5: mean 3, sd (ddof 1) sqrt(2.5) = 1.581139, se = 0.707107; t(0.975, 4) =
    # 2.776445 (a t table) -> half 1.963243 -> [1.036757, 4.963243].
    ci = mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (ci.low, ci.high, ci.method) == (
        pytest.approx(1.036757, abs=1e-6),
        pytest.approx(4.963243, abs=1e-6),
        "t",
    )
    assert (ci.low, ci.high) == pytest.approx(DescrStatsW([1, 2, 3, 4, 5]).tconfint_mean(0.05))


def test_mean_of_thirty_items_against_statsmodels_and_by_hand() -> None:
    values = [float(v) for v in np.random.default_rng(3).integers(1, 6, size=30)]
    ci = mean_interval(values, scale=20)  # percent of a 1-5 scale's maximum
    low, high = DescrStatsW(values).tconfint_mean(0.05)
    assert (ci.low, ci.high) == (pytest.approx(20 * low), pytest.approx(20 * high))
    # By hand: mean +- t(0.975, 29) sd / sqrt(30), t(0.975, 29) = 2.045230 (a t table).
    half = 2.045230 * np.std(values, ddof=1) / math.sqrt(30)
    assert ci.low == pytest.approx(20 * (np.mean(values) - half), abs=1e-4)


def test_a_mean_without_spread_has_no_interval_never_a_point() -> None:
    ci = mean_interval([5.0] * 30)
    assert (ci.low, ci.high) == (None, None)
    assert ci.reason == "no spread: all 30 items have the same value"
    # Detection both ways: one item off gives an interval again.
    assert mean_interval([5.0] * 29 + [4.0]).defined


def test_mean_interval_checks_its_arguments() -> None:
    assert mean_interval([]).reason == "no items"
    with pytest.raises(ValueError, match="values must be finite"):
        mean_interval([1.0, float("nan")])
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        mean_interval([1.0], confidence=1.0)


def test_rank_correlation_interval_by_hand() -> None:
    # rho 0.5 over 30 pairs: z = atanh(0.5) = 0.549306, se = sqrt(1.06 / 27) = 0.198139,
    # half = 1.959964 * 0.198139 = 0.388345 -> tanh(0.160961) = 0.159584, tanh(0.937651) =
    # 0.734142.
    ci = rank_correlation_interval(0.5, 30)
    assert (ci.low, ci.high) == (
        pytest.approx(0.159584, abs=1e-6),
        pytest.approx(0.734142, abs=1e-6),
    )
    assert not rank_correlation_interval(0.5, 3).defined
    assert not rank_correlation_interval(1.0, 30).defined
