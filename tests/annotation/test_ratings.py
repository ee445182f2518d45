"""Human ratings in the store, and judge reliability computed from stored rows."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from annotation.errors import RatingsError
from annotation.ratings import import_ratings
from annotation.reliability import run_reliability
from annotation.sections import reliability_section
from judge import paths
from judge.grading.rubrics import RubricSet, load_rubrics
from judge.reports.render import write_report
from judge.reports.sections import AgreementPlot, Report
from judge.stats.coefficient import BootstrapOptions
from judge.store.engine import session_scope
from judge.store.tables import HumanRating, Item, Judgment
from server import usecases
from server.cli import cli


@pytest.fixture(scope="module")
def rubrics() -> RubricSet:
    return load_rubrics(paths.prompts_dir())


def write_csv(
    path: Path,
    rows: list[list[object]],
    header: tuple[str, ...] = ("item_id", "rubric", "rater", "score"),
) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def judge_scores(engine: Engine) -> dict[str, int]:
    with Session(engine) as s:
        return {item.key: j.score for j, item in s.exec(select(Judgment, Item).join(Item))}


def test_import_is_all_or_nothing_and_idempotent(
    tmp_path: Path, engine: Engine, judged: tuple[int, int], rubrics: RubricSet
) -> None:
    run, _ = judged
    bad = write_csv(
        tmp_path / "bad.csv",
        [
            ["s1-gender-1", "ICS", "ann1", 4],  # line 2: fine
            ["nope", "ICS", "ann1", 3],  # line 3: unknown item
            ["s1-gender-1", "SBAS", "ann2", 3],  # line 4: rubric not for S1
            ["s1-gender-2", "ICS", "ann1", 6],  # line 5: off the scale
            ["s1-gender-1", "ics", "ann1", 4],  # line 6: repeated (rubric case-insensitive)
            ["s2-gender-1", "TCS", "ann1", 4],  # line 7: item not answered in this run
        ],
    )
    with pytest.raises(RatingsError) as caught, session_scope(engine) as session:
        import_ratings(session, bad, run, rubrics)
    assert [n for n, _ in caught.value.problems] == [3, 4, 5, 6, 7]
    assert "unknown item_id 'nope'" in str(caught.value)
    assert "rubric 'SBAS' does not apply to S1 item" in str(caught.value)
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(HumanRating)).one() == 0

    good = write_csv(
        tmp_path / "good.csv",
        [["s1-gender-1", "ICS", "ann1", 4], ["s1-gender-1", "ICS", "ann2", 2]],
    )
    with session_scope(engine) as session:
        first = import_ratings(session, good, run, rubrics)
    with session_scope(engine) as session:
        again = import_ratings(session, good, run, rubrics)
    assert (first.added, again.added, again.unchanged) == (2, 0, 2)
    changed = write_csv(tmp_path / "changed.csv", [["s1-gender-1", "ICS", "ann1", 5]])
    with (
        pytest.raises(RatingsError, match="already has score 4 .* pass --replace"),
        session_scope(engine) as session,
    ):
        import_ratings(session, changed, run, rubrics)
    with session_scope(engine) as session:
        assert import_ratings(session, changed, run, rubrics, replace=True).replaced == 1


def test_reliability_from_the_store_matches_direct_computation(
    tmp_path: Path, engine: Engine, judged: tuple[int, int], rubrics: RubricSet
) -> None:
    run, judge_run = judged
    scores = judge_scores(engine)
    keys = sorted(scores)
    rng = np.random.default_rng(0)
    rows, human = [], {}
    for key in keys:  # three raters near the judge, one of them skips every third item
        ratings = np.clip(scores[key] + rng.integers(-1, 2, 3), 1, 5)
        for r, value in enumerate(ratings):
            if r == 2 and keys.index(key) % 3 == 0:
                continue
            rows.append([key, "ICS", f"ann{r}", int(value)])
        human[key] = np.mean(
            [v for r, v in enumerate(ratings) if not (r == 2 and keys.index(key) % 3 == 0)]
        )
    with session_scope(engine) as session:
        import_ratings(session, write_csv(tmp_path / "r.csv", rows), run, rubrics)
        result = run_reliability(session, run, options=BootstrapOptions(n_bootstrap=200))
    entry = result.rubrics["ICS"]
    assert (entry.n_rated_items, entry.n_raters) == (18, 3)
    judge = entry.judge(judge_run)
    assert judge is not None and judge.agreement is not None
    jx = np.array([scores[k] for k in keys], dtype=float)
    hy = np.array([human[k] for k in keys])
    # Independent: scipy / sklearn on the arrays rebuilt here from the stub's stored scores.
    coefficients = judge.agreement.coefficients
    assert coefficients["spearman"].value == pytest.approx(stats.spearmanr(jx, hy).statistic)
    assert coefficients["kappa_quadratic"].value == pytest.approx(
        cohen_kappa_score(jx, np.floor(hy + 0.5), labels=[1, 2, 3, 4, 5], weights="quadratic")
    )
    kq = cohen_kappa_score(jx, np.floor(hy + 0.5), labels=[1, 2, 3, 4, 5], weights="quadratic")
    assert judge.n == 18 and f"weighted kappa {kq:.2f}" in judge.reading
    # items_needed = n x (CI half-width / target)^2, never fewer than n (docs/agreement.md),
    # with the default target half-width of 0.1.
    spearman = coefficients["spearman"]
    half = (spearman.ci_high - spearman.ci_low) / 2
    assert judge.items_needed["spearman"] == max(18, math.ceil(18 * (half / 0.1) ** 2))
    # The JSON carries the same numbers, in today's shape.
    as_json = result.to_dict()["rubrics"]["ICS"]
    mine = next(j for j in as_json["judges"] if j["judge_run"] == judge_run)
    assert mine["coefficients"]["spearman"]["value"] == pytest.approx(
        stats.spearmanr(jx, hy).statistic
    )
    # The plotted points are the same (judge, human) pairs, in item id order.
    pairs = np.array(sorted(zip(mine["points"]["judge"], mine["points"]["human"], strict=True)))
    expected = np.array(sorted(zip(jx.tolist(), hy.tolist(), strict=True)))
    np.testing.assert_allclose(pairs, expected, rtol=1e-12)
    assert as_json["n_rated_items"] == 18 and mine["n"] == 18

    with session_scope(engine) as session:
        section = reliability_section(session, judge_run, options=BootstrapOptions(100))
        base = usecases.full_report(session, judge_run, with_reliability=False)
    assert section is not None and section.title == "Judge reliability"
    assert section.json_key == "agreement"
    assert set(section.payload) == {
        "rows", "human_vs_human", "n_bootstrap", "note", "ratings_used", "weighted_absent"
    }  # fmt: skip
    assert section.payload["n_bootstrap"] == 100
    (row,) = section.payload["rows"]  # one rated rubric: ICS
    assert row["rubric"] == "ICS" and row["n"] == 18
    assert row["spearman"].startswith(f"{stats.spearmanr(jx, hy).statistic:.2f} [")
    assert section.tables[0].rows[0][0] == "ICS"
    (plot,) = section.figures  # drawn by the renderer, not here
    assert isinstance(plot, AgreementPlot) and sorted(plot.judge) == sorted(jx.tolist())
    report = Report(base.title, base.intro, [*base.sections, section])
    html = write_report(report, tmp_path / "report")["html"].read_text()
    # One PNG per figure: the score box plot of the metrics section, the judge diagnostics'
    # length chart and the agreement plot.
    figures = sum(len(s.figures) for s in report.sections)
    assert "Judge reliability" in html and html.count("data:image/png;base64,") == figures == 3


def test_agreement_cli_on_a_run(
    tmp_path: Path, engine: Engine, db_url: str, judged: tuple[int, int]
) -> None:
    run, _ = judged
    scores = judge_scores(engine)
    rows = [
        [k, "ICS", rater, max(1, min(5, v + d))]
        for k, v in scores.items()
        for rater, d in (("a", 0), ("b", 1))
    ]
    config = tmp_path / "c.toml"
    config.write_text(
        f'database_url = "{db_url}"\n[endpoints.embedded]\n'
        'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    )
    runner = CliRunner()
    imported = runner.invoke(
        cli,
        [
            "--config",
            str(config),
            "ratings",
            "import",
            str(write_csv(tmp_path / "r.csv", rows)),
            "--run",
            str(run),
            "--json",
        ],
    )
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.output)["added"] == 36
    shown = runner.invoke(
        cli,
        [
            "--config",
            str(config),
            "agreement",
            "--run",
            str(run),
            "--bootstrap",
            "100",
            "--out",
            str(tmp_path / "agr"),
            "--json",
        ],
    )
    assert shown.exit_code == 0, shown.output
    result = json.loads(shown.output)
    assert result["rubrics"]["ICS"]["n_raters"] == 2
    assert (tmp_path / "agr" / "agreement.json").exists()
    table = runner.invoke(
        cli, ["--config", str(config), "agreement", "--run", str(run), "--bootstrap", "50"]
    )
    assert "human alpha (interval)" in table.output and "ICS" in table.output


def test_ratings_import_takes_the_rubrics_scale(
    tmp_path: Path, engine: Engine, db_url: str, judged: tuple[int, int], rubrics: RubricSet
) -> None:
    run, _ = judged
    path = write_csv(
        tmp_path / "r.csv",
        [["s1-gender-1", "ICS", "ann1", 0], ["s1-gender-2", "ICS", "ann1", 11]],
    )
    # ICS has five levels, so its scale is 1-5: both scores are off it, each refused by line.
    with pytest.raises(RatingsError) as caught, session_scope(engine) as session:
        import_ratings(session, path, run, rubrics)
    assert caught.value.problems == [
        (2, "rubric ICS: score '0' is outside the 1-5 scale"),
        (3, "rubric ICS: score '11' is outside the 1-5 scale"),
    ]
    config = tmp_path / "c.toml"
    config.write_text(
        f'database_url = "{db_url}"\n[endpoints.embedded]\n'
        'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    )
    runner = CliRunner()
    base = ["--config", str(config), "ratings", "import", "--run", str(run)]
    # A declared 0-10 scale contradicts the rubric's 1-5: one line says so, nothing stored
    # (ratings on another scale could never be set against the judge's 1-5 scores).
    refused = runner.invoke(cli, [*base, str(path), "--scale", "0-10"])
    assert isinstance(refused.exception, RatingsError)
    assert refused.exception.problems == [
        (
            2,
            "rubric ICS is rated 1-5 (5 levels), not on the given scale 0-10; leave the "
            "scale out or give one of 5 levels",
        )
    ]
    # Five named levels are the same scale written with words: "good" is level 4.
    named = write_csv(tmp_path / "named.csv", [["s1-gender-1", "ICS", "ann1", "good"]])
    words = "awful,poor,fair,good,great"
    imported = runner.invoke(cli, [*base, str(named), "--scale", words, "--json"])
    assert imported.exit_code == 0, imported.output
    summary = json.loads(imported.output)
    assert (summary["added"], summary["scale"]) == (1, words)
    with Session(engine) as s:
        assert [r.score for r in s.exec(select(HumanRating))] == [4.0]
    # A rating stored off the scale by other means is still refused by the reliability.
    with session_scope(engine) as session:
        item = session.exec(select(Item).where(Item.key == "s1-gender-2")).one()
        session.add(
            HumanRating(generation_run_id=run, item_id=item.id, rubric="ICS", rater="x", score=9)
        )
    with (
        pytest.raises(RatingsError, match="1 of the ratings of rubric ICS lie outside the 1-5"),
        session_scope(engine) as session,
    ):
        run_reliability(session, run, options=BootstrapOptions(n_bootstrap=0))
