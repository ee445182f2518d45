"""Agreement coefficients against published examples, hand computations and second libraries."""

from __future__ import annotations

import json
import math
import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from judge.agreement import (
    Coefficient,
    RatingMatrix,
    UndefinedAgreementWarning,
    grouped_correlations,
    human_vs_human,
    items_needed,
    judge_vs_human,
    self_consistency,
    system_level,
    to_categories,
)
from tests.conftest import SHARED_DATA

SUMMEVAL = SHARED_DATA / "summeval" / "model_annotations_12sys"

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4-observer x 12-unit
# example with missing values. Published: nominal 0.743, ordinal 0.815, interval 0.849.
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
    result = human_vs_human(k2011_matrix(), n_bootstrap=200)
    assert round(result["alpha_nominal"].value, 3) == 0.743
    assert round(result["alpha_ordinal"].value, 3) == 0.815
    assert round(result["alpha_interval"].value, 3) == 0.849
    # Unit 12 has a single rating and cannot be paired: 11 units count.
    assert result["alpha_interval"].n == 11
    assert result["alpha_interval"].ci_low <= 0.849 <= result["alpha_interval"].ci_high
    assert result["n_raters"] == 4
    # Pairwise kappa of A and B on the units both rated (1-9), recomputed with scikit-learn.
    ab = next(p for p in result["pairwise_kappa"] if p["raters"] == ["A", "B"])
    expected = cohen_kappa_score(K2011["A"][:9], K2011["B"][:9], labels=[1, 2, 3, 4, 5])
    assert ab["n"] == 9 and ab["kappa"]["value"] == pytest.approx(expected)
    assert ab["kappa"]["ci_low"] <= expected <= ab["kappa"]["ci_high"]
    assert {e["rater"] for e in result["per_annotator"]} == set("ABCD")


def test_hand_computed_correlations_and_rates() -> None:
    # x = 1..5, y = 2,1,4,3,5. Concordant pairs 8, discordant 2 -> tau = 6/10 = 0.6.
    # Rank differences -1,1,-1,1,0 -> rho = 1 - 6*4/(5*24) = 0.8; Pearson on ranks = 0.8.
    r = judge_vs_human([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], n_bootstrap=0)
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


def test_means_are_put_on_categories_by_rounding_half_up() -> None:
    assert to_categories([1.5, 2.5, 3.5, 4.5, 2.333, 2.667]).tolist() == [2, 3, 4, 5, 2, 3]
    # judge 3 vs human mean 2.5 counts as exact agreement (2.5 -> 3); mean diff stays 0.5.
    r = judge_vs_human([3, 3, 4], [2.5, 3.4, 4.0], n_bootstrap=0)
    assert r["exact_agreement"].value == 1.0
    assert r["mean_difference"].value == pytest.approx((0.5 - 0.4 + 0) / 3)


def test_kappas_agree_with_statsmodels() -> None:
    rng = np.random.default_rng(3)
    judge = rng.integers(1, 6, 400)
    human = np.clip(judge + rng.integers(-1, 2, 400), 1, 5)
    r = judge_vs_human(judge, human, n_bootstrap=0)
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
    assert np.array(r["confusion_matrix"]["counts"]).tolist() == table.tolist()


def test_cohen_kappa_textbook_two_by_two() -> None:
    # 50 items: both yes 20, judge yes/human no 5, judge no/human yes 10, both no 15.
    # p_o = 35/50 = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = (0.7-0.5)/(1-0.5) = 0.4.
    judge = [2] * 20 + [2] * 5 + [1] * 10 + [1] * 15
    human = [2] * 20 + [1] * 5 + [2] * 10 + [1] * 15
    assert judge_vs_human(judge, human, n_bootstrap=0)["kappa"].value == pytest.approx(0.4)


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(1)
    judge = rng.integers(1, 6, 120)
    human = np.clip(judge + rng.normal(0, 1, 120), 1, 5)
    a = judge_vs_human(judge, human, n_bootstrap=300, seed=7)
    b = judge_vs_human(judge, human, n_bootstrap=300, seed=7)
    c = judge_vs_human(judge, human, n_bootstrap=300, seed=8)
    assert a["spearman"] == b["spearman"] and a["spearman"] != c["spearman"]
    for name in ("pearson", "spearman", "kendall", "kappa_quadratic", "mean_difference"):
        assert a[name].ci_low < a[name].value < a[name].ci_high


