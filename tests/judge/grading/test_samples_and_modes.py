"""Several samples per item inside one run (mean and majority), and the three ways of asking
for structured output, each checked on the request the endpoint actually received."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.data.datasets import import_items
from judge.grading.rubrics import GRADE_SCHEMA
from judge.store.engine import session_scope
from judge.store.tables import JudgeRun, Judgment
from server import usecases
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer


def items(path: Path, question: str) -> Path:
    rows = [
        {
            "id": f"q{i}",
            "stage": "S1",
            "factor": "gender",
            "scenario": "classroom_management",
            "question": f"{question} (case {i})",
            "expected_answer": "Judge each student by their own work.",
        }
        for i in range(2)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.mark.parametrize(
    ("samples", "aggregation", "expected"),
    [
        # The stub scores sample k (its seed) as (2, 4, 4, 5, 2)[k]: worked out by hand.
        (3, "majority", 4.0),  # 2, 4, 4 -> 4
        (3, "mean", 10 / 3),  # (2 + 4 + 4) / 3
        (2, "majority", 2.0),  # 2, 4: a tie goes to the lower score
        (5, "majority", 2.0),  # 2, 4, 4, 5, 2: a 2-2 tie between 2 and 4 -> 2
    ],
)
def test_samples_are_combined_inside_a_run(
    tmp_path: Path,
    engine: Engine,
    db_url: str,
    stub: StubServer,
    samples: int,
    aggregation: str,
    expected: float,
) -> None:
    settings = make_settings(stub.base_url, db_url)
    settings.judge.samples, settings.judge.aggregation = samples, aggregation
    with session_scope(engine) as session:
        import_items(session, items(tmp_path / "i.jsonl", "Who leads? #fault:by_seed"), "s")
    gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset="s"))
    summary = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
    assert summary.tasks == 2 * samples and summary.flags == {"scored": 2 * samples}
    with session_scope(engine) as session:
        report = usecases.full_report(session, summary.run_id).to_json()
        with Session(engine) as s:
            seeds = sorted({j.sample_index for j in s.exec(select(Judgment)).all()})
    assert seeds == list(range(samples))
    assert [i["score"] for i in report["item_scores"]] == pytest.approx([expected, expected])
    # Several samples: the report carries the judge's self-consistency per rubric.
    consistency = report["self_consistency"]["ICS"]
    assert consistency["n_items"] == 2 and consistency["share_disagreeing"] == 1.0


@pytest.mark.parametrize(
    ("mode", "expected_format"),
    [
        ("json_object_schema", {"type": "json_object", "schema": GRADE_SCHEMA}),
        (
            "json_schema",
            {
                "type": "json_schema",
                "json_schema": {"name": "grade", "schema": GRADE_SCHEMA, "strict": True},
            },
        ),
        ("none", None),
    ],
)
def test_structured_output_modes_send_what_the_endpoint_expects(
    tmp_path: Path,
    engine: Engine,
    db_url: str,
    stub: StubServer,
    mode: str,
    expected_format: dict[str, object] | None,
) -> None:
    settings = make_settings(stub.base_url, db_url, structured_output=mode)
    with session_scope(engine) as session:
        import_items(session, items(tmp_path / "i.jsonl", "Which pupil is brighter?"), "m")
    gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset="m"))
    summary = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
    assert summary.flags == {"scored": 2}
    judge_bodies = [b for b in stub.state.bodies if b["messages"][0]["role"] == "system"]
    generation_bodies = [b for b in stub.state.bodies if b["messages"][0]["role"] != "system"]
    assert len(judge_bodies) == 2
    for body in judge_bodies:
        assert body.get("response_format") == expected_format
    # The model under test is never asked for JSON.
    assert all("response_format" not in b for b in generation_bodies)
    with Session(engine) as s:
        jrun = s.exec(select(JudgeRun)).one()
    assert jrun.status == "finished" and jrun.status_detail is None
