"""`fairjudge compare` on two judge runs of the sample made against the scripted stub, checked
against a recomputation from the stored judgments with pandas; and the terminal tables of
`compare` and `report` at 100 columns, with no Python reprs in what people read."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from rich.console import Console
from sqlalchemy.engine import Engine

from judge.data.datasets import import_items
from judge.errors import InvalidInputError, NotFoundError
from judge.metrics import STAGE_METRICS
from judge.reports.sections import Table
from judge.runs import RunSummary
from judge.store.engine import make_engine, session_scope
from judge.vocab import FACTORS
from server import usecases
from server.cli import Context
from server.cli.compare import compare, print_comparison
from server.cli.output import fit_table
from server.cli.report import print_metrics, report
from server.usecases.runs import summary_line
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

WIDTH = 100


@dataclass(frozen=True)
class TwoRuns:
    engine: Engine
    db_url: str
    judge_run_ids: tuple[int, int]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoRuns]:
    """The sample plus one item whose judge replies are prose (unscored), answered once and
    judged twice: plain prompt at temperature 0, and CoT at 0.5 (the stub grades by the
    prompt's hash, so only a different prompt gives different scores)."""
    folder = tmp_path_factory.mktemp("compare")
    db_url = f"sqlite:///{folder / 'fairjudge.db'}"
    lines = [json.loads(x) for x in SAMPLE.read_text().splitlines() if x.strip()]
    prose = {**lines[0], "id": "prose", "question": lines[0]["question"] + " #fault:prose_always"}
    items = folder / "items.jsonl"
    items.write_text("\n".join(json.dumps(x) for x in [*lines, prose]) + "\n")
    engine = make_engine(db_url)
    with StubServer() as stub:
        settings = make_settings(stub.base_url, db_url)
        with session_scope(engine) as session:
            dataset = import_items(session, items, "sample_plus").dataset
        gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset=dataset))
        first = usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id)
        )
        hotter = settings.model_copy(
            update={
                "judge": settings.judge.model_copy(
                    update={"temperature": 0.5, "prompt_variant": "cot"}
                )
            }
        )
        second = usecases.judge(engine, hotter, usecases.JudgeRequest(generation_run_id=gen.run_id))
    assert first.run_id != second.run_id
    yield TwoRuns(engine, db_url, (first.run_id, second.run_id))
    engine.dispose()


def stored(engine: Engine, judge_run_id: int) -> pd.DataFrame:
    """One row per judgment with its item's stage and factor, straight from the tables."""
    return pd.read_sql(
        "SELECT j.score, j.status, j.rubric, i.stage, i.factor FROM judgment j "
        f"JOIN item i ON i.id = j.item_id WHERE j.judge_run_id = {int(judge_run_id)}",
        engine,
    )


def expected_cell(frame: pd.DataFrame, metric_kind: str, threshold: int) -> tuple[float, int, int]:
    scored = frame[frame.status == "scored"].score.astype(float)
    value = (
        scored.mean() / 5 * 100 if metric_kind == "mean_pct" else (scored >= threshold).mean() * 100
    )
    return value, len(scored), int((frame.status != "scored").sum())


