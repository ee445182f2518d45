"""A judge run's stage-metric section: every value carries its 95 % interval in report.json,
metrics.csv and the HTML table, and the cells say what they are."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import DescrStatsW

from judge.metrics import STAGE_METRICS, MetricRow
from judge.reports.render import write_report
from judge.reports.run_report import (
    counts_phrase,
    human,
    metric_cell,
    metrics_table,
    table_order,
    tokens_phrase,
)
from judge.store.engine import session_scope
from server import usecases
from tests.judge.reports.conftest import JudgedRun


def row(value: float | None, n: int, u: int, low: float | None, high: float | None) -> MetricRow:
    return MetricRow("m", "gender", "S1", "ICS", "S1 ICS share>=3 (%)", value, n, u, low, high)


def test_metric_cell_formats() -> None:
    assert metric_cell(row(62.5, 8, 0, 30.57, 86.32)) == "62 [31-86] n=8"
    assert metric_cell(row(62.5, 8, 2, 30.57, 86.32)) == "62 [31-86] n=8 u=2"
    assert metric_cell(row(62.5, 8, 0, 30.57, 86.32), always_unscored=True) == "62 [31-86] n=8 u=0"
    assert metric_cell(row(None, 0, 3, None, None)) == "n/a n=0 u=3"


def test_table_order_groups_the_metrics_for_panels_of_three() -> None:
    assert [m.label for m in table_order()] == [
        "S1 ICS>=3",
        "S3 SBAS>=4",
        "S4 ICS>=3",
        "S2 TCS mean",
        "S2 PCS mean",
        "S2 ETCS mean",
        "S2 TCS>=4",
        "S2 PCS>=4",
        "S2 ETCS>=4",
    ]
    assert sorted(table_order()) == sorted(STAGE_METRICS)


def test_metrics_table_puts_all_last_and_leaves_missing_cells_empty() -> None:
    rows = [
        row(50.0, 2, 0, 9.45, 90.55),
        MetricRow("m", "all", "S1", "ICS", "S1 ICS share>=3 (%)", 50.0, 2, 0, 9.45, 90.55),
        MetricRow("m", "subject", "S3", "SBAS", "S3 SBAS share>=4 (%)", 0.0, 1, 1, 0.0, 79.35),
    ]
    head, body = metrics_table(rows)
    assert head == ["factor", "S1 ICS>=3", "S3 SBAS>=4"]
    assert body == [
        ["gender", "50 [9-91] n=2", ""],
        ["subject", "", "0 [0-79] n=1 u=1"],
        ["all", "50 [9-91] n=2", ""],
    ]


def test_phrases_for_people() -> None:
    assert counts_phrase({}) == "none"
    assert (
        counts_phrase({"unparsable": 2, "call_failed": 1200}) == "call_failed 1,200, unparsable 2"
    )
    assert human(["v1"]) == "v1" and human(None) == "none" and human(0.0) == "0"
    tokens = {
        "generation_prompt": 1080,
        "generation_completion": 540,
        "generation_answers": 108,
        "judge_prompt": 1080,
        "judge_completion": 540,
        "judge_calls": 108,
        "judgments": 108,
    }
    assert tokens_phrase(tokens) == (
        "generation 1,080 prompt + 540 completion (108 answers); "
        "judge 1,080 prompt + 540 completion (108 calls, 108 judgments)"
    )


def test_intervals_reach_json_csv_and_html(judged_sample: JudgedRun, tmp_path: Path) -> None:
    with session_scope(judged_sample.engine) as session:
        report = usecases.full_report(session, judged_sample.judge_run_id)
    paths = write_report(report, tmp_path)
    data = json.loads(paths["json"].read_text())
    rows = data["metrics_overall"] + data["metrics_by_factor"]
    assert len(rows) == 9 * 10  # 9 metrics x (9 factors + all)
    for r in rows:
        if r["ci_low"] is None:
            # Only a mean can lack an interval, and then it says why (judge.stats.intervals).
            assert r["ci_method"] == "t" and r["ci_note"].startswith(("too few", "no spread"))
            continue
        assert r["ci_low"] <= r["value"] <= r["ci_high"]
        if r["ci_method"] == "wilson":
            # Shares: the interval statsmodels computes for the same counts.
            hits = round(r["value"] / 100 * r["n_scored"])
            low, high = proportion_confint(hits, r["n_scored"], alpha=0.05, method="wilson")
            assert (r["ci_low"], r["ci_high"]) == (
                pytest.approx(low * 100),
                pytest.approx(high * 100),
            )
        else:
            # Means: the t interval statsmodels computes for the cell's item scores.
            assert r["ci_method"] == "t" and "mean" in r["metric"]
            if r["factor"] == "all":
                stage, rubric = r["metric"].split()[:2]
                cell = [
                    s["score"] * 20.0
                    for s in data["item_scores"]
                    if (s["stage"], s["rubric"]) == (stage, rubric) and s["score"] is not None
                ]
                low, high = DescrStatsW(cell).tconfint_mean(0.05)
                assert (r["ci_low"], r["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    for name, text in data["metric_definitions"].items():
        assert ("Wilson" in text) == ("share" in name) and ("Student t" in text) == ("mean" in name)
    with paths["metrics_csv"].open() as handle:
        from_csv = list(csv.DictReader(handle))
    assert {"ci_low", "ci_high", "ci_method"} <= set(from_csv[0])
    assert [float(r["ci_low"]) if r["ci_low"] else None for r in from_csv] == [
        pytest.approx(r["ci_low"]) if r["ci_low"] is not None else None for r in rows
    ]
    html = paths["html"].read_text()
    overall = {r["metric"]: r for r in data["metrics_overall"]}
    s1 = overall["S1 ICS share>=3 (%)"]
    cell = f"{s1['value']:.0f} [{s1['ci_low']:.0f}-{s1['ci_high']:.0f}] n=18"
    assert f"<td>{cell}</td>" in html
    # The legend ties each short label to its name in report.json and its interval.
    assert "S1 ICS&gt;=3 = &#34;S1 ICS share&gt;=3 (%)&#34;: percentage of scored items" in html
