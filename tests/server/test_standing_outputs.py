"""Every output that carries a judge's figures carries its standing (issue 42): the
export's judgments, the comparison's CSVs, the estimates', transport's and agreement's JSON.
Planted stores (tests/support/planted_judge.py): one judge run qualified on ICS, one of
another judge model on the same answers that no qualification covers; each output must say
"validated" for the first and "not validated" for the second, row by row."""

from __future__ import annotations

import csv
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from judge.config_qualify import QualifyConfig
from server.usecases.qualify import QualifyRequest, qualify
from tests.support.planted_judge import Planted, add_answers, add_judge_run, good_judge, plant

RULE = QualifyConfig(n_bootstrap=200)


def _two_runs(session: Session) -> tuple[Planted, Planted]:
    """A qualified judge run and an unqualified one (another judge model) of the same
    answers, both scoring ICS with the same scores."""
    judge, raters = good_judge(60, seed=21)
    p = plant(session, judge, raters)
    assert qualify(session, QualifyRequest(judge_run=p.judge_run_id, rubric="ICS"), RULE)
    other = add_judge_run(session, p.generation_run_id, p.item_ids, judge, model="other")
    return p, other


def test_the_export_gives_each_judgment_its_run_s_standing(engine: Engine, tmp_path: Path) -> None:
    from server.usecases.exports import export_run

    with Session(engine) as session:
        p, other = _two_runs(session)
    for run, expected in ((p, "validated"), (other, "not validated")):
        folder = tmp_path / str(run.judge_run_id)
        export_run(engine, run.judge_run_id, folder, formats=["csv"])
        with (folder / "judgments.csv").open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 60  # one ICS judgment per planted item
        assert {r["judge_standing"] for r in rows} == {expected}, run


def test_the_comparison_s_csv_rows_carry_each_run_s_standing(engine: Engine) -> None:
    from server.usecases.reports import compare_report

    with Session(engine) as session:
        p, other = _two_runs(session)
        ids = [p.judge_run_id, other.judge_run_id]
        plain = compare_report(session, ids)
        paired = compare_report(session, ids, paired=True)
    expected = {p.judge_run_id: "validated", other.judge_run_id: "not validated"}
    csvs = {name: rows for s in plain.sections for name, rows in s.csv.items()}
    assert set(csvs) == {"metrics.csv", "item_scores.csv"}
    for name, rows in csvs.items():
        ics = [r for r in rows if r["rubric"] == "ICS"]
        assert ics, name
        for row in ics:
            assert row["judge_standing"] == expected[row["judge_run_id"]], name
    # The paired rows compare A with B: each side's standing in a column of its own.
    rows = [r for s in paired.sections for r in s.csv.get("paired.csv", [])]
    assert rows and all(r["rubric"] == "ICS" for r in rows)
    assert {(r["judge_standing_a"], r["judge_standing_b"]) for r in rows} == {
        ("validated", "not validated")
    }


def test_the_estimates_and_transport_json_carry_the_standing(engine: Engine) -> None:
    from server.api.estimates import EstimatesOut, TransportOut
    from server.usecases.estimates import EstimatesRequest, TransportRequest, estimates, transport
    from server.usecases.standing import estimates_with_standing, transport_with_standing

    with Session(engine) as session:
        p, other = _two_runs(session)
        shown = {
            run.judge_run_id: estimates_with_standing(
                session, estimates(session, EstimatesRequest(judge_run=run.judge_run_id))
            )
            for run in (p, other)
        }
        # Transport compares runs of one judge configuration: the qualified judge again,
        # on another model's answers (unrated, so not validated there).
        judge_b, _ = good_judge(60, seed=22)
        b = add_judge_run(session, add_answers(session, p, "model-B"), p.item_ids, judge_b)
        moved = transport_with_standing(
            session,
            transport(session, TransportRequest(judge_run=p.judge_run_id, others=[b.judge_run_id])),
        )
    for run, expected in ((p, "validated"), (other, "not validated")):
        payload = shown[run.judge_run_id]
        EstimatesOut.model_validate(payload)  # the API's schema takes the new fields
        assert payload["standing"]["ICS"]["state"] == expected
        cells = [c for c in payload["metrics"] + payload["rubrics"] if c["rubric"] == "ICS"]
        assert cells and {c["judge_standing"] for c in cells} == {expected}
    TransportOut.model_validate(moved)
    assert moved["standing"][str(p.judge_run_id)]["ICS"]["state"] == "validated"
    on_b = moved["standing"][str(b.judge_run_id)]["ICS"]
    assert on_b["state"] == "not validated" and "not on model-B's" in on_b["says"]
    ics = next(t for t in moved["targets"] if t["target"] == "ICS")
    assert {m["run"]["judge_run"]: m["judge_standing"] for m in ics["models"]} == {
        p.judge_run_id: "validated",
        b.judge_run_id: "not validated",
    }


def test_the_agreement_json_gives_each_judge_its_standing(engine: Engine) -> None:
    from server.schemas import AgreementOut
    from server.usecases.agreement import AgreementRequest
    from server.usecases.standing import agreement_with_standing

    with Session(engine) as session:
        p, other = _two_runs(session)
        both = agreement_with_standing(
            session, AgreementRequest(generation_run=p.generation_run_id, n_bootstrap=0)
        ).to_dict()
    AgreementOut.model_validate(both)
    judges = {j["judge_run"]: j for j in both["rubrics"]["ICS"]["judges"]}
    assert judges[p.judge_run_id]["standing"]["state"] == "validated"
    assert judges[other.judge_run_id]["standing"]["state"] == "not validated"
    assert "model differs" in judges[other.judge_run_id]["standing"]["says"]
