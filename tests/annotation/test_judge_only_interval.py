"""The judge-only figures of the estimates (a judge run's and the award follow-ups') follow the
one interval rule: Wilson for a share, t for a mean, never a zero-width interval at a handful
of items ("0.00 [0.00, 0.00] N=2" was the normal interval of 0 of 2)."""

from __future__ import annotations

import pytest
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import DescrStatsW

from annotation.estimates import Estimate, judge_only_estimate
from judge.stats.ppi import classical_mean


@pytest.mark.parametrize(("hits", "n"), [(0, 1), (0, 2), (2, 2), (3, 5), (11, 30)])
def test_a_judge_only_share_is_wilson_in_percent(hits: int, n: int) -> None:
    values = [100.0] * hits + [0.0] * (n - hits)
    e = judge_only_estimate(values, "share", (0.0, 100.0))
    # Expected: statsmodels' Wilson interval of hits of n, in percent.
    low, high = proportion_confint(hits, n, alpha=0.05, method="wilson")
    assert (e.value, e.ci_low, e.ci_high) == (
        pytest.approx(100 * hits / n),
        pytest.approx(100 * low),
        pytest.approx(100 * high),
    )
    assert e.text(2) != "0.00 [0.00, 0.00]" and e.reason == ""


def test_a_judge_only_mean_is_t_or_too_few() -> None:
    few = judge_only_estimate([80.0, 100.0], "mean_pct", (0.0, 100.0))
    assert (few.value, few.ci_low, few.ci_high) == (90.0, None, None)
    assert few.text() == "90.0 (too few items for an interval (2; 5 needed))"
    values = [60.0, 80.0, 80.0, 100.0, 40.0, 60.0]
    e = judge_only_estimate(values, "mean_pct", (0.0, 100.0))
    # Expected: statsmodels' t interval of the mean (within 0-100, so not clipped).
    assert (e.ci_low, e.ci_high) == pytest.approx(DescrStatsW(values).tconfint_mean(0.05))


def test_a_normal_interval_of_no_width_is_given_as_none() -> None:
    # Two rated items both 0: the classical mean's se is 0, so its normal interval is [0, 0].
    m = classical_mean([0.0, 0.0])
    assert (m.ci_low, m.ci_high) == (0.0, 0.0)
    e = Estimate.of(m, "human-only", 2, "random", (0.0, 100.0))
    assert (e.value, e.ci_low, e.ci_high) == (0.0, None, None)
    assert e.reason == "no spread: the 2 values used are all the same"
    # Detection the other way: values that differ keep their interval.
    spread = Estimate.of(classical_mean([0.0, 100.0]), "human-only", 2, "random", (0.0, 100.0))
    assert spread.ci_low is not None and spread.reason == ""
