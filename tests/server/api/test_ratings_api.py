"""``POST /api/v1/ratings`` and the SummEval round trip over HTTP alone (issue 25, item 6), on
a real store (SQLite and PostgreSQL): register a coherence rubric, import summaries as
free-form items and their texts as answers, judge them (a job, run by the worker's own
function) through the stub planted to follow the experts, send the experts' ratings, read the
agreement. Expected values are computed from the SummEval files with scipy, scikit-learn and
krippendorff (tests/support/summeval_coherence.py); refusals are the CLI's messages, named by
row.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, func, select

from judge.store.engine import make_engine
from judge.store.tables import HumanRating
from tests.server.api.test_api import Api, make_api, run_jobs
from tests.support import summeval_coherence as se
from tests.support.stub_openai import StubServer


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    # SQLite: a copy of the session's empty migrated store (tests/support/stores.py).
    name = "migrated_db_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture(scope="module")
def summaries() -> list[se.Summary]:
    return se.load_summaries()


@pytest.fixture
def api(store_url: str, tmp_path: Path, summaries: list[se.Summary]) -> Iterator[Api]:
    with StubServer(responder=se.judge_responder(summaries)) as stub:
        made = make_api(store_url, stub, tmp_path)
        yield made
        made.close()


def ratings_stored(api: Api) -> int:
    engine = make_engine(api.settings.database_url)
    try:
        with Session(engine) as session:
            return int(session.exec(select(func.count()).select_from(HumanRating)).one())
    finally:
        engine.dispose()


def prepare(api: Api, summaries: list[se.Summary]) -> tuple[int, int]:
    """Rubric, items, answers and a judge run, over HTTP only: (generation run, judge run)."""
    made = api.post("/api/v1/rubrics", json={"toml": se.RUBRIC_TOML}, headers=api.admin)
    assert made.status_code == 201, made.json
    items = api.post("/api/v1/datasets", json={"name": "summeval", "items": se.items(summaries)})
    assert items.status_code == 201, items.json
    answers = api.post(
        "/api/v1/responses", json={"dataset": "summeval", "rows": se.answers(summaries)}
    )
    assert answers.status_code == 201, answers.json
    gen = int(answers.json["generation_run_id"])
    job = api.post(
        "/api/v1/jobs",
        json={"kind": "judge", "params": {"generation_run_id": gen, "rubric_set": se.RUBRIC}},
    )
    assert job.status_code == 201, job.json
    assert run_jobs(api) == ["finished"]
    result = api.get(f"/api/v1/jobs/{job.json['id']}").json["result"]
    return gen, int(result["judge_run_id"])


def test_summeval_round_trip_over_http(api: Api, summaries: list[se.Summary]) -> None:
    want = se.expected(summaries)
    gen, judge_run = prepare(api, summaries)
    rows = se.rating_rows(summaries)
    sent = api.post("/api/v1/ratings", json={"generation_run": gen, "rows": rows})
    assert sent.status_code == 201, sent.json
    assert {k: sent.json[k] for k in ("added", "unchanged", "raters", "items", "batch")} == {
        "added": 300,
        "unchanged": 0,
        "raters": 3,
        "items": 100,
        "batch": "default",  # the batch `ratings import` uses when none is named
    }
    # The same batch again changes nothing (idempotent): 200, all unchanged.
    again = api.post("/api/v1/ratings", json={"generation_run": gen, "rows": rows})
    assert again.status_code == 200 and (again.json["added"], again.json["unchanged"]) == (0, 300)
    assert ratings_stored(api) == 300

    agreement = api.get(f"/api/v1/judge-runs/{judge_run}/agreement")
    assert agreement.status_code == 200, agreement.json
    # The shape of `fairjudge agreement --json`, scoped to this judge run.
    assert (agreement.json["judge_run"], agreement.json["generation_run"]) == (judge_run, gen)
    assert list(agreement.json["rubrics"]) == [se.RUBRIC]
    rubric = agreement.json["rubrics"][se.RUBRIC]
    (row,) = rubric["judges"]
    assert (row["judge_run"], row["n"]) == (judge_run, want.n)
    # Among the experts: the exact values.
    humans = rubric["human_vs_human"]
    assert humans["alpha_interval"]["value"] == pytest.approx(want.alpha_interval)
    assert humans["alpha_ordinal"]["value"] == pytest.approx(want.alpha_ordinal)
    # Judge vs experts: each coefficient as a number, inside its own 95 % CI.
    for name in ("pearson", "spearman", "kappa_quadratic"):
        value, found = getattr(want, name), row["coefficients"][name]
        assert found["value"] == pytest.approx(value), (name, found, value)
        assert found["ci_low"] <= value <= found["ci_high"], (name, found, value)


def test_bad_batches_are_refused_by_row_and_store_nothing(
    api: Api, summaries: list[se.Summary]
) -> None:
    gen, _ = prepare(api, summaries)
    key = summaries[0].key
    good: dict[str, Any] = {"item_id": key, "rubric": se.RUBRIC, "rater": "e1", "score": 3}
    bad = [
        good,  # row 1: fine
        {**good, "rater": "e2", "score": 6},  # row 2: off the rubric's 1-5
        {**good, "rater": "e3", "rubric": "NOPE"},  # row 3: unknown rubric
        {**good, "rater": "e4", "rubric": "ICS"},  # row 4: FairMonitor's, not for free items
        {**good, "item_id": "nope"},  # row 5: no such item
        {**good, "score": 2},  # row 6: repeats row 1
        {**good, "rater": "e5", "score": "high"},  # row 7: not a number
    ]
    refused = api.post("/api/v1/ratings", json={"generation_run": gen, "rows": bad})
    assert refused.status_code == 400
    error = refused.json["error"]
    use = f"rubrics for free items: {se.RUBRIC}"
    # The CLI's messages, named by row (tests/annotation/test_rubric_ratings.py names lines).
    assert error["message"] == "the batch was not imported; fix these rows and try again:"
    assert error["problems"] == [
        f"row 2: rubric {se.RUBRIC}: score '6' is outside the 1-5 scale",
        f"row 3: unknown rubric 'NOPE' ({use})",
        f"row 4: rubric 'ICS' does not apply to free item '{key}' ({use})",
        "row 5: unknown item_id 'nope' (not in the run's dataset)",
        f"row 6: rater 'e1' already rated '{key}' / {se.RUBRIC} on row 1",
        f"row 7: rubric {se.RUBRIC}: score 'high' is not a number",
    ]
    assert ratings_stored(api) == 0
    # A scale of another size than the rubric's: one problem, nothing stored.
    three = api.post(
        "/api/v1/ratings", json={"generation_run": gen, "rows": [good], "scale": "1-3"}
    )
    assert three.status_code == 400
    assert three.json["error"]["problems"] == [
        f"row 1: rubric {se.RUBRIC} is rated 1-5 (5 levels), not on the given scale 1-3; "
        "leave the scale out or give one of 5 levels"
    ]
    # Unreadable scale, unknown run, wrong types: one clear error each.
    unreadable = api.post(
        "/api/v1/ratings", json={"generation_run": gen, "rows": [good], "scale": "zero to 3"}
    )
    assert unreadable.status_code == 400
    assert "scale" in unreadable.json["error"]["message"]
    missing = api.post("/api/v1/ratings", json={"generation_run": 999, "rows": [good]})
    assert missing.status_code == 404
    typed = api.post(
        "/api/v1/ratings", json={"generation_run": gen, "rows": [{**good, "score": True}]}
    )
    assert typed.status_code == 422
    assert api.post("/api/v1/ratings", json={"generation_run": gen, "rows": []}).status_code == 422
    assert ratings_stored(api) == 0