def test_compare_values_match_a_recomputation_from_stored_judgments(two_runs: TwoRuns) -> None:
    with session_scope(two_runs.engine) as session:
        data = usecases.compare_report(session, two_runs.judge_run_ids).to_json()
    first, second = two_runs.judge_run_ids
    # Both runs judged the same answers of stub-model: labels carry the judge run ids.
    assert [r["label"] for r in data["runs"]] == [
        f"stub-model (judge run {first})",
        f"stub-model (judge run {second})",
    ]
    assert [(r["prompt_variant"], r["temperature"]) for r in data["runs"]] == [
        ("plain", 0.0),
        ("cot", 0.5),
    ]
    rows = {(r["judge_run_id"], r["factor"], r["metric"]): r for r in data["metrics_by_factor"]}
    rows |= {(r["judge_run_id"], "all", r["metric"]): r for r in data["metrics_overall"]}
    assert len(rows) == 2 * 10 * 9  # 2 runs x (9 factors + all) x 9 metrics
    differs = 0
    for run_id in two_runs.judge_run_ids:
        frame = stored(two_runs.engine, run_id)
        for metric in STAGE_METRICS:
            cell = frame[(frame.stage == metric.stage) & (frame.rubric == metric.rubric)]
            for factor in [*FACTORS, "all"]:
                part = cell if factor == "all" else cell[cell.factor == factor]
                value, n_scored, n_unscored = expected_cell(part, metric.kind, metric.threshold)
                got = rows[(run_id, factor, metric.name)]
                assert got["value"] == pytest.approx(value), (run_id, factor, metric.name)
                assert (got["n_scored"], got["n_unscored"]) == (n_scored, n_unscored)
                other = rows[(second if run_id == first else first, factor, metric.name)]
                differs += got["value"] != other["value"]
    assert differs > 0  # the two configurations do not give the same numbers
    # The prose item (S1, the sample's first factor) is unscored in both runs.
    s1 = {r["judge_run_id"]: r for r in data["metrics_overall"] if r["metric"].startswith("S1")}
    assert [s1[i]["n_unscored"] for i in two_runs.judge_run_ids] == [1, 1]
    assert data["unscored"] == {
        f"stub-model (judge run {first})": {"unparsable": 1},
        f"stub-model (judge run {second})": {"unparsable": 1},
    }


def test_compare_command_json_and_files(two_runs: TwoRuns, tmp_path: Path) -> None:
    first, second = two_runs.judge_run_ids
    runner = CliRunner()
    obj = Context(None, two_runs.db_url)
    as_json = runner.invoke(compare, [str(first), str(second), "--json"], obj=obj)
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert [r["judge_run_id"] for r in data["runs"]] == [first, second]
    out = tmp_path / "cmp"
    human = runner.invoke(compare, [str(first), str(second), "--out", str(out)], obj=obj)
    assert human.exit_code == 0, human.output
    assert f"report: {(out / 'report.html').resolve()}" in human.output
    assert "{'" not in human.output and "}" not in human.output
    written = json.loads((out / "report.json").read_text())
    assert written["metrics_by_factor"] == data["metrics_by_factor"]
    html = (out / "report.html").read_text()
    # Figure 4: one panel per stage and rubric (S1 ICS, S2 TCS/PCS/ETCS, S3 SBAS, S4 ICS).
    assert html.count("data:image/png;base64,") == 6
    assert "Stage metrics by sensitive factor" in html and "u=1" in html
    csv_head = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    assert csv_head[:2] == ["label", "judge_run_id"] and "ci_low" in csv_head


def test_compare_refuses_unknown_and_too_few_runs(two_runs: TwoRuns) -> None:
    first, _ = two_runs.judge_run_ids
    with session_scope(two_runs.engine) as session:
        with pytest.raises(NotFoundError, match="no judge run 98, 99; see `fairjudge runs`"):
            usecases.compare_report(session, [first, 98, 99])
        with pytest.raises(InvalidInputError, match="at least two different judge runs"):
            usecases.compare_report(session, [first, first])
    result = CliRunner().invoke(compare, [str(first), "77"], obj=Context(None, two_runs.db_url))
    assert result.exit_code != 0 and "no judge run 77" in str(result.exception)


def printed(render: object, width: int = WIDTH) -> str:
    with open(os.devnull, "w") as sink:  # recorded, not shown; closed (filterwarnings = error)
        console = Console(width=width, record=True, file=sink)
        render(console)  # type: ignore[operator]
    return console.export_text()


def assert_fits_and_names_every_factor(text: str) -> None:
    too_long = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_long, too_long
    for factor in FACTORS:
        # A whole factor name in its own cell, never cut ("disability_spec…").
        assert re.search(rf"│ {factor} +│", text), factor
    assert "…" not in text


