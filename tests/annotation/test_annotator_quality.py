"""The statistics `campaign status` shows per annotator (annotation.labelstudio.quality) and
the gold file reader, checked against scipy, scikit-learn and hand-worked values."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from annotation.errors import CampaignError
from annotation.labelstudio.gold import read_gold
from annotation.labelstudio.quality import (
    agreement,
    gold_accuracy,
    offset,
    pair_offset,
    quadratic_kappa,
)
from annotation.labelstudio.status import AnnotatorProgress, _flag


def test_quadratic_kappa_equals_scikit_learn() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(1, 6, 40)
    y = np.clip(x + rng.integers(-1, 2, 40), 1, 5)
    # scikit-learn's weighted kappa over the labels 1-5 (an independent implementation).
    expected = cohen_kappa_score(x, y, labels=[1, 2, 3, 4, 5], weights="quadratic")
    assert quadratic_kappa(x.tolist(), y.tolist()) == pytest.approx(expected, abs=1e-12)
    # Undefined when both raters give one and the same score throughout.
    assert math.isnan(quadratic_kappa([3, 3, 3], [3, 3, 3]))


def test_pair_offset_is_a_t_interval_over_items() -> None:
    # Item i1 has two rubrics: its difference is their mean, (-1 + -2) / 2 = -1.5.
    mine = {("i1", "TCS"): 2.0, ("i1", "PCS"): 1.0, ("i2", "ICS"): 3.0, ("i3", "ICS"): 4.0}
    theirs = {("i1", "TCS"): 3.0, ("i1", "PCS"): 3.0, ("i2", "ICS"): 4.0, ("i3", "ICS"): 4.0}
    found = pair_offset(mine, theirs, "b")
    assert found is not None
    diffs = [-1.5, -1.0, 0.0]  # by hand
    ci = stats.ttest_1samp(diffs, 0).confidence_interval(0.95)  # scipy's one-sample t CI
    assert (found.mean, found.n_items) == (pytest.approx(-2.5 / 3), 3)
    assert (found.ci_low, found.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))


def _planted() -> dict[str, dict[tuple[str, str], float]]:
    """Two fair annotators and a harsh one on 12 items (ICS). The fair ones agree up to a
    one-level nudge on 3 items; the harsh one gives one level less than the first, two
    less on every third item where that stays on the scale (0.75-1.4 levels below, as in
    the issue)."""
    base = [2, 3, 4, 5, 3, 4, 5, 2, 4, 3, 5, 4]
    keys = [(f"i{n}", "ICS") for n in range(12)]
    fair2 = [b + (1 if n in (1, 5) else -1 if n == 8 else 0) for n, b in enumerate(base)]
    harsh = [b - (2 if n % 3 == 0 and b >= 3 else 1) for n, b in enumerate(base)]
    return {
        "fair1": dict(zip(keys, map(float, base), strict=True)),
        "fair2": dict(zip(keys, map(float, fair2), strict=True)),
        "harsh": dict(zip(keys, map(float, harsh), strict=True)),
    }


def test_a_harsh_annotator_is_flagged_and_the_fair_ones_are_not() -> None:
    scores = _planted()
    harsh = offset(scores, "harsh")
    assert harsh is not None and harsh.side(0.5) == -1
    for other in ("fair1", "fair2"):
        d = np.array(list(scores["harsh"].values())) - np.array(list(scores[other].values()))
        ci = stats.ttest_1samp(d, 0).confidence_interval(0.95)
        (pair,) = [p for p in harsh.pairs if p.other == other]
        assert (pair.mean, pair.ci_low, pair.ci_high) == pytest.approx((d.mean(), ci.low, ci.high))
        assert ci.high < -0.5  # independently: beyond the margin, so flagged
    # A fair one is confidently above the harsh one but not above the other fair one.
    fair = offset(scores, "fair1")
    assert fair is not None and fair.side(0.5) == 0
    people = [AnnotatorProgress(p, 12, 0, 20.0) for p in scores]
    _flag(people, scores)
    flags = {p.email: " | ".join(p.flags) for p in people}
    assert "harsher than each of the 2 other annotator(s)" in flags["harsh"]
    assert flags["fair1"] == flags["fair2"] == ""
    # Kappa with the others: the best of scikit-learn's pairwise quadratic kappas.
    values = {p: list(s.values()) for p, s in scores.items()}
    expected = max(
        [
            cohen_kappa_score(
                values["fair1"], values[q], labels=[1, 2, 3, 4, 5], weights="quadratic"
            )
            for q in ("fair2", "harsh")
        ]
    )
    found = agreement(scores, "fair1")
    assert found is not None and found.kappa == pytest.approx(expected)
    assert (found.other, found.n_annotators, found.n_ratings) == ("fair2", 2, 12)


def test_low_agreement_is_flagged_with_its_threshold() -> None:
    scores = _planted()
    # A fourth annotator who scores at random around the middle: kappa near 0.
    keys = list(scores["fair1"])
    scores["random"] = dict(
        zip(keys, [3.0, 5.0, 1.0, 2.0, 4.0, 1.0, 2.0, 5.0, 1.0, 4.0, 2.0, 3.0], strict=True)
    )
    people = [AnnotatorProgress(p, 12, 0, 20.0) for p in scores]
    _flag(people, scores, min_kappa=0.4)
    flags = {p.email: " | ".join(p.flags) for p in people}
    kappa = max(
        [
            cohen_kappa_score(
                list(scores["random"].values()), list(scores[q].values()),
                labels=[1, 2, 3, 4, 5], weights="quadratic",
            )
            for q in ("fair1", "fair2", "harsh")
        ]
    )  # fmt: skip
    assert kappa < 0.4  # independently computed: below the threshold
    assert f"quadratic-weighted kappa {kappa:.2f} < 0.4" in flags["random"]
    assert "low agreement with each of the 3 other" in flags["random"]
    assert "low agreement" not in flags["fair1"]


def test_two_annotators_who_differ_are_both_flagged() -> None:
    # With two people the data cannot say who is off: both are flagged, one each side.
    scores = _planted()
    del scores["fair2"]
    people = [AnnotatorProgress(p, 12, 0, 20.0) for p in scores]
    _flag(people, scores)
    flags = {p.email: " | ".join(p.flags) for p in people}
    assert "harsher than each of the 1" in flags["harsh"]
    assert "more lenient than each of the 1" in flags["fair1"]


def test_gold_accuracy_by_hand() -> None:
    gold = {"g1": {"ICS": 4}, "g2": {"TCS": 2, "PCS": 3}}
    mine = {("g1", "ICS"): 4.0, ("g2", "TCS"): 4.0, ("g2", "PCS"): 3.0, ("x", "ICS"): 1.0}
    found = gold_accuracy(mine, gold)
    # Errors 0, 2, 0 on the three gold ratings; item x is not gold.
    assert found is not None and (found.n, found.exact, found.mae) == (3, 2 / 3, 2 / 3)
    assert gold_accuracy({("x", "ICS"): 1.0}, gold) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("item,rubric,score\ns1-a,ICS,4\n", "missing item_id"),
        ("item_id,rubric,score\ns1-a,ICS,four\n", "line 2: score 'four' is not a whole number"),
        ("item_id,rubric,score\ns1-a,ICS,3.5\n", "line 2: score '3.5' is not a whole number"),
        ("item_id,rubric,score\ns1-a,,3\n", "line 2: rubric is empty"),
        ("item_id,rubric,score\ns1-a,ICS,3\ns1-b,ICS,3\ns1-a,ics,4\n", "line 4: item s1-a"),
        ("item_id,rubric,score\n", "has no rows"),
    ],
)
def test_a_bad_gold_file_gives_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "gold.csv"
    path.write_text(text)
    with pytest.raises(CampaignError, match=message) as caught:
        read_gold(path)
    assert "\n" not in str(caught.value)


def test_a_gold_file_is_read_with_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "gold.csv"
    path.write_text("Item_ID,Rubric,Score\ns1-a,ics,4\ns2-b,TCS,2\n")
    rows = read_gold(path)
    assert [(r.line, r.item_key, r.rubric, r.score) for r in rows] == [
        (2, "s1-a", "ICS", 4),
        (3, "s2-b", "TCS", 2),
    ]
    with pytest.raises(CampaignError, match="cannot read gold file"):
        read_gold(tmp_path / "missing.csv")
