"""Agreement among raters against a published example and a second path through the data
(pandas + krippendorff + scikit-learn directly)."""

from __future__ import annotations

import math
import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from judge.stats.coefficient import BootstrapOptions, UndefinedWarning
from judge.stats.matrix import RatingMatrix
from judge.stats.raters import human_vs_human, kappa_per_annotator, krippendorff_alphas

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4-observer x 12-unit
# example with missing values. Published: nominal 0.743, ordinal 0.815, interval 0.849,
# ratio 0.797.
K2011 = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}


def k2011_matrix() -> RatingMatrix:
    long = [
        (unit, rater, score)
        for rater, row in K2011.items()
        for unit, score in enumerate(row, start=1)
        if score is not None
    ]
    items, raters, scores = zip(*long, strict=True)
    return RatingMatrix.from_long(items, raters, scores)


def test_krippendorff_published_example() -> None:
    result = human_vs_human(k2011_matrix(), options=BootstrapOptions(n_bootstrap=200))
    alphas = result.alphas
    assert round(alphas["alpha_nominal"].value, 3) == 0.743
    assert round(alphas["alpha_ordinal"].value, 3) == 0.815
    assert round(alphas["alpha_interval"].value, 3) == 0.849
    assert round(alphas["alpha_ratio"].value, 3) == 0.797
    # Unit 12 has a single rating and cannot be paired: 11 units count.
    assert alphas["alpha_interval"].n == 11
    assert alphas["alpha_interval"].ci_low <= 0.849 <= alphas["alpha_interval"].ci_high
    assert result.n_raters == 4
    # Pairwise kappa of A and B on the units both rated (1-9), recomputed with scikit-learn.
    ab = next(p for p in result.pairwise if p.raters == ("A", "B"))
    expected = cohen_kappa_score(K2011["A"][:9], K2011["B"][:9], labels=[1, 2, 3, 4, 5])
    assert ab.n == 9 and ab.coefficients["kappa"].value == pytest.approx(expected)
    kappa = ab.to_dict()["kappa"]
    assert kappa["ci_low"] <= expected <= kappa["ci_high"]
    # Linear and quadratic weights, the same way (scikit-learn's weights= argument).
    for name, weights in (("kappa_linear", "linear"), ("kappa_quadratic", "quadratic")):
        weighted = cohen_kappa_score(
            K2011["A"][:9], K2011["B"][:9], labels=[1, 2, 3, 4, 5], weights=weights
        )
        assert ab.coefficients[name].value == pytest.approx(weighted), name
    # Fleiss' kappa over the 11 units rated at least twice, by hand from the table above
    # (ratings per unit, categories 1-5): P_i per unit, then shares n_ik / r_i per unit.
    units = [[1, 1, 1], [2, 3, 2, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4]]
    units += [[4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [5, 5, 5], [1, 1]]
    agree, shares = [], []
    for ratings in units:
        r = len(ratings)
        n_k = [ratings.count(k) for k in range(1, 6)]
        agree.append(sum(c * (c - 1) for c in n_k) / (r * (r - 1)))
        shares.append([c / r for c in n_k])
    p_e = sum(p**2 for p in np.mean(shares, axis=0))
    fleiss = (np.mean(agree) - p_e) / (1 - p_e)
    assert result.fleiss_kappa.value == pytest.approx(fleiss) and result.fleiss_kappa.n == 11
    assert {e.rater for e in result.per_annotator} == set("ABCD")
    # The JSON keeps its shape: alphas, Fleiss' kappa, n_raters, pairwise_kappa, per_annotator.
    assert list(result.to_dict()) == [
        "alpha_nominal",
        "alpha_ordinal",
        "alpha_interval",
        "alpha_ratio",
        "fleiss_kappa",
        "n_raters",
        "pairwise_kappa",
        "per_annotator",
    ]


def test_kappa_per_annotator_by_hand() -> None:
    # Rater A rated items 1-3 exactly like the judge (kappa 1); rater B rated items 2-4 one
    # below the judge: p_o = 0, p_e = 2 x (1/3 x 1/3) (categories 2 and 3 on both sides) = 2/9,
    # kappa = (0 - 2/9) / (1 - 2/9) = -2/7.
    matrix = RatingMatrix.from_long(
        [1, 2, 3, 2, 3, 4], ["A", "A", "A", "B", "B", "B"], [1, 2, 3, 1, 2, 3]
    )
    judge = np.array([1.0, 2.0, 3.0, 4.0])
    per = kappa_per_annotator(judge, matrix, options=BootstrapOptions(n_bootstrap=0))
    a, b = per
    assert (a.rater, a.n, b.rater, b.n) == ("A", 3, "B", 3)
    assert a.coefficients["kappa"].value == pytest.approx(1.0)
    assert b.coefficients["kappa"].value == pytest.approx(-2 / 7)
    assert b.coefficients["kappa"].value == pytest.approx(
        cohen_kappa_score([2, 3, 4], [1, 2, 3], labels=[1, 2, 3, 4, 5])
    )
    with pytest.raises(ValueError, match="judge must hold one score per item of matrix"):
        kappa_per_annotator(judge[:3], matrix)


def test_constant_ratings_make_alpha_undefined_with_the_reason() -> None:
    matrix = RatingMatrix.from_long([1, 1, 2, 2], ["A", "B", "A", "B"], [4, 4, 4, 4])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alphas = krippendorff_alphas(matrix, options=BootstrapOptions(n_bootstrap=20))
    # Expected disagreement is 0 when every rating is 4: alpha = 1 - 0/0.
    assert [str(w.message) for w in caught] == [
        f"alpha_{level} is undefined for these data (constant ratings: every rating is 4); "
        "reported as NaN"
        for level in ("nominal", "ordinal", "interval", "ratio")
    ]
    assert all(math.isnan(c.value) and c.n == 2 for c in alphas.values())
    single = RatingMatrix.from_long([1, 2], ["A", "B"], [3, 4])  # no item has two ratings
    reason = krippendorff_alphas(single, warn=False)["alpha_interval"].undefined_reason
    assert reason == "no item has ratings from two or more raters"


def test_human_vs_human_warns_once_per_undefined_coefficient() -> None:
    # Two raters, each gives every item 3. Undefined: the four alphas, Fleiss' kappa, the
    # pair's three kappas, and for each rater vs the rest Pearson, Spearman (constant) and
    # quadratic kappa (one shared category); the mean difference (0) is defined.
    matrix = RatingMatrix.from_long([1, 2, 3, 1, 2, 3], list("AAABBB"), [3] * 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = human_vs_human(matrix, options=BootstrapOptions(n_bootstrap=0))
    undefined = [name for name, c in result.named() if c.undefined_reason]
    assert len(caught) == len(undefined) == 4 + 1 + 3 + 2 * 3
    assert all(w.category is UndefinedWarning for w in caught)


def test_summeval_alpha_with_missing_ratings(
    summeval_coherence: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    _, experts = summeval_coherence
    matrix = RatingMatrix.from_long(experts.item, experts.rater, experts.score)
    # Items whose three ratings were all dropped disappear; every other item stays.
    assert matrix.values.shape == (3, experts.item.nunique())
    ours = human_vs_human(matrix, options=BootstrapOptions(n_bootstrap=50))
    # Independent path: pandas pivot -> krippendorff directly.
    pivot = experts.pivot(index="rater", columns="item", values="score")
    for level in ("nominal", "ordinal", "interval", "ratio"):
        direct = krippendorff.alpha(
            reliability_data=pivot.to_numpy(),
            level_of_measurement=level,
            value_domain=[1, 2, 3, 4, 5],
        )
        assert ours.alphas[f"alpha_{level}"].value == pytest.approx(direct, abs=1e-12)


def test_item_scores_mean_and_median_by_hand() -> None:
    # Item x: 1, 2, 4 -> mean 7/3, median 2; item y: 5 only -> 5 and 5.
    matrix = RatingMatrix.from_long(["x", "x", "x", "y"], ["A", "B", "C", "A"], [1, 2, 4, 5])
    assert matrix.item_scores("mean").tolist() == pytest.approx([7 / 3, 5])
    assert matrix.item_scores("median").tolist() == [2, 5]
    with pytest.raises(ValueError, match="how must be 'mean' or 'median'"):
        matrix.item_scores("mode")