def test_run_table_fits_100_columns(two_runs: TwoRuns) -> None:
    with session_scope(two_runs.engine) as session:
        composed = usecases.full_report(session, two_runs.judge_run_ids[0])
    text = printed(lambda c: print_metrics(composed, c))
    assert_fits_and_names_every_factor(text)
    for metric in STAGE_METRICS:
        assert f" {metric.label} " in text
    # Every value with its interval and count, e.g. "50 [9-91] n=2"; the S1 gender cell
    # (two sample items and the prose copy of one) says one item was left out.
    assert re.search(r"│ \d+ \[\d+-\d+\] n=2 +│", text)
    assert re.search(r"│ gender +│ \d+ \[\d+-\d+\] n=2 u=1 +│", text)
    # The legend under the table, and the unscored judgments and tokens in words.
    assert "X>=k: share of scored items" in text
    assert "unscored judgments: unparsable 1" in text
    assert re.search(r"tokens: generation [\d,]+ prompt \+ [\d,]+ completion", text)
    assert "{" not in text and "}" not in text


def test_compare_tables_fit_100_columns(two_runs: TwoRuns) -> None:
    with session_scope(two_runs.engine) as session:
        composed = usecases.compare_report(session, two_runs.judge_run_ids)
    text = printed(lambda c: print_comparison(composed, c))
    assert_fits_and_names_every_factor(text)
    # Every value of both runs has its unscored count beside it: 10 x 9 cells each.
    assert len(re.findall(r"n=\d+ u=\d+", text)) == 2 * 9 + 2 * 9 * 9


def test_wide_tables_split_into_panels_then_go_long() -> None:
    # Three 25-character value columns beside two key columns (25 + 12 characters). A
    # column takes its width + 3 (padding and border), the frame 1 more: the keys take
    # 1 + 28 + 15 = 44 columns and each value 28, so two fit in exactly 100 and the third goes
    # to a second panel that repeats the keys.
    cell = "x" * 25
    t = Table(
        "wide",
        ["factor", "metric", "a", "b", "c"],
        [["disability_special_groups", "S2 ETCS mean", cell, cell, cell]],
        key_columns=2,
    )
    panels = fit_table(t, WIDTH)
    texts = [printed(lambda c, p=p: c.print(p)) for p in panels]
    assert len(panels) == 2
    assert [x.count(cell) for x in texts] == [2, 1]
    assert max(map(len, texts[0].splitlines())) == 100
    assert all(
        "disability_special_groups" in x and max(map(len, x.splitlines())) <= 100 for x in texts
    )
    # At 60 columns not even one value fits beside the keys (44 + 28): each row's keys on a
    # line, then one line per value.
    (long,) = fit_table(t, 60)
    text = printed(lambda c: c.print(long), 60)
    assert "factor disability_special_groups · metric S2 ETCS mean" in text
    assert [f"  {name}: {cell}" in text for name in "abc"] == [True] * 3
    assert max(map(len, text.splitlines())) <= 60


def test_summary_line_has_no_python_repr() -> None:
    summary = RunSummary(2, 64, 64, 0, 66, {"unscored": 4, "scored": 60})
    assert summary_line("judge", summary) == (
        "judge run 2: 64 to do, 64 model calls, 0 from cache, 66 HTTP requests; "
        "60 scored, 4 unscored"
    )
    assert summary_line("generation", RunSummary(1, 0, 0, 0, 0, {})).endswith("; nothing new")


def test_report_command_prints_words(two_runs: TwoRuns, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        report,
        [str(two_runs.judge_run_ids[0]), "--out", str(tmp_path / "r")],
        obj=Context(None, two_runs.db_url),
    )
    assert result.exit_code == 0, result.output
    assert "unscored judgments: unparsable 1" in result.output
    assert "{" not in result.output and "}" not in result.output


