"""Does a rated subset look like the run (judge/stats/representative.py)?

Expected values: scipy's Welch test called here, the standardised difference by hand, and
seeded draws: the 40 items a judge scored highest are flagged, random subsets are not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from judge.stats.representative import compare_sample

MAX_SMD, ALPHA = 0.2, 0.01  # the config's defaults (judge/config_estimates.py)


def test_numbers_by_hand() -> None:
    # Means 4.6 and 2.0; variances (ddof 1) 0.3 and 0.5714: spread sqrt(0.4357) = 0.6601,
    # SMD 2.6 / 0.6601 = 3.939. Welch's t from scipy.
    rated, unrated = [4, 5, 5, 4, 5], [1, 2, 3, 2, 1, 2, 3, 2]
    c = compare_sample(rated, unrated)
    spread = math.sqrt((np.var(rated, ddof=1) + np.var(unrated, ddof=1)) / 2)
    assert c.smd == pytest.approx(2.6 / spread)
    assert c.smd == pytest.approx(3.939, abs=1e-3)
    welch = stats.ttest_ind(rated, unrated, equal_var=False)
    assert (c.statistic, c.p_value) == pytest.approx((welch.statistic, welch.pvalue))


def test_constant_scores() -> None:
    assert compare_sample([3, 3], [3, 3, 3]).p_value == 1.0
    assert compare_sample([3, 3], [3, 3, 3]).smd == 0.0
    assert compare_sample([4, 4], [3, 3, 3]).smd == math.inf


def test_the_highest_scored_items_are_flagged_and_random_ones_are_not() -> None:
    # A run of 1,200 judge scores on a 1-5 scale. The 40 highest: flagged every time; 200
    # random subsets of 40: both bounds must be passed to flag, so at most ALPHA of them
    # (the test's level) can be, and none may be at this seed.
    rng = np.random.default_rng(42)
    flagged = 0
    for _ in range(200):
        scores = np.clip(np.rint(rng.normal(3.3, 0.9, 1200)), 1, 5)
        order = np.argsort(-scores, kind="stable")
        top = compare_sample(scores[order[:40]], scores[order[40:]])
        assert top.unrepresentative(max_smd=MAX_SMD, alpha=ALPHA)
        pick = rng.choice(1200, 40, replace=False)
        rest = np.setdiff1d(np.arange(1200), pick)
        flagged += compare_sample(scores[pick], scores[rest]).unrepresentative(
            max_smd=MAX_SMD, alpha=ALPHA
        )
    assert flagged <= 2  # 200 * 0.01 expected at most; seeded: the count is fixed


def test_too_few_scores_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2 scores"):
        compare_sample([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="NaN"):
        compare_sample([1.0, math.nan], [1.0, 2.0])
