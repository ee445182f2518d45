"""Judge-vs-human coefficients against hand computations, textbook examples and second
libraries (scipy, statsmodels)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.inter_rater import cohens_kappa

from judge.stats.coefficient import BootstrapOptions, Coefficient, UndefinedWarning
from judge.stats.pairs import judge_vs_human, to_categories

NO_BOOTSTRAP = BootstrapOptions(n_bootstrap=0)


def test_hand_computed_correlations_and_rates() -> None:
    # x = 1..5, y = 2,1,4,3,5. Concordant pairs 8, discordant 2 -> tau = 6/10 = 0.6.
    # Rank differences -1,1,-1,1,0 -> rho = 1 - 6*4/(5*24) = 0.8; Pearson on ranks = 0.8.
    r = judge_vs_human([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], options=NO_BOOTSTRAP).coefficients
    assert r["kendall"].value == pytest.approx(0.6)
    assert r["spearman"].value == pytest.approx(0.8)
    assert r["pearson"].value == pytest.approx(0.8)
    assert r["exact_agreement"].value == pytest.approx(1 / 5)  # only item 5 matches
    assert r["within_one"].value == pytest.approx(1.0)
    assert r["mean_difference"].value == pytest.approx(0.0)  # sums are equal
    assert r["pearson"].p_value == pytest.approx(
        stats.pearsonr(range(1, 6), [2, 1, 4, 3, 5]).pvalue
    )
    assert r["kappa"].p_value is None and r["pearson"].n == 5
    assert all(c.undefined_reason is None for c in r.values())


def test_means_are_put_on_categories_by_rounding_half_up() -> None:
    assert to_categories([1.5, 2.5, 3.5, 4.5, 2.333, 2.667]).tolist() == [2, 3, 4, 5, 2, 3]
    # judge 3 vs human mean 2.5 counts as exact agreement (2.5 -> 3); mean diff stays 0.5.
    r = judge_vs_human([3, 3, 4], [2.5, 3.4, 4.0], options=NO_BOOTSTRAP).coefficients
    assert r["exact_agreement"].value == 1.0
    assert r["mean_difference"].value == pytest.approx((0.5 - 0.4 + 0) / 3)


def test_kappas_agree_with_statsmodels() -> None:
    rng = np.random.default_rng(3)
    judge = rng.integers(1, 6, 400)
    human = np.clip(judge + rng.integers(-1, 2, 400), 1, 5)
    result = judge_vs_human(judge, human, options=NO_BOOTSTRAP)
    r = result.coefficients
    table = (
        pd.crosstab(judge, human)
        .reindex(index=range(1, 6), columns=range(1, 6), fill_value=0)
        .to_numpy()
    )
    assert r["kappa"].value == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)
    assert r["kappa_linear"].value == pytest.approx(
        cohens_kappa(table, wt="linear").kappa, abs=1e-12
    )
    assert r["kappa_quadratic"].value == pytest.approx(
        cohens_kappa(table, wt="quadratic").kappa, abs=1e-12
    )
    assert np.array(result.confusion.counts).tolist() == table.tolist()
    assert result.to_dict()["confusion_matrix"] == {
        "labels": [1, 2, 3, 4, 5],
        "rows": "judge",
        "columns": "human",
        "counts": table.tolist(),
    }


def test_cohen_kappa_textbook_two_by_two() -> None:
    # 50 items: both yes 20, judge yes/human no 5, judge no/human yes 10, both no 15.
    # p_o = 35/50 = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = (0.7-0.5)/(1-0.5) = 0.4.
    judge = [2] * 20 + [2] * 5 + [1] * 10 + [1] * 15
    human = [2] * 20 + [1] * 5 + [2] * 10 + [1] * 15
    r = judge_vs_human(judge, human, options=NO_BOOTSTRAP)
    assert r.coefficients["kappa"].value == pytest.approx(0.4)


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(1)
    judge = rng.integers(1, 6, 120)
    human = np.clip(judge + rng.normal(0, 1, 120), 1, 5)
    a = judge_vs_human(judge, human, options=BootstrapOptions(300, seed=7)).coefficients
    b = judge_vs_human(judge, human, options=BootstrapOptions(300, seed=7)).coefficients
    c = judge_vs_human(judge, human, options=BootstrapOptions(300, seed=8)).coefficients
    assert a["spearman"] == b["spearman"] and a["spearman"] != c["spearman"]
    for name in ("pearson", "spearman", "kendall", "kappa_quadratic", "mean_difference"):
        assert a[name].ci_low < a[name].value < a[name].ci_high


def test_undefined_cases_are_nan_with_a_reason_and_one_warning_each() -> None:
    with pytest.warns(UndefinedWarning, match="constant ratings: the judge gave every item 3"):
        r = judge_vs_human([3, 3, 3, 3], [1, 2, 4, 5], options=BootstrapOptions(50))
    pearson = r.coefficients["pearson"]
    assert math.isnan(pearson.value) and math.isnan(pearson.ci_low)
    assert pearson.undefined_reason == "constant ratings: the judge gave every item 3"
    # Kappa is defined here: the humans use four categories, so disagreement is expected.
    assert r.coefficients["kappa"].undefined_reason is None
    with pytest.warns(UndefinedWarning, match=r"fewer than 3 items \(n=2\)"):
        r = judge_vs_human([1, 2], [2, 1], options=NO_BOOTSTRAP)
    assert math.isnan(r.coefficients["kendall"].value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = judge_vs_human([4, 4, 4], [4, 4, 4], options=NO_BOOTSTRAP)
    said = [str(w.message) for w in caught if w.category is UndefinedWarning]
    # Undefined: three correlations (constant) and three kappas (one shared category); the
    # three agreement rates are defined. One warning per undefined coefficient, no others.
    assert len(said) == len(caught) == 6
    assert all(
        any(s.startswith(f"{name} is undefined") for s in said)
        for name in ("pearson", "spearman", "kendall", "kappa", "kappa_linear", "kappa_quadratic")
    )
    assert math.isnan(r.coefficients["kappa"].value)
    assert r.coefficients["exact_agreement"].value == 1.0
    assert r.coefficients["kappa"].undefined_reason == (
        "constant ratings: the judge and the humans put every item in category 4"
    )
    assert Coefficient(math.nan, math.nan, math.nan, None, 2).to_dict()["value"] is None


def test_undefined_reason_reaches_the_json() -> None:
    result = judge_vs_human([3, 3, 3, 3], [1, 2, 4, 5], options=NO_BOOTSTRAP, warn=False)
    out = result.to_dict()
    assert out["spearman"] == {
        "value": None,
        "ci_low": None,
        "ci_high": None,
        "p_value": None,
        "n": 4,
        "undefined_reason": "constant ratings: the judge gave every item 3",
    }
    # A defined coefficient says so with None: mean difference = (3+3+3+3 - 12) / 4 = 0.
    assert out["mean_difference"]["undefined_reason"] is None
    assert out["mean_difference"]["value"] == 0.0


def test_warn_false_is_silent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = judge_vs_human([4, 4, 4], [4, 4, 4], options=NO_BOOTSTRAP, warn=False)
    assert r.coefficients["pearson"].undefined_reason is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"judge": [1, 2, 3], "human": [1, 2]}, "same length"),
        ({"judge": [1, 2, 7], "human": [1, 2, 3]}, "judge has values outside the 1..5 scale"),
        ({"judge": [1, 2, 3], "human": [1, None, 3]}, "human contains NaN"),
        ({"judge": [[1, 2]], "human": [1, 2]}, "judge must be one-dimensional"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        judge_vs_human(**kwargs)


def test_options_must_be_bootstrap_options() -> None:
    with pytest.raises(TypeError, match="options must be a BootstrapOptions"):
        judge_vs_human([1, 2, 3], [1, 2, 3], options={"n_bootstrap": 10})  # type: ignore[arg-type]
