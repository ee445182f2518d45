"""Agreement statistics on scales other than 1-5: 0/1, 0-3, 1-7, 1-10 and non-consecutive
levels. Every expected value is derived by hand (the derivation is in the comment), taken from
a published example, or computed by a second library (statsmodels, krippendorff); scikit-learn
is what the code calls for point estimates, so it is only an independent check of the
vectorised bootstrap statistics."""

from __future__ import annotations

from typing import Any

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from judge.stats.bootstrap import (
    PairTable,
    category_index,
    pair_statistics,
    resample_counts,
    weighted_kappa,
)
from judge.stats.coefficient import BootstrapOptions
from judge.stats.levels import self_consistency
from judge.stats.matrix import RatingMatrix
from judge.stats.pairs import judge_vs_human, to_categories
from judge.stats.raters import Level, krippendorff_alphas

NO_BOOTSTRAP = BootstrapOptions(n_bootstrap=0)


def crosstab(judge: np.ndarray, human: np.ndarray, labels: range | list[int]) -> np.ndarray:
    """The full labels x labels table (rows judge), zero rows and columns kept."""
    table = pd.crosstab(judge, human).reindex(index=labels, columns=labels, fill_value=0)
    return table.to_numpy()


def test_cohen_kappa_on_a_binary_scale_by_hand() -> None:
    # Wikipedia's "Cohen's kappa" worked example on 0/1: of 50 items both say 1 on 20, the
    # judge 1 and the human 0 on 5, the judge 0 and the human 1 on 10, both 0 on 15.
    # p_o = (20 + 15) / 50 = 0.7; the judge says 1 on 25/50, the human on 30/50, so
    # p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5 and kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
    judge = np.array([1] * 20 + [1] * 5 + [0] * 10 + [0] * 15)
    human = np.array([1] * 20 + [0] * 5 + [1] * 10 + [0] * 15)
    result = judge_vs_human(judge, human, labels=(0, 1), options=NO_BOOTSTRAP)
    r = result.coefficients
    assert r["kappa"].value == pytest.approx(0.4, abs=1e-12)
    table = np.array([[15, 10], [5, 20]])  # rows judge 0/1, columns human 0/1
    assert r["kappa"].value == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)
    # Two levels are one step apart, so linear and quadratic weights are the 0/1 weights.
    assert r["kappa_linear"].value == pytest.approx(0.4, abs=1e-12)
    assert r["kappa_quadratic"].value == pytest.approx(0.4, abs=1e-12)
    assert result.to_dict()["confusion_matrix"]["labels"] == [0, 1]
    assert result.confusion.counts == table.tolist()
    assert r["exact_agreement"].value == pytest.approx(0.7)
    assert r["within_one"].value == 1.0  # on two levels every pair is within one
    assert r["mean_difference"].value == pytest.approx((5 - 10) / 50)

    boot = judge_vs_human(judge, human, labels=(0, 1), options=BootstrapOptions(500, seed=1))
    kappa = boot.coefficients["kappa"]
    assert kappa.ci_low < 0.4 < kappa.ci_high


@pytest.mark.parametrize(("low", "high"), [(1, 7), (1, 10)])
def test_weighted_kappa_on_wider_scales(low: int, high: int) -> None:
    rng = np.random.default_rng(high)
    judge = rng.integers(low, high + 1, 400)
    human = np.clip(judge + rng.integers(-2, 3, 400), low, high)
    labels = range(low, high + 1)
    result = judge_vs_human(judge, human, labels=labels, options=NO_BOOTSTRAP)
    r = result.coefficients
    table = crosstab(judge, human, labels)
    # statsmodels, from the confusion table, is the independent value; sklearn is what the
    # code calls and must agree with it.
    for name, wt in (("kappa", None), ("kappa_linear", "linear"), ("kappa_quadratic", "quadratic")):
        expected = cohens_kappa(table, wt=wt).kappa
        assert r[name].value == pytest.approx(expected, abs=1e-12), name
        sklearn_weights = None if wt is None else wt
        assert r[name].value == pytest.approx(
            cohen_kappa_score(judge, human, labels=list(labels), weights=sklearn_weights),
            abs=1e-12,
        )
    assert result.confusion.counts == table.tolist()
    assert result.confusion.labels == list(labels)
    # Within one category: |judge - human| <= 1 on consecutive whole numbers.
    assert r["within_one"].value == pytest.approx(np.mean(np.abs(judge - human) <= 1))


