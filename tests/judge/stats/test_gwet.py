"""Gwet's AC1/AC2 against hand computations and against the irrCAC package.

irrCAC (0.4.4) pins scipy==1.12.0, which would downgrade this project's scipy, so it is not a
test dependency: the reference values below were computed once with it, outside the project's
environment, as ``irrCAC.table.CAC(pd.DataFrame(table), weights=W, digits=15).gwet()`` for W
in ("identity", "linear", "quadratic"), and are pasted here with its 15 digits.
"""

from __future__ import annotations

import numpy as np
import pytest

from judge.stats.coefficient import BootstrapOptions
from judge.stats.gwet import agreement_weights, gwet_ac, gwet_from_table
from judge.stats.pairs import judge_vs_human

# (confusion table, irrCAC's AC1, AC2 linear, AC2 quadratic). The first four are random
# tables (numpy default_rng(42): Dirichlet cell shares, multinomial counts); the fifth is the
# constant judge on a 90 %-pass rubric; the last a good judge on a skewed 1-5 scale.
IRRCAC = [
    (
        [[8, 12, 0, 7, 0], [0, 5, 2, 3, 10], [7, 22, 7, 0, 2], [1, 1, 0, 2, 1], [2, 9, 1, 8, 10]],
        (0.088299410761693, 0.182952969360736, 0.264727450501101),
    ),
    (
        [[1, 7, 8, 0, 5], [0, 2, 1, 2, 0], [11, 1, 9, 1, 0], [1, 0, 0, 5, 0], [3, 1, 0, 2, 0]],
        (0.117986410837144, 0.124018090930731, 0.151249451994739),
    ),
    (
        [[0, 7, 16], [0, 2, 20], [25, 4, 6]],
        (-0.314393291117576, -0.488269995884209, -0.649397335588919),
    ),
    ([[27, 3], [13, 7]], (0.448275862068966,) * 3),
    ([[0, 0], [10, 90]], (0.889502762430939,) * 3),
    (
        [[40, 3, 0, 0, 0], [5, 20, 4, 0, 0], [0, 2, 10, 1, 0], [0, 0, 1, 5, 1], [0, 0, 0, 0, 3]],
        (0.78459845617779, 0.909124159468812, 0.969388238639056),
    ),
]


def test_constant_judge_on_a_90_percent_pass_rubric_by_hand() -> None:
    # Hand: the judge says pass (1) on all 100 items, the humans pass 90 and fail 10.
    # pa = 0.90; pi_pass = (100 + 90) / 200 = 0.95, pi_fail = 0.05;
    # pe = (0.95 * 0.05 + 0.05 * 0.95) / (q - 1 = 1) = 0.095;
    # AC1 = (0.90 - 0.095) / (1 - 0.095) = 0.805 / 0.905 = 161 / 181.
    judge, human = [1] * 100, [1] * 90 + [0] * 10
    result = judge_vs_human(judge, human, labels=(0, 1), warn=False)
    assert result.coefficients["ac1"].value == pytest.approx(161 / 181, abs=1e-9)
    assert gwet_from_table([[0, 0], [10, 90]]) == pytest.approx(161 / 181, abs=1e-9)


def test_hand_computed_ac1_counts_unused_categories() -> None:
    # Hand, on a 1-3 scale where nobody says 3: table [[27, 3, 0], [13, 7, 0], [0, 0, 0]].
    # pa = 34/50 = 0.68; pi = (0.7, 0.3, 0); pe = (0.21 + 0.21 + 0) / (q - 1 = 2) = 0.21;
    # AC1 = 0.47 / 0.79. With only two categories (q = 2) it would be 0.26 / 0.58 instead.
    table = [[27, 3, 0], [13, 7, 0], [0, 0, 0]]
    assert gwet_from_table(table) == pytest.approx(0.47 / 0.79, abs=1e-12)
    assert gwet_from_table([[27, 3], [13, 7]]) == pytest.approx(0.26 / 0.58, abs=1e-12)


@pytest.mark.parametrize(("table", "expected"), IRRCAC)
def test_equals_irrcac(table: list[list[int]], expected: tuple[float, float, float]) -> None:
    for weights, value in zip((None, "linear", "quadratic"), expected, strict=True):
        assert gwet_from_table(table, weights=weights) == pytest.approx(value, abs=1e-12)


@pytest.mark.parametrize(("table", "expected"), IRRCAC)
def test_judge_vs_human_equals_irrcac(
    table: list[list[int]], expected: tuple[float, float, float]
) -> None:
    # The same tables expanded into items (rows the judge, columns the humans).
    counts = np.asarray(table)
    q = counts.shape[0]
    judge, human = np.nonzero(np.ones_like(counts))
    reps = counts.ravel()
    labels = tuple(range(1, q + 1))
    result = judge_vs_human(
        np.repeat(judge + 1, reps),
        np.repeat(human + 1, reps),
        labels=labels,
        options=BootstrapOptions(n_bootstrap=0),
        warn=False,
    )
    found = [result.coefficients[k].value for k in ("ac1", "ac2_linear", "ac2_quadratic")]
    assert found == pytest.approx(list(expected), abs=1e-12)


def test_weights_are_agreement_weights() -> None:
    # Hand: on 1-5, linear weight of 1 vs 3 is 1 - 2/4 = 0.5; quadratic 1 - 4/16 = 0.75.
    assert agreement_weights(5, "linear")[0, 2] == 0.5
    assert agreement_weights(5, "quadratic")[0, 2] == 0.75
    assert agreement_weights(5).trace() == 5 and agreement_weights(5).sum() == 5
    with pytest.raises(ValueError, match="weights must be"):
        agreement_weights(5, "cubic")


def test_perfect_agreement_is_one_and_empty_is_nan() -> None:
    # Hand: pa = 1 and pe < 1, so AC1 = 1 even when both raters use one category only
    # (where Cohen's kappa is 0/0).
    assert gwet_ac(np.array([2, 2, 2]), np.array([2, 2, 2]), 5) == 1.0
    assert np.isnan(gwet_from_table(np.zeros((3, 3))))
    with pytest.raises(ValueError, match="square"):
        gwet_from_table([[1, 2, 3]])
