"""Paired score shifts (judge trust): share changed and mean difference by hand, the
Wilcoxon test against scipy called directly, and the bootstrap CI against a resampling loop
written here."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from judge.stats.tests import paired_shift

BEFORE = [3, 4, 2, 5, 3, 4, 1, 3, 2, 4, 3, 5]
AFTER = [4, 4, 3, 5, 4, 5, 2, 3, 3, 4, 4, 5]


def test_figures_by_hand_and_wilcoxon_against_scipy() -> None:
    r = paired_shift(BEFORE, AFTER)
    # Differences: 1,0,1,0,1,1,1,0,1,0,1,0 -> 7 of 12 changed, mean 7/12.
    assert (r.n, r.changed) == (12, 7)
    assert r.share_changed == pytest.approx(7 / 12)
    assert r.mean_difference == pytest.approx(7 / 12)
    d = np.array(AFTER) - np.array(BEFORE)
    expected = stats.wilcoxon(d[d != 0])  # zeros dropped by hand: Wilcoxon's original rule
    assert r.p_value == pytest.approx(expected.pvalue)
    assert r.tested and r.ci_excludes_zero


def test_bootstrap_interval_against_a_loop_written_here() -> None:
    """Percentile interval of the resampled mean; a loop of 20,000 resamples with another
    generator agrees to within a few hundredths."""
    r = paired_shift(BEFORE, AFTER, n_bootstrap=20_000)
    d = np.array(AFTER, dtype=float) - np.array(BEFORE, dtype=float)
    rng = np.random.default_rng(99)
    means = d[rng.integers(0, d.size, (20_000, d.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    assert r.ci_low == pytest.approx(low, abs=0.05)
    assert r.ci_high == pytest.approx(high, abs=0.05)


def test_no_change_and_no_pairs_are_not_tested() -> None:
    same = paired_shift([3, 4], [3, 4])
    assert (same.tested, same.reason, same.share_changed) == (False, "no score changed", 0.0)
    empty = paired_shift([], [])
    assert (empty.tested, empty.reason) == (False, "no pairs")


def test_wrong_input_raises() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        paired_shift([1, 2], [1])
    with pytest.raises(ValueError, match="NaN"):
        paired_shift([1, float("nan")], [1, 2])
