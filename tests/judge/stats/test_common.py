"""Invariance checks run over every pair coefficient (scikit-learn's test_common style): a new
coefficient must be registered here as symmetric or antisymmetric, and then passes or fails
the same checks as the others."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from judge.stats.coefficient import BootstrapOptions
from judge.stats.pairs import PAIR_COEFFICIENTS, judge_vs_human

# Swapping judge and human leaves these unchanged ...
SYMMETRIC = {
    "pearson",
    "spearman",
    "kendall",
    "kappa",
    "kappa_linear",
    "kappa_quadratic",
    "exact_agreement",
    "within_one",
    "ac1",
    "ac2_linear",
    "ac2_quadratic",
}
# ... and negates these (judge - human becomes human - judge).
ANTISYMMETRIC = {"mean_difference"}


def datasets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(12)
    judge = rng.integers(1, 6, 80).astype(float)
    means = np.clip(judge[:, None] + rng.integers(-2, 3, (80, 3)), 1, 5).mean(axis=1)
    skewed = np.clip(judge + rng.integers(0, 2, 80), 1, 5)  # the human is never lower
    return {
        "integers": (judge, np.clip(judge + rng.integers(-1, 2, 80), 1, 5)),
        "means of three raters": (judge, means),
        "one side shifted": (judge, skewed),
    }


DATA = datasets()


def test_every_pair_coefficient_is_registered() -> None:
    assert SYMMETRIC.isdisjoint(ANTISYMMETRIC)
    assert SYMMETRIC | ANTISYMMETRIC == set(PAIR_COEFFICIENTS)


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("name", PAIR_COEFFICIENTS)
def test_swapping_judge_and_human(name: str, data: str) -> None:
    x, y = DATA[data]
    options = BootstrapOptions(n_bootstrap=0)
    forward = judge_vs_human(x, y, options=options).coefficients[name]
    backward = judge_vs_human(y, x, options=options).coefficients[name]
    sign = 1 if name in SYMMETRIC else -1
    assert backward.value == pytest.approx(sign * forward.value, abs=1e-12)
    if forward.p_value is not None:
        assert backward.p_value == pytest.approx(forward.p_value, rel=1e-9)
    assert backward.n == forward.n


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("name", PAIR_COEFFICIENTS)
def test_item_order_does_not_matter(name: str, data: str) -> None:
    x, y = DATA[data]
    order = np.random.default_rng(3).permutation(x.size)
    options = BootstrapOptions(n_bootstrap=200, seed=5)
    a = judge_vs_human(x, y, options=options).coefficients[name]
    b = judge_vs_human(x[order], y[order], options=options).coefficients[name]
    assert b.value == pytest.approx(a.value, abs=1e-12)
    # The bootstrap resamples counts of distinct (judge, human) pairs, whose order is sorted:
    # the same seed gives the same interval whatever the order of the items.
    assert (b.ci_low, b.ci_high) == pytest.approx((a.ci_low, a.ci_high), abs=1e-12)


@pytest.mark.parametrize("data", DATA)
def test_defined_data_emit_no_warning(data: str) -> None:
    x, y = DATA[data]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = judge_vs_human(x, y, options=BootstrapOptions(n_bootstrap=200))
    assert all(c.undefined_reason is None for c in result.coefficients.values())