def test_weights_follow_the_declared_scale_not_the_observed_values() -> None:
    # Both sides use only 2 and 3 on a 1-10 scale. Unweighted kappa does not care, but the
    # confusion matrix has a row and column for each of the ten levels.
    judge, human = [2, 2, 3, 3], [2, 3, 3, 3]
    result = judge_vs_human(judge, human, labels=range(1, 11), options=NO_BOOTSTRAP)
    assert np.array(result.confusion.counts).shape == (10, 10)
    # p_o = 3/4; judge 2: 1/2, human 2: 1/4 -> p_e = 1/2*1/4 + 1/2*3/4 = 1/2; kappa = 1/2.
    assert result.coefficients["kappa"].value == pytest.approx(0.5)


def test_categories_follow_the_labels() -> None:
    # Nearest level, halves up: on 0-3, 0.5 -> 1 and 1.49 -> 1, 2.5 -> 3.
    assert to_categories([0, 0.5, 1.49, 2.5, 3], labels=(0, 1, 2, 3)).tolist() == [
        0,
        1,
        1,
        3,
        3,
    ]
    # On 0/1 a mean of two raters who disagree (0.5) goes up to 1.
    assert to_categories([0.5, 0.25, 0.75], labels=(0, 1)).tolist() == [1, 0, 1]
    # Levels 0, 25, 50, 75, 100: 12.5 is halfway (-> 25), 12.4 -> 0, 60 -> 50, 62.5 -> 75.
    percent = (0, 25, 50, 75, 100)
    assert to_categories([12.5, 12.4, 60, 62.5], labels=percent).tolist() == [25, 0, 50, 75]
    with pytest.raises(ValueError, match="scores must lie within 0..3"):
        to_categories([3.2], labels=(0, 1, 2, 3))


def test_within_one_and_kappa_count_levels_not_values() -> None:
    # On levels 0, 25, 50, 75, 100 the pairs (0, 25), (0, 50), (50, 50), (100, 50) are 1, 2,
    # 0 and 2 levels apart: within one = 2/4, exact = 1/4.
    percent = (0, 25, 50, 75, 100)
    judge, human = [0, 0, 50, 100], [25, 50, 50, 50]
    r = judge_vs_human(judge, human, labels=percent, options=NO_BOOTSTRAP).coefficients
    assert r["within_one"].value == pytest.approx(0.5)
    assert r["exact_agreement"].value == pytest.approx(0.25)
    assert r["mean_difference"].value == pytest.approx((-25 - 50 + 0 + 50) / 4)
    # statsmodels weights by position in the table (0..4), which is the level count.
    table = crosstab(np.array(judge), np.array(human), list(percent))
    assert r["kappa_quadratic"].value == pytest.approx(
        cohens_kappa(table, wt="quadratic").kappa, abs=1e-12
    )


@pytest.mark.parametrize("labels", [(0, 1), (0, 1, 2, 3), tuple(range(1, 11)), (0, 50, 100)])
def test_vectorised_bootstrap_statistics_on_other_scales(labels: tuple[int, ...]) -> None:
    # The bootstrap's own formulas (kappa from margins, within one in levels) against
    # scikit-learn and a plain count on each resample expanded back into arrays.
    rng = np.random.default_rng(len(labels))
    levels = np.array(labels, dtype=float)
    x = rng.choice(levels, 200)
    y = levels[np.clip(np.searchsorted(levels, x) + rng.integers(-1, 2, 200), 0, levels.size - 1)]
    table = PairTable.from_pairs(x, y, x, y)
    w = resample_counts(table.counts, 4, np.random.default_rng(0))
    ix, iy = category_index(table.cx, levels), category_index(table.cy, levels)
    statistics = pair_statistics(table, levels)
    position = {v: i for i, v in enumerate(labels)}
    for b in range(w.shape[0]):
        reps = w[b].astype(int)
        xs, ys = np.repeat(table.cx, reps), np.repeat(table.cy, reps)
        for weights in (None, "linear", "quadratic"):
            ours = weighted_kappa(w[b : b + 1], ix, iy, len(labels), weights)[0]
            theirs = cohen_kappa_score(xs, ys, labels=levels, weights=weights)
            assert ours == pytest.approx(theirs, abs=1e-12)
        apart = np.array([abs(position[a] - position[c]) for a, c in zip(xs, ys, strict=True)])
        assert statistics["within_one"][0](w[b : b + 1])[0] == pytest.approx(np.mean(apart <= 1))
        assert statistics["exact_agreement"][0](w[b : b + 1])[0] == pytest.approx(np.mean(xs == ys))


