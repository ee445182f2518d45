"""judge.stats.paired against independent computations: scipy's binomial test and
permutation test, a brute-force enumeration written here, Holm and TOST worked by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from judge.stats.paired import (
    bootstrap_mean_ci,
    bootstrap_mean_cis,
    equivalence_test,
    holm,
    min_attainable_p,
    sign_flip_test,
)


def brute_force(values: list[float], null: float = 0.0, alternative: str = "two-sided") -> float:
    """The sign-flip p by listing all 2**n sign patterns (written independently)."""
    x = [v - null for v in values]
    observed = sum(x)
    hits = 0
    patterns = list(itertools.product((1, -1), repeat=len(x)))
    for signs in patterns:
        s = sum(sign * abs(v) for sign, v in zip(signs, x, strict=True))
        if alternative == "greater":
            hits += s >= observed - 1e-9
        elif alternative == "less":
            hits += s <= observed + 1e-9
        else:
            hits += abs(s) >= abs(observed) - 1e-9
    return hits / len(patterns)


def test_equal_sizes_reduce_to_the_exact_sign_test() -> None:
    # 16 changes of -2 and 34 unchanged pairs: every sign pattern's |sum| is 2 * |#neg -
    # #pos|, so the test is the two-sided sign test: scipy.stats.binomtest(0, 16) =
    # 2 / 2**16 = 3.05e-5 (the figure of issue 24).
    r = sign_flip_test([-2.0] * 16 + [0.0] * 34)
    assert r.p_value == pytest.approx(stats.binomtest(0, 16).pvalue, rel=1e-12)
    assert r.p_value == pytest.approx(3.0517578125e-05)
    assert (r.n, r.nonzero, r.method) == (50, 16, "exact")
    # 12 down, 4 up, all of size 1: binomtest(4, 16) two-sided = 0.0768
    r = sign_flip_test([-1.0] * 12 + [1.0] * 4)
    assert r.p_value == pytest.approx(stats.binomtest(4, 16).pvalue, rel=1e-12)


@pytest.mark.parametrize(
    "values",
    [
        [1, 2, 3, -1],
        [-2, -1, -1, 0, 3, -2, -4, 1, -1],
        [0.5, -1.5, -2, -1, -0.5, 2.5, -3],  # means of two samples: a grid of 1/2
        [-1 / 3, -2 / 3, 1, -4 / 3, -2, 1 / 3, -1],  # means over three rubrics
    ],
)
def test_grid_count_equals_brute_force_and_scipy(values: list[float]) -> None:
    got = sign_flip_test(values)
    assert got.method == "exact"
    assert got.p_value == pytest.approx(brute_force(values), abs=1e-12)
    # scipy's permutation test of one sample flips signs; all 2**n patterns when
    # n_resamples exceeds them (scipy counts ties with a relative tolerance, as here)
    reference = stats.permutation_test(
        (np.array(values, dtype=float),), np.mean, permutation_type="samples",
        n_resamples=10**6, alternative="two-sided",
    )  # fmt: skip
    assert got.p_value == pytest.approx(reference.pvalue, abs=1e-12)
    for alternative in ("greater", "less"):
        one = sign_flip_test(values, alternative=alternative)  # type: ignore[arg-type]
        assert one.p_value == pytest.approx(brute_force(values, 0, alternative), abs=1e-12)


def test_values_off_any_grid_are_enumerated_then_sampled() -> None:
    rng = np.random.default_rng(3)
    small = list(rng.normal(-0.3, 1, 12))  # expected scores: no grid
    got = sign_flip_test(small)
    assert got.method == "exact"
    assert got.p_value == pytest.approx(brute_force(small), abs=1e-12)
    big = rng.normal(-0.3, 1, 40)
    sampled = sign_flip_test(big, n_resamples=20_000, seed=1)
    assert sampled.method.startswith("monte carlo")
    # scipy's own Monte Carlo sign flips, 100,000 draws: both estimate the same p
    reference = stats.permutation_test(
        (big,), np.mean, permutation_type="samples", n_resamples=100_000,
        random_state=np.random.default_rng(2),
    ).pvalue  # fmt: skip
    assert abs(sampled.p_value - reference) < 0.01
    assert sign_flip_test(big, n_resamples=20_000, seed=1) == sampled  # seeded


def test_smallest_attainable_p_and_nothing_to_flip() -> None:
    # all of m changes one way is the most extreme pattern: 2 / 2**m two-sided
    assert min_attainable_p(3) == 0.25 and min_attainable_p(5) == 0.0625
    assert min_attainable_p(6) == 0.03125 and min_attainable_p(0) == 1.0
    r = sign_flip_test([-2, -2, -2, 0, 0, 0])
    assert r.p_value == r.min_p == 0.25
    assert sign_flip_test([0, 0, 0]).p_value == 1.0
    empty = sign_flip_test([])
    assert empty.n == 0 and empty.p_value != empty.p_value  # NaN
    with pytest.raises(ValueError, match="NaN"):
        sign_flip_test([1.0, float("nan")])


def test_holm_by_hand() -> None:
    # sorted 0.001, 0.01, 0.02, 0.04 times 4, 3, 2, 1: 0.004, 0.03, 0.04, 0.04
    assert holm([0.04, 0.001, 0.02, 0.01]) == pytest.approx([0.04, 0.004, 0.04, 0.03])
    # made non-decreasing: 0.03 * 3 = 0.09 then 0.031 * 2 = 0.062 -> 0.09; capped at 1
    assert holm([0.03, 0.031, 0.9]) == pytest.approx([0.09, 0.09, 0.9])
    assert holm([0.6, 0.7]) == [1.0, 1.0]
    assert holm([]) == []


def test_equivalence_by_hand() -> None:
    values = [0.0] * 40 + [1.0] * 5 + [-1.0] * 5
    # mean 0, sd = sqrt(10 / 49), se = sd / sqrt(50) = 0.0639; t against +-0.25 = -+3.91 on
    # 49 df: one-sided p = scipy.stats.t.sf(3.913, 49) ~ 1.4e-4 each
    sd = (10 / 49) ** 0.5
    t = 0.25 / (sd / 50**0.5)
    r = equivalence_test(values, margin=0.25)
    assert r.equivalent and r.p_value == pytest.approx(stats.t.sf(t, 49))
    # 4 pairs, one changed by 1: mean 0.25 itself cannot be ruled out
    assert not equivalence_test([0, 0, 0, 1], margin=0.25).equivalent
    # no variation: 47 unchanged pairs are needed (4 * (1 - 0.05**(1/n)) < 0.25)
    assert equivalence_test([0.0] * 47, margin=0.25).equivalent
    assert not equivalence_test([0.0] * 46, margin=0.25).equivalent
    assert not equivalence_test([0.0] * 47, margin=0.25, bound=8).equivalent
    assert not equivalence_test([-2.0] * 60, margin=0.25).equivalent


def test_bootstrap_interval_is_seeded_and_brackets_the_mean() -> None:
    values = [-2.0] * 8 + [0.0] * 8
    low, high = bootstrap_mean_ci(values, n_bootstrap=4000, seed=5)
    assert (low, high) == bootstrap_mean_ci(values, n_bootstrap=4000, seed=5)
    # the mean is -1; a resample's mean is -2 * Binomial(16, 1/2) / 16, whose 2.5 % and
    # 97.5 % points are -2 * 12/16 = -1.5 and -2 * 4/16 = -0.5 (scipy.stats.binom.ppf)
    assert low == pytest.approx(-2 * stats.binom.ppf(0.975, 16, 0.5) / 16, abs=0.13)
    assert high == pytest.approx(-2 * stats.binom.ppf(0.025, 16, 0.5) / 16, abs=0.13)


def test_intervals_at_two_levels_come_from_one_set_of_resamples() -> None:
    """The paired comparison asks for the 95 % interval and the TOST 90 % one at once: both
    must be what each level gives from the same seed's resamples, written out here with
    numpy (the same generator, draws and percentile rule, chunked by 500 as the module
    documents)."""
    values = np.array([0.0, 1.0, -1.0, 2.0, 0.5, 0.0, 1.5, -0.5, 1.0, 3.0, 0.0])
    rng = np.random.default_rng(11)
    means = np.concatenate(
        [values[rng.integers(0, values.size, (n, values.size))].mean(1) for n in (500, 500, 200)]
    )
    wide = np.percentile(means, [2.5, 97.5])
    narrow = np.percentile(means, [5.0, 95.0])
    got = bootstrap_mean_cis(values, levels=(0.95, 0.90), n_bootstrap=1200, seed=11)
    assert np.allclose(got, [wide, narrow], rtol=0, atol=1e-12)
    assert got[0] == bootstrap_mean_ci(values, level=0.95, n_bootstrap=1200, seed=11)
    assert bootstrap_mean_ci(values, level=0.90, n_bootstrap=1200, seed=11) == got[1]
