"""Stage metrics against values computed by hand (shown in each comment)."""

from __future__ import annotations

import math

import pytest

from judge.metrics import ItemScore, aggregate, stage_metrics


def score(stage: str, rubric: str, value: float | None, factor: str = "gender") -> ItemScore:
    return ItemScore(
        item_id=0,
        item_key="k",
        stage=stage,
        factor=factor,
        scenario="s",
        rubric=rubric,
        score=value,
        n_samples=1,
        n_scored=int(value is not None),
        judgment_ids=(),
        unscored_reasons=(),
    )


def test_aggregate_mean_and_majority() -> None:
    assert aggregate([2, 3, 5], "mean") == pytest.approx(10 / 3)  # (2+3+5)/3
    assert aggregate([4, 4, 1], "majority") == 4  # 4 appears twice
    assert aggregate([5, 1, 5, 1, 3], "majority") == 1  # tie 5 vs 1: the lower wins
    assert aggregate([], "mean") is None


def test_aggregate_rejects_unknown_method() -> None:
    with pytest.raises(ValueError, match="how must be"):
        aggregate([1], "median")


def test_stage_metrics_by_hand() -> None:
    scores = [
        # S1 ICS: 3, 2, 4.5, unscored -> 2 of 3 scored items are >= 3 -> 66.67 %
        score("S1", "ICS", 3),
        score("S1", "ICS", 2),
        score("S1", "ICS", 4.5),
        score("S1", "ICS", None),
        # S2 TCS: 5, 4, 3 -> mean 4 -> 80 % of max; share >= 4 is 2/3 -> 66.67 %
        score("S2", "TCS", 5),
        score("S2", "TCS", 4),
        score("S2", "TCS", 3),
        # S3 SBAS: 4, 3.9 -> share >= 4 is 1/2 -> 50 %
        score("S3", "SBAS", 4),
        score("S3", "SBAS", 3.9),
        # S4 ICS: only unscored -> no value, not zero
        score("S4", "ICS", None),
    ]
    rows = {r.metric: r for r in stage_metrics(scores, "m")}
    assert rows["S1 ICS share>=3 (%)"].value == pytest.approx(200 / 3)
    assert rows["S1 ICS share>=3 (%)"].n_scored == 3
    assert rows["S1 ICS share>=3 (%)"].n_unscored == 1
    assert rows["S2 TCS mean (% of max)"].value == pytest.approx(80.0)
    assert rows["S2 TCS share>=4 (%)"].value == pytest.approx(200 / 3)
    assert rows["S3 SBAS share>=4 (%)"].value == pytest.approx(50.0)
    assert rows["S4 ICS share>=3 (%)"].value is None
    assert rows["S4 ICS share>=3 (%)"].n_unscored == 1
    assert "S2 PCS mean (% of max)" not in rows  # no PCS items: no row


def test_metrics_are_split_by_factor() -> None:
    scores = [score("S1", "ICS", 5, "gender"), score("S1", "ICS", 1, "subject")]
    by_factor = {(r.factor, r.metric): r.value for r in stage_metrics(scores, "m")}
    assert by_factor[("gender", "S1 ICS share>=3 (%)")] == 100.0
    assert by_factor[("subject", "S1 ICS share>=3 (%)")] == 0.0
    overall = stage_metrics(scores, "m", by_factor=False)
    assert [(r.factor, r.value) for r in overall] == [("all", 50.0)]
    assert not any(math.isnan(r.value or 0) for r in overall)