def test_alpha_on_a_zero_to_three_scale_by_hand() -> None:
    # Two raters, four items: (0, 0), (1, 1), (2, 3), (3, 3). Coincidences: o00 = o11 = o33 = 2,
    # o23 = o32 = 1; value totals n0 = 2, n1 = 2, n2 = 1, n3 = 3, n = 8.
    # nominal: 1 - (n - 1) * sum(o_ck, c != k) / sum(n_c n_k, c != k)
    #          = 1 - 7 * 2 / (64 - (4 + 4 + 1 + 9)) = 1 - 14/46 = 16/23.
    # interval (delta = (c - k)^2): sum o delta = 2 * 1 = 2; sum n_c n_k delta over ordered
    #          pairs = 2 * (4 + 8 + 54 + 2 + 24 + 3) = 190 -> 1 - 7 * 2 / 190 = 88/95.
    # ordinal (delta = (n_c + ... + n_k - (n_c + n_k)/2)^2): delta23 = 2^2 = 4, so sum o delta
    #          = 8; sum n_c n_k delta = 2 * (16 + 24.5 + 181.5 + 4.5 + 73.5 + 12) = 624
    #          -> 1 - 7 * 8 / 624 = 71/78.
    values = np.array([[0, 1, 2, 3], [0, 1, 3, 3]], dtype=float)
    matrix = RatingMatrix(["a", "b", "c", "d"], ["r1", "r2"], values)
    alphas = krippendorff_alphas(matrix, labels=(0, 1, 2, 3), options=NO_BOOTSTRAP)
    expected: dict[Level, float] = {"nominal": 16 / 23, "ordinal": 71 / 78, "interval": 88 / 95}
    for level, value in expected.items():
        assert alphas[f"alpha_{level}"].value == pytest.approx(value, abs=1e-12)
        second = krippendorff.alpha(
            reliability_data=values, level_of_measurement=level, value_domain=[0, 1, 2, 3]
        )
        assert value == pytest.approx(second, abs=1e-12)


def test_alpha_on_a_binary_scale_published() -> None:
    # Krippendorff (2004), Content Analysis, 2nd ed., section 11.3.1: two observers, ten
    # units, 0/1. Coincidences o00 = 10, o01 = o10 = 4, o11 = 2; n0 = 14, n1 = 6, n = 20:
    # alpha = 1 - (n - 1) * o01 / (n0 * n1) = 1 - 19 * 4 / 84 = 2/21 = 0.095 (published).
    values = np.array([[1, 1, 0, 0, 0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]], dtype=float)
    matrix = RatingMatrix([str(i) for i in range(10)], ["Jon", "Han"], values)
    alphas = krippendorff_alphas(matrix, labels=(0, 1), options=NO_BOOTSTRAP)
    assert alphas["alpha_nominal"].value == pytest.approx(2 / 21, abs=1e-12)
    assert round(alphas["alpha_nominal"].value, 3) == 0.095
    # With two values every level of measurement gives the same alpha.
    assert alphas["alpha_interval"].value == pytest.approx(2 / 21, abs=1e-12)


def test_self_consistency_on_a_binary_scale() -> None:
    # Three items, two samples each: (0, 0), (1, 1), (0, 1). One item of three disagrees;
    # coincidences o00 = 2, o11 = 2, o01 = o10 = 1, n0 = n1 = 3, n = 6:
    # alpha = 1 - 5 * 1 / 9 = 4/9.
    found = self_consistency(
        [[0, 0], [1, 1], [0, 1]], labels=(0, 1), options=NO_BOOTSTRAP, warn=False
    )
    assert found.share_disagreeing == pytest.approx(1 / 3)
    assert found.alpha_interval.value == pytest.approx(4 / 9, abs=1e-12)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ((3, 2, 1), "labels must be at least two increasing whole numbers"),
        ((1,), "labels must be at least two increasing whole numbers"),
        ((1, 2.5), "labels must be whole numbers"),
        ((False, True), "labels must be whole numbers"),
    ],
)
def test_labels_are_checked(labels: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        judge_vs_human([1, 2, 3], [1, 2, 3], labels=labels, options=NO_BOOTSTRAP)


def test_values_outside_the_declared_scale_are_refused() -> None:
    with pytest.raises(
        ValueError, match=r"judge has values outside the 0..3 scale \(min 0, max 4\)"
    ):
        judge_vs_human([0, 4, 2], [0, 1, 2], labels=(0, 1, 2, 3), options=NO_BOOTSTRAP)
    # 0 is on a 0-3 scale but not on the default 1-5 one.
    with pytest.raises(ValueError, match="human has values outside the 1..5 scale"):
        judge_vs_human([1, 2, 3], [0, 1, 2], options=NO_BOOTSTRAP)
