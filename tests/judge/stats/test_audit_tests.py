"""The audits' significance tests reproduce seed 000's published p-values (SPEC §3) and agree
with independent computations: exact binomial sums done here with ``math.comb``, the
chi-square statistic from statsmodels' contingency tables, and small cases worked by hand."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm
from statsmodels.stats.contingency_tables import Table
from statsmodels.stats.proportion import proportion_confint

from judge.stats.tests import (
    binomial_two_sided,
    chi_square_independence,
    kruskal_wallis,
    mean_ci,
)


def sterne_p(k: int, n: int, p: float) -> float:
    """The two-sided p-value by its definition: the total probability of every outcome no
    more likely than ``k`` (exact rational arithmetic would be overkill: the relative
    tolerance only has to absorb floating-point ties)."""
    pmf = [math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(n + 1)]
    return min(1.0, sum(q for q in pmf if q <= pmf[k] * (1 + 1e-7)))


# Seed 000, Table 3 (GPT-4): (Black, White) counts and the printed two-sided p.
@pytest.mark.parametrize(
    ("black", "white", "printed"),
    [(108, 113, 0.788), (85, 75, 0.477), (291, 276, 0.557)],
    ids=["level10", "level15", "all"],
)
def test_binomial_reproduces_seed_000_table_3(black: int, white: int, printed: float) -> None:
    result = binomial_two_sided(black, black + white)
    assert result.tested
    assert round(result.p_value, 3) == printed
    assert result.p_value == pytest.approx(sterne_p(black, black + white, 0.5), rel=1e-9)


def test_level_5_misprint_is_a_normal_approximation() -> None:
    # Seed 000 prints 0.465 for 98 Black vs 88 White. The exact test gives 0.509; the
    # uncorrected normal approximation z = (98 - 93) / sqrt(186 / 4) = 0.7332 gives
    # 2 * (1 - Phi(0.7332)) = 0.4634, which is the printed figure to within 0.002.
    result = binomial_two_sided(98, 186)
    assert round(result.p_value, 3) == 0.509
    assert result.p_value == pytest.approx(sterne_p(98, 186, 0.5), rel=1e-9)
    z = (98 - 186 * 0.5) / math.sqrt(186 * 0.25)
    normal_p = 2 * norm.sf(z)
    assert normal_p == pytest.approx(0.465, abs=0.002)
    assert abs(result.p_value - normal_p) > 0.04


def test_binomial_share_and_wilson_interval_match_statsmodels() -> None:
    result = binomial_two_sided(108, 221)
    assert result.share == pytest.approx(108 / 221)
    low, high = proportion_confint(108, 221, alpha=0.05, method="wilson")
    assert (result.ci_low, result.ci_high) == pytest.approx((low, high), abs=1e-9)
    assert (result.successes, result.trials, result.p_null) == (108, 221, 0.5)


@pytest.mark.parametrize(("k", "n", "p"), [(3, 20, 0.3), (9, 20, 0.3), (0, 5, 0.2), (7, 7, 0.5)])
def test_binomial_asymmetric_null_sums_outcomes_no_more_likely(k: int, n: int, p: float) -> None:
    # With p != 0.5 this differs from doubling the smaller tail, so it pins the method.
    assert binomial_two_sided(k, n, p).p_value == pytest.approx(sterne_p(k, n, p), rel=1e-9)


def test_binomial_small_case_by_hand() -> None:
    # 0 of 3 at p = 0.5: outcomes 0 and 3 each have probability 1/8, the others 3/8, so the
    # outcomes no more likely than 0 are {0, 3}: p = 1/4.
    assert binomial_two_sided(0, 3).p_value == pytest.approx(0.25)


def test_binomial_without_trials_is_not_tested() -> None:
    # Seed 000's level 20 for GPT-4: 0 Black, 0 White, all 500 equivocal.
    result = binomial_two_sided(0, 0)
    assert not result.tested
    assert result.reason == "no trials"
    assert math.isnan(result.p_value) and math.isnan(result.share)


@pytest.mark.parametrize(
    ("args", "message"),
    [((5, 3), "exceed"), ((-1, 3), "successes"), ((1, 3, 1.5), "p must"), ((True, 3), "succ")],
)
def test_binomial_rejects_bad_arguments(args: tuple[float, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        binomial_two_sided(*args)  # type: ignore[arg-type]


# Seed 000, Table 4 (GPT-3.5 follow-up): rows Black, White; columns indecisive, justified,
# irrational.
LEVEL_5 = [[269, 9, 33], [151, 6, 18]]
ALL_LEVELS = [[965, 16, 80], [473, 9, 53]]


@pytest.mark.parametrize(
    ("table", "printed"), [(LEVEL_5, 0.944), (ALL_LEVELS, 0.257)], ids=["level5", "all"]
)
def test_chi_square_reproduces_seed_000_table_4(table: list[list[int]], printed: float) -> None:
    result = chi_square_independence(table)
    assert result.tested
    assert result.dof == 2
    assert round(result.p_value, 3) == printed
    reference = Table(table).test_nominal_association()  # Pearson chi-square, statsmodels
    assert result.statistic == pytest.approx(reference.statistic, rel=1e-9)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)


def test_chi_square_gate_lets_the_seeds_tested_rows_through() -> None:
    # Smallest expected count, justified x White: level 5 15 * 175 / 486 = 5.40;
    # all levels 25 * 535 / 1596 = 8.38. Both at least 5, so both are tested, as in the seed.
    assert chi_square_independence(LEVEL_5).min_expected == pytest.approx(15 * 175 / 486)
    assert chi_square_independence(ALL_LEVELS).min_expected == pytest.approx(25 * 535 / 1596)


@pytest.mark.parametrize(
    "table",
    [[[230, 5, 29], [138, 3, 20]], [[255, 2, 15], [132, 0, 15]]],
    ids=["level10", "level15"],
)
def test_chi_square_skips_the_rows_the_seed_did_not_test(table: list[list[int]]) -> None:
    # Level 10: justified x White expected 8 * 161 / 425 = 3.03 < 5 (the seed: "b", untested).
    result = chi_square_independence(table)
    assert not result.tested
    assert math.isnan(result.p_value)
    assert "below 5" in result.reason
    assert result.table == tuple(tuple(row) for row in table)


def test_chi_square_zero_column_is_not_tested() -> None:
    # Seed 000 level 20: no justified answers at all, so that column's total is 0.
    result = chi_square_independence([[211, 0, 3], [52, 0, 0]])
    assert not result.tested
    assert result.reason == "a row or column total is zero"


def test_chi_square_2x2_without_correction_by_hand() -> None:
    # [[10, 20], [20, 10]]: every expected count 15, chi2 = 4 * 25 / 15 = 6.6667, dof 1,
    # p = P(chi2_1 > 6.6667) = 2 * (1 - Phi(sqrt(6.6667))) = 0.009823.
    result = chi_square_independence([[10, 20], [20, 10]])
    assert result.statistic == pytest.approx(20 / 3)
    assert result.p_value == pytest.approx(2 * norm.sf(math.sqrt(20 / 3)))
    # Yates on request: (|10 - 15| - 0.5)^2 / 15 * 4 = 5.4.
    assert chi_square_independence([[10, 20], [20, 10]], yates=True).statistic == pytest.approx(5.4)


@pytest.mark.parametrize(
    "table", [[[1, 2, 3]], [[1, 2], [3]], [[1, -2], [3, 4]], [[1.5, 2], [3, 4]]]
)
def test_chi_square_rejects_bad_tables(table: list[list[float]]) -> None:
    with pytest.raises(ValueError, match="table"):
        chi_square_independence(table)  # type: ignore[arg-type]


def test_kruskal_by_hand() -> None:
    # Ranks 1-3 and 4-6, N = 6: H = 12 / 42 * (6^2 / 3 + 15^2 / 3) - 3 * 7 = 3.857143,
    # p = P(chi2_1 > H) = 2 * (1 - Phi(sqrt(H))).
    result = kruskal_wallis([[1, 2, 3], [4, 5, 6]])
    assert result.tested
    assert result.statistic == pytest.approx(27 / 7)
    assert result.p_value == pytest.approx(2 * norm.sf(math.sqrt(27 / 7)))
    assert result.group_sizes == (3, 3)


@pytest.mark.parametrize(
    ("groups", "reason"),
    [
        ([[0, 0, 0], [0, 0], [0]], "all values are identical"),
        ([[1, 2, 3]], "fewer than two non-empty groups"),
        ([[1, 2, 3], []], "fewer than two non-empty groups"),
        ([], "fewer than two non-empty groups"),
    ],
)
def test_kruskal_undefined_cases_are_not_tested(groups: list[list[float]], reason: str) -> None:
    result = kruskal_wallis(groups)
    assert not result.tested
    assert result.reason == reason
    assert math.isnan(result.statistic) and math.isnan(result.p_value)


def test_kruskal_leaves_out_empty_groups_but_reports_their_size() -> None:
    result = kruskal_wallis([[1, 2, 3], [], [4, 5, 6]])
    assert result.group_sizes == (3, 0, 3)
    assert result.statistic == pytest.approx(27 / 7)


def test_mean_ci_by_hand() -> None:
    # [1, 2, 3]: mean 2, sd 1, t(0.975, 2) = 4.302653, half-width 4.302653 / sqrt(3) = 2.484138.
    result = mean_ci([1.0, 2.0, 3.0])
    assert (result.n, result.mean, result.sd) == (3, 2.0, 1.0)
    assert (result.low, result.high) == pytest.approx((2 - 2.484138, 2 + 2.484138), abs=1e-6)


def test_mean_ci_undefined_cases() -> None:
    empty = mean_ci([])
    assert not empty.tested and empty.n == 0 and math.isnan(empty.mean)
    single = mean_ci([4.0])
    assert not single.tested and single.mean == 4.0 and math.isnan(single.low)
    with pytest.raises(ValueError, match="level"):
        mean_ci([1.0, 2.0], level=95)