def test_undefined_cases_are_nan_with_a_warning() -> None:
    with pytest.warns(UndefinedAgreementWarning, match="constant ratings"):
        r = judge_vs_human([3, 3, 3, 3], [1, 2, 4, 5], n_bootstrap=50)
    assert math.isnan(r["pearson"].value) and math.isnan(r["pearson"].ci_low)
    with pytest.warns(UndefinedAgreementWarning, match="n=2"):
        r = judge_vs_human([1, 2], [2, 1], n_bootstrap=0)
    assert math.isnan(r["kendall"].value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = judge_vs_human([4, 4, 4], [4, 4, 4], n_bootstrap=0)
    said = " ".join(str(w.message) for w in caught if w.category is UndefinedAgreementWarning)
    assert all(name in said for name in ("pearson", "spearman", "kendall", "kappa "))
    assert math.isnan(r["kappa"].value) and r["exact_agreement"].value == 1.0
    assert Coefficient(math.nan, math.nan, math.nan, None, 2).to_dict()["value"] is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"judge": [1, 2, 3], "human": [1, 2]}, "same length"),
        ({"judge": [1, 2, 7], "human": [1, 2, 3]}, "judge has values outside the 1..5 scale"),
        ({"judge": [1, 2, 3], "human": [1, None, 3]}, "human contains NaN"),
        ({"judge": [[1, 2]], "human": [1, 2]}, "judge must be one-dimensional"),
        ({"judge": [1, 2, 3], "human": [1, 2, 3], "n_bootstrap": -1}, "n_bootstrap must be >= 0"),
        ({"judge": [1, 2, 3], "human": [1, 2, 3], "confidence": 95}, "confidence must be between"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        judge_vs_human(**kwargs)


def test_grouped_and_system_levels_by_hand() -> None:
    # group a: perfect agreement (rho 1); group b: reversed (rho -1); group c: judge constant
    # (skipped). Average over used groups: 0.
    judge = [1, 2, 3, 1, 2, 3, 4, 4, 4]
    human = [1, 2, 3, 3, 2, 1, 1, 2, 5]
    groups = list("aaabbbccc")
    g = grouped_correlations(judge, human, groups, n_bootstrap=100)
    assert g["spearman"].value == pytest.approx(0.0)
    assert (g["n_groups"], g["n_groups_skipped"]) == (2, 1)
    # System means: a (2, 2), b (2, 2), c (4, 2.667): too few points to be useful -> 3 points.
    s = system_level(judge, human, groups, n_bootstrap=200)
    assert s["n_systems"] == 3 and s["systems"]["c"]["human"] == pytest.approx(8 / 3)
    # Means: judge (2, 2, 4), human (2, 2, 2.667): both are affine images of (0, 0, 1) -> r = 1.
    assert s["pearson"].value == pytest.approx(1.0)
    assert s["pearson"].ci_low <= 1.0 + 1e-9 and s["pearson"].n == 3


def test_self_consistency_by_hand() -> None:
    samples = [[3, 3, 3], [2, 4, 2], [5, 5, np.nan], [1, np.nan, np.nan]]
    result = self_consistency(samples, n_bootstrap=100)
    # The last item has one scored sample and is left out; 1 of 3 items disagrees.
    assert result["n_items"] == 3 and result["share_disagreeing"] == pytest.approx(1 / 3)
    usable = np.array(samples[:3], dtype=float).T  # samples as raters, items as units
    assert result["alpha_ordinal"]["value"] == pytest.approx(
        krippendorff.alpha(
            reliability_data=usable, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]
        )
    )


def test_items_needed_scales_with_the_square_of_the_width() -> None:
    pilot = Coefficient(0.7, 0.6, 0.8, None, 40)  # half-width 0.1
    assert items_needed(pilot, 0.05) == 160  # (0.1 / 0.05)^2 x 40
    assert items_needed(pilot, 0.2) == 40  # never fewer than the pilot already has


def summeval_long(aspect: str) -> pd.DataFrame:
    rows = []
    for path in sorted(SUMMEVAL.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            item = f"{record['model_id']}|{record['id']}"
            for i, ann in enumerate(record["expert_annotations"]):
                rows.append((item, record["id"], record["model_id"], f"expert{i}", ann[aspect]))
            turk = np.mean([t[aspect] for t in record["turker_annotations"]])
            rows.append((item, record["id"], record["model_id"], "turkers", turk))
    return pd.DataFrame(rows, columns=["item", "doc", "system", "rater", "score"])


@pytest.mark.skipif(not SUMMEVAL.exists(), reason="../shared/data/summeval is not present")
def test_summeval_missing_ratings_and_grouped_correlation() -> None:
    df = summeval_long("coherence")
    experts = df[df.rater != "turkers"].copy()
    # Knock out 20 % of the expert ratings at random: missing ratings are normal.
    rng = np.random.default_rng(0)
    experts = experts[rng.random(len(experts)) > 0.2]
    matrix = RatingMatrix.from_long(experts.item, experts.rater, experts.score)
    # Items whose three ratings were all dropped disappear; every other item stays.
    assert matrix.values.shape == (3, experts.item.nunique())
    ours = human_vs_human(matrix, n_bootstrap=50)
    # Independent path: pandas pivot -> krippendorff directly.
    pivot = experts.pivot(index="rater", columns="item", values="score")
    for level in ("nominal", "ordinal", "interval"):
        direct = krippendorff.alpha(
            reliability_data=pivot.to_numpy(),
            level_of_measurement=level,
            value_domain=[1, 2, 3, 4, 5],
        )
        assert ours[f"alpha_{level}"].value == pytest.approx(direct, abs=1e-12)

    # Grouped (summary-level) Spearman: crowd mean as the "judge", expert mean as the human,
    # per source document, averaged; recomputed with pandas groupby.
    human = experts.groupby("item").score.mean()
    crowd = df[df.rater == "turkers"].set_index("item").score.loc[human.index]
    doc = df.drop_duplicates("item").set_index("item").doc.loc[human.index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = grouped_correlations(
            crowd.to_numpy(), human.to_numpy(), doc.to_numpy(), n_bootstrap=200
        )
    frame = pd.DataFrame({"j": crowd.to_numpy(), "h": human.to_numpy(), "d": doc.to_numpy()})
    per_doc = [
        grp.j.corr(grp.h, method="spearman")
        for _, grp in frame.groupby("d")
        if grp.j.nunique() > 1 and grp.h.nunique() > 1
    ]
    assert g["n_groups"] == len(per_doc)
    assert g["spearman"].value == pytest.approx(np.mean(per_doc), abs=1e-12)
    assert g["n_groups"] + g["n_groups_skipped"] == 100
