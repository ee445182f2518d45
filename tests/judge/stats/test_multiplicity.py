"""Holm and Benjamini-Yekutieli adjusted p-values against hand computation (and statsmodels
where it is installed), Bonferroni's simultaneous confidence, and the cell-vs-rest tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from judge.stats.multiplicity import (
    BY,
    HOLM,
    adjust,
    benjamini_yekutieli,
    flags,
    holm,
    simultaneous_confidence,
)
from judge.stats.versus_rest import FISHER, WELCH, mean_vs_rest, share_p_values, share_vs_rest

P = [0.01, 0.04, 0.03, 0.005]
# Holm by hand: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04;
# made non-decreasing: 0.02, 0.03, 0.06, 0.06; back in the input order:
HOLM_HAND = [0.03, 0.06, 0.06, 0.02]
# BY by hand: H_4 = 1 + 1/2 + 1/3 + 1/4 = 25/12. Benjamini-Hochberg p_(k) * 4 / k on the sorted
# p: 0.02, 0.02, 0.04, 0.04 (already a running minimum from the top); times 25/12:
BY_HAND = [0.02 * 25 / 12, 0.04 * 25 / 12, 0.04 * 25 / 12, 0.02 * 25 / 12]


def test_holm_equals_the_hand_computation() -> None:
    assert holm(P) == pytest.approx(HOLM_HAND, abs=1e-12)
    assert adjust(P, HOLM) == pytest.approx(HOLM_HAND, abs=1e-12)


def test_by_equals_the_hand_computation() -> None:
    assert benjamini_yekutieli(P) == pytest.approx(BY_HAND, abs=1e-12)
    assert adjust(P, BY) == pytest.approx(BY_HAND, abs=1e-12)


def test_untested_cells_stay_out_of_the_family() -> None:
    # By hand: the family is the two tested p-values, m = 2: Holm 0.01 * 2 = 0.02, 0.04 * 1
    # -> 0.04; BY with H_2 = 1.5: BH 0.02, 0.04, times 1.5 = 0.03, 0.06.
    got = holm([0.01, None, 0.04])
    assert got[0] == pytest.approx(0.02) and math.isnan(got[1]) and got[2] == pytest.approx(0.04)
    by = benjamini_yekutieli([0.01, float("nan"), 0.04])
    assert by[0] == pytest.approx(0.03) and math.isnan(by[1]) and by[2] == pytest.approx(0.06)
    assert flags(got, 0.05) == [True, False, True]
    assert holm([]) == [] and benjamini_yekutieli([None]) != [0.0]


def test_against_statsmodels_where_installed() -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(7)
    p = rng.uniform(0, 0.2, 25).tolist()
    assert holm(p) == pytest.approx(multitest.multipletests(p, method="holm")[1], abs=1e-12)
    by = multitest.multipletests(p, method="fdr_by")[1]
    assert benjamini_yekutieli(p) == pytest.approx(by, abs=1e-12)


def test_bad_input_says_what_to_fix() -> None:
    with pytest.raises(ValueError, match=r"p_values must lie in \[0, 1\]"):
        holm([0.5, 1.2])
    with pytest.raises(ValueError, match="method must be"):
        adjust([0.5], "bonferroni")
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        simultaneous_confidence(1.0, 3)


def test_bonferroni_confidence() -> None:
    # By hand: 10 intervals at 1 - 0.05 / 10 = 0.995; one (or none) keeps 0.95.
    assert simultaneous_confidence(0.95, 10) == pytest.approx(0.995)
    assert simultaneous_confidence(0.95, 1) == simultaneous_confidence(0.95, 0) == 0.95


def _fisher_by_hand(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher p of [[a, b], [c, d]] from the hypergeometric probabilities written
    out with math.comb: the tables with the same margins as likely as, or less likely than,
    the observed one (with scipy's relative tolerance of 1e-7)."""
    row, col, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        return math.comb(col, x) * math.comb(n - col, row - x) / math.comb(n, row)

    seen = prob(a)
    lo, hi = max(0, row + col - n), min(row, col)
    return sum(prob(x) for x in range(lo, hi + 1) if prob(x) <= seen * (1 + 1e-7))


def test_share_vs_rest_is_fisher_against_the_pooled_rest() -> None:
    got = share_vs_rest([8, 2, 3], [10, 10, 10])
    # group 0: [[8, 2], [5, 15]]; group 1: [[2, 8], [11, 9]]; group 2: [[3, 7], [10, 10]]
    hand = [
        _fisher_by_hand(8, 2, 5, 15),
        _fisher_by_hand(2, 8, 11, 9),
        _fisher_by_hand(3, 7, 10, 10),
    ]
    assert [t.p_value for t in got] == pytest.approx(hand, rel=1e-9)
    assert {t.test for t in got} == {FISHER}
    lone = share_vs_rest([3, 0], [5, 0])
    assert lone[0].p_value is None and lone[0].reason == "no other group to compare with"
    assert lone[1].reason == "no items"


def test_mean_vs_rest_is_welch() -> None:
    a, b, c = [1.0, 2.0, 3.0, 4.0], [2.0, 2.5, 3.5], [5.0, 4.0, 4.5, 6.0]
    got = mean_vs_rest([a, b, c])
    # Welch by hand for group 0 against b + c: t = (m1 - m2) / sqrt(v1/n1 + v2/n2) with the
    # Welch-Satterthwaite degrees of freedom.
    x, y = np.array(a), np.array(b + c)
    v1, v2 = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    t = (x.mean() - y.mean()) / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1**2 / (x.size - 1) + v2**2 / (y.size - 1))
    assert got[0].p_value == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-9)
    assert got[0].test == WELCH
    flat = mean_vs_rest([[3.0, 3.0], [3.0, 3.0, 3.0]])
    assert flat[0].p_value is None and flat[0].reason == "no spread on either side"
    assert mean_vs_rest([[1.0], [2.0, 3.0]])[0].reason == "fewer than two values on a side"


def test_share_p_values_equal_fisher_exact_table_by_table() -> None:
    # The vectorised sum against scipy's own fisher_exact, one call per table, on random rows
    # of 5 groups (small and lopsided cells included: n from 1 to 40, shares 0 to 1).
    rng = np.random.default_rng(3)
    n = rng.integers(1, 41, size=(60, 5))
    hits = rng.binomial(n, rng.uniform(0, 1, size=(60, 1)))
    got = share_p_values(hits, n)
    for r in range(60):
        for i in range(5):
            rest_k, rest_n = hits[r].sum() - hits[r, i], n[r].sum() - n[r, i]
            table = [[hits[r, i], n[r, i] - hits[r, i]], [rest_k, rest_n - rest_k]]
            assert got[r, i] == pytest.approx(stats.fisher_exact(table).pvalue, rel=1e-9)


def test_mean_p_values_equal_ttest_ind_welch() -> None:
    # Against scipy's ttest_ind(equal_var=False) on the values themselves.
    rng = np.random.default_rng(4)
    groups = [rng.normal(50 + 5 * i, 10 + i, size=8 + 3 * i) for i in range(6)]
    got = mean_vs_rest(groups)
    for i, g in enumerate(groups):
        rest = np.concatenate([h for j, h in enumerate(groups) if j != i])
        want = stats.ttest_ind(g, rest, equal_var=False).pvalue
        assert got[i].p_value == pytest.approx(want, rel=1e-9)
