"""Stage metrics against values computed by hand (shown in each comment)."""

from __future__ import annotations

import pytest
from statsmodels.stats.proportion import proportion_confint

from judge.metrics import STAGE_METRICS, ItemScore, aggregate, definition, stage_metrics


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


def test_every_value_carries_its_interval() -> None:
    scores = [score("S1", "ICS", v) for v in (3, 2, 4.5, None)]
    scores += [score("S2", "TCS", v) for v in (5, 4, 3)]
    scores += [score("S4", "ICS", None)]
    rows = {r.metric: r for r in stage_metrics(scores, "m")}
    s1 = rows["S1 ICS share>=3 (%)"]
    # 2 of 3 scored items: Wilson interval from statsmodels (an independent implementation).
    low, high = proportion_confint(2, 3, alpha=0.05, method="wilson")
    assert (s1.ci_low, s1.ci_high, s1.ci_method) == (
        pytest.approx(low * 100),
        pytest.approx(high * 100),
        "wilson",
    )
    tcs = rows["S2 TCS mean (% of max)"]
    # Three scores are below the 5 a mean's t interval needs (judge.stats.intervals): the
    # value stands, the interval is "too few", never a number.
    assert tcs.ci_method == "t"
    assert (tcs.ci_low, tcs.value, tcs.ci_high) == (None, pytest.approx(80.0), None)
    assert tcs.ci_note == "too few items for an interval (3; 5 needed)"
    # Five scores 1..5 have one: mean 3, sd sqrt(2.5), t(0.975, 4) = 2.776445 (a t table):
    # 3 +- 1.963243 -> [1.036757, 4.963243] -> x 20 = [20.735, 99.265] % of max.
    five = {r.metric: r for r in stage_metrics([score("S2", "TCS", v) for v in range(1, 6)], "m")}
    t = five["S2 TCS mean (% of max)"]
    assert (t.ci_low, t.ci_high, t.ci_note) == (
        pytest.approx(20.73514, abs=1e-4),
        pytest.approx(99.26486, abs=1e-4),
        "",
    )
    # No scored item: no value and no interval.
    s4 = rows["S4 ICS share>=3 (%)"]
    assert (s4.value, s4.ci_low, s4.ci_high) == (None, None, None)


def test_definitions_say_which_interval() -> None:
    for metric in STAGE_METRICS:
        text = definition(metric)
        if metric.kind == "share":
            assert f">= {metric.threshold}" in text and "Wilson score interval" in text
        else:
            assert "/ 5 x 100" in text and "Student t interval (none below 5 items" in text


def test_metrics_are_split_by_factor() -> None:
    scores = [score("S1", "ICS", 5, "gender"), score("S1", "ICS", 1, "subject")]
    by_factor = {(r.factor, r.metric): r.value for r in stage_metrics(scores, "m")}
    assert by_factor[("gender", "S1 ICS share>=3 (%)")] == 100.0
    assert by_factor[("subject", "S1 ICS share>=3 (%)")] == 0.0
    overall = stage_metrics(scores, "m", by_factor=False)
    assert [(r.factor, r.value, r.n_scored) for r in overall] == [("all", 50.0, 2)]
    # 1 of 2 pooled over factors: Wilson by hand, centre (1 + z^2/2) / (2 + z^2) = 0.5,
    # half = z / (2 + z^2) * sqrt(2 * 0.25 + z^2 / 4) = 0.335527 * 1.208456 = 0.405470
    assert overall[0].ci_low == pytest.approx(9.4530, abs=1e-3)
    assert overall[0].ci_high == pytest.approx(90.5470, abs=1e-3)


def _fisher_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Fisher's two-sided p of [[a, b], [c, d]] written out with math.comb (the tables with
    these margins no more likely than the one seen)."""
    from math import comb

    row, col, n = a + b, a + c, a + b + c + d
    probs = {x: comb(col, x) * comb(n - col, row - x) / comb(n, row) for x in range(row + 1)}
    return sum(p for p in probs.values() if p <= probs[a] * (1 + 1e-9))


def test_by_factor_cells_are_tested_against_the_rest_and_holm_corrected() -> None:
    # S1 ICS >= 3: factor "a" 10 of 10 items, "b" and "c" 2 of 10 each (the rest 8 score 1).
    scores = [score("S1", "ICS", 5, "a") for _ in range(10)]
    for f in ("b", "c"):
        scores += [score("S1", "ICS", 4, f) for _ in range(2)]
        scores += [score("S1", "ICS", 1, f) for _ in range(8)]
    rows = {r.factor: r for r in stage_metrics(scores, "m")}
    raw = {
        "a": _fisher_two_sided(10, 0, 4, 16),  # a against b + c: 4 of 20
        "b": _fisher_two_sided(2, 8, 12, 8),  # b against a + c: 12 of 20
        "c": _fisher_two_sided(2, 8, 12, 8),
    }
    for f, p in raw.items():
        assert rows[f].test == "fisher" and rows[f].p_value == pytest.approx(p, rel=1e-9)
    # Holm by hand over the three: the smallest (a) times 3; b and c tie, times 2 then 1,
    # made non-decreasing, so both get 2 * p_b.
    assert rows["a"].p_adjusted == pytest.approx(3 * raw["a"], rel=1e-9)
    assert rows["b"].p_adjusted == pytest.approx(min(1, 2 * raw["b"]), rel=1e-9)
    assert rows["a"].flagged and not rows["b"].flagged and not rows["c"].flagged
    # Simultaneous intervals: Bonferroni over the 3 cells with a value, so each is a Wilson
    # interval at 1 - 0.05 / 3 (statsmodels' Wilson as the second computation).
    low, high = proportion_confint(2, 10, alpha=0.05 / 3, method="wilson")
    assert (rows["b"].sim_low, rows["b"].sim_high) == pytest.approx((low * 100, high * 100))
    assert rows["b"].sim_confidence == pytest.approx(1 - 0.05 / 3)
    # No factor differs: nothing flagged, and the overall row has no test.
    even = [score("S1", "ICS", 4 if i % 2 else 1, f) for f in "abc" for i in range(10)]
    assert not any(r.flagged for r in stage_metrics(even, "m"))
    overall = stage_metrics(scores, "m", by_factor=False)[0]
    assert overall.p_value is None and overall.test == "" and not overall.flagged