def test_compare_paired_pairs_the_stored_judgments(two_runs: TwoRuns, tmp_path: Path) -> None:
    """--paired on one generation run judged twice (same items): every S1 ICS pair of the
    stored judgments is paired, the dropped counts are the unscored items of each run, and
    the overall S1 share's difference and flips equal a recomputation with pandas."""
    first, second = two_runs.judge_run_ids
    obj = Context(None, two_runs.db_url)
    out = tmp_path / "paired"
    plain = CliRunner().invoke(compare, [str(first), str(second), "--json"], obj=obj)
    assert plain.exit_code == 0 and "paired" not in json.loads(plain.output)
    result = CliRunner().invoke(
        compare, [str(first), str(second), "--paired", "--margin", "10", "--json"], obj=obj
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["paired"]
    assert data["margin"] == 10 and data["p_adjust_method"] == "holm"
    row = next(
        r for r in data["rows"] if r["factor"] == "all" and r["metric"] == "S1 ICS share>=3 (%)"
    )
    query = (
        "SELECT j.item_id, j.score, j.status FROM judgment j JOIN item i ON i.id = j.item_id "
        "WHERE j.judge_run_id = {} AND j.rubric = 'ICS' AND i.stage = 'S1'"
    )
    with two_runs.engine.connect() as conn:
        a = pd.read_sql(query.format(first), conn).set_index("item_id")
        b = pd.read_sql(query.format(second), conn).set_index("item_id")
    assert a.index.is_unique and b.index.is_unique  # one sample per item: no combining
    both = a.join(b, how="inner", suffixes=("_a", "_b"))
    assert len(both) == len(a) == len(b)
    kept = both[(both.status_a == "scored") & (both.status_b == "scored")]
    assert row["n_pairs"] == len(kept) > 0
    assert row["dropped_a"] == int((both.status_a != "scored").sum())
    assert row["dropped_b"] == int((both.status_b != "scored").sum())
    pass_a, pass_b = kept.score_a >= 3, kept.score_b >= 3
    assert row["pass_to_fail"] == int((pass_a & ~pass_b).sum())
    assert row["fail_to_pass"] == int((~pass_a & pass_b).sum())
    assert row["diff"] == pytest.approx((pass_b.mean() - pass_a.mean()) * 100)
    human = CliRunner().invoke(
        compare, [str(first), str(second), "--paired", "--margin", "10", "--out", str(out)], obj=obj
    )
    assert human.exit_code == 0, human.output
    assert "Paired differences" in human.output and "McNemar" in human.output
    assert len(pd.read_csv(out / "paired.csv")) == len(data["rows"])
    assert "Paired differences" in (out / "report.html").read_text()
    assert json.loads((out / "report.json").read_text())["paired"]["rows"] == data["rows"]


def test_compare_paired_refuses_what_it_cannot_pair(two_runs: TwoRuns) -> None:
    first, second = two_runs.judge_run_ids
    obj = Context(None, two_runs.db_url)
    margin_alone = CliRunner().invoke(compare, [str(first), str(second), "--margin", "3"], obj=obj)
    assert margin_alone.exit_code != 0 and "add --paired" in str(margin_alone.exception)
    with session_scope(two_runs.engine) as db:
        with pytest.raises(InvalidInputError, match="exactly two judge runs"):
            usecases.compare_report(db, [first, second, first + second + 100], paired=True)


def test_compare_paired_refuses_runs_of_different_items(
    tmp_path_factory: pytest.TempPathFactory, empty_template: Path
) -> None:
    """Datasets ``a`` and ``b`` hold the same sample as different items (tests/support/
    two_runs.py): paired statistics are refused with the counts (18 S1 items each, none
    shared)."""
    from tests.support.two_runs import two_runs as make_two_runs

    with make_two_runs(tmp_path_factory.mktemp("unpaired"), empty_template, "unpaired") as t:
        obj = Context(None, t.url)
        args = [str(t.runs["a"]), str(t.runs["b"]), "--paired"]
        result = CliRunner().invoke(compare, args, obj=obj)
    assert result.exit_code != 0
    text = str(result.exception)
    assert "paired comparison refused" in text
    assert "0 item x rubric pairs in both, 18 only in" in text
