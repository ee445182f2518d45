"""Agreement that cannot flatter, end to end on a real store: AC1, the majority baseline and
the flags reach the JSON, the report section, the CLI's tables and the API's schema. A
planted flattering case is flagged and a clean one is not.

The stub judge scores the 18 S1 items pseudo-randomly on 1-5 (1 + sha256 mod 5), so its
scores vary; the expected figures are counted here from the stored judge scores.
"""

from __future__ import annotations

import json
import typing
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import Engine

from annotation.ratings import import_ratings
from annotation.reliability import run_reliability
from annotation.sections import reliability_section
from judge import paths
from judge.grading.rubrics import load_rubrics
from judge.stats.baseline import FLAG_CODES, KAPPA_COVERS_ZERO, NO_BETTER_THAN_MAJORITY
from judge.stats.coefficient import BootstrapOptions
from judge.store.engine import session_scope
from server.cli import cli
from server.schemas import AgreementFlagOut, AgreementOut
from tests.annotation.test_ratings import judge_scores, write_csv

OPTIONS = BootstrapOptions(n_bootstrap=200, seed=0)


def _rate(tmp_path: Path, engine: Engine, run: int, human: dict[str, int]) -> None:
    """Two raters who both give ``human``'s score (so the humans' score is that score)."""
    rows = [[k, "ICS", r, v] for k, v in human.items() for r in ("a", "b")]
    with session_scope(engine) as session:
        import_ratings(
            session, write_csv(tmp_path / "r.csv", rows), run, load_rubrics(paths.prompts_dir())
        )


def test_flag_codes_are_the_api_schemas() -> None:
    code = AgreementFlagOut.model_fields["code"].annotation
    assert typing.get_args(code) == FLAG_CODES


def test_a_judge_no_better_than_the_majority_is_flagged_everywhere(
    tmp_path: Path, engine: Engine, db_url: str, judged: tuple[int, int]
) -> None:
    run, judge_run = judged
    scores = judge_scores(engine)
    assert len(set(scores.values())) > 1  # the stub's judge is not constant
    # Planted: the people rate every item 3, whatever the answer. By hand: the majority
    # baseline (always answering 3) is 18/18 = 1.0; the judge's exact agreement is the share
    # of items it scored 3, below 1; kappa is 0 (observed = expected agreement = that share,
    # the people being constant) and every resample's kappa is 0 or undefined.
    _rate(tmp_path, engine, run, dict.fromkeys(scores, 3))
    share = Counter(scores.values())[3] / len(scores)
    with session_scope(engine) as session:
        result = run_reliability(session, run, options=OPTIONS)
        section = reliability_section(session, judge_run, options=OPTIONS)
    judge = result.rubrics["ICS"].judge(judge_run)
    assert judge is not None and judge.agreement is not None
    c = judge.agreement.coefficients
    assert c["majority_baseline"].value == 1.0
    assert c["exact_agreement"].value == pytest.approx(share, abs=1e-12)
    assert c["kappa"].value == pytest.approx(0.0, abs=1e-12)
    as_json = judge.to_dict()
    assert [f["code"] for f in as_json["flags"]] == [KAPPA_COVERS_ZERO, NO_BETTER_THAN_MAJORITY]
    assert as_json["majority_category"] == 3 and "ac1" in as_json["coefficients"]

    # The report: the row's flags beside its figures, and the table of raw vs chance.
    assert section is not None
    (row,) = section.payload["rows"]
    assert [f["code"] for f in row["flags"]] == [KAPPA_COVERS_ZERO, NO_BETTER_THAN_MAJORITY]
    main = section.tables[0]
    cell = main.rows[0][main.columns.index("agreement flags")]
    assert "no better than always answering the majority class" in cell
    chance = next(t for t in section.tables if t.title.startswith("Judge vs human: raw"))
    assert chance.columns[3:] == [
        "exact agreement", "majority baseline", "kappa", "AC1", "agreement flags"
    ]  # fmt: skip
    assert chance.rows[0][4].startswith("1.00")  # the baseline, 1.0

    # The CLI: the JSON is the API's shape (its schema accepts it, flags and all), and the
    # tables print the flag.
    config = tmp_path / "c.toml"
    config.write_text(
        f'database_url = "{db_url}"\n[endpoints.embedded]\n'
        'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    )
    base = ["--config", str(config), "agreement", "--run", str(run), "--bootstrap", "50"]
    shown = CliRunner().invoke(cli, [*base, "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    parsed = AgreementOut.model_validate(data)
    (mine,) = parsed.rubrics["ICS"].judges
    assert mine.flags is not None and [f.code for f in mine.flags] == [
        KAPPA_COVERS_ZERO,
        NO_BETTER_THAN_MAJORITY,
    ]
    text = CliRunner().invoke(cli, [*base], terminal_width=400)
    assert text.exit_code == 0, text.output
    assert "raw agreement beside chance" in text.output
    assert "kappa's interval covers 0" in text.output


def test_a_judge_that_copies_the_people_is_not_flagged(
    tmp_path: Path, engine: Engine, judged: tuple[int, int]
) -> None:
    run, judge_run = judged
    scores = judge_scores(engine)
    # Clean: the people give the judge's own scores. By hand: exact agreement 1 (interval
    # [1, 1]: every resample agrees on every item), above the baseline (the share of the
    # most frequent score, below 1 as the scores vary); kappa 1.
    _rate(tmp_path, engine, run, scores)
    top = Counter(scores.values()).most_common(1)[0][1] / len(scores)
    with session_scope(engine) as session:
        result = run_reliability(session, run, options=OPTIONS)
    judge = result.rubrics["ICS"].judge(judge_run)
    assert judge is not None and judge.agreement is not None
    c = judge.agreement.coefficients
    assert c["majority_baseline"].value == pytest.approx(top, abs=1e-12) and top < 1
    assert (c["exact_agreement"].value, c["kappa"].value, c["ac1"].value) == (1.0, 1.0, 1.0)
    assert judge.agreement.flags == [] and judge.to_dict()["flags"] == []


def test_agreement_compute_on_files_prints_the_flags(tmp_path: Path) -> None:
    # Planted, on a 0/1 rubric: two people pass 18 of 20 items (the same 18), the judge
    # passes all 20. By hand: raw agreement 18/20 = 0.90, kappa 0, baseline (always 1) 0.90.
    human = tmp_path / "h.csv"
    human.write_text(
        "item_id,rater,score\n"
        + "".join(f"i{i},{r},{int(i < 18)}\n" for i in range(20) for r in ("a", "b"))
    )
    judge = tmp_path / "j.csv"
    judge.write_text("item_id,score\n" + "".join(f"i{i},1\n" for i in range(20)))
    args = ["agreement", "compute", "--human", str(human), "--judge", str(judge)]
    args += ["--scale", "0/1", "--bootstrap", "100"]
    shown = CliRunner().invoke(cli, [*args, "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)["judge_vs_human"]
    assert data["exact_agreement"]["value"] == pytest.approx(0.90)
    assert data["majority_baseline"]["value"] == pytest.approx(0.90)
    assert data["kappa"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert [f["code"] for f in data["flags"]] == [KAPPA_COVERS_ZERO, NO_BETTER_THAN_MAJORITY]
    text = CliRunner().invoke(cli, args, terminal_width=300)
    assert text.exit_code == 0, text.output
    assert "flagged (no_better_than_majority)" in text.output
    assert "although raw agreement is 0.90" in text.output
