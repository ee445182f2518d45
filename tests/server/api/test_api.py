"""The JSON API on a real temporary SQLite store; one error shape for every failure."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from sqlmodel import Session, select

from judge.config import Settings
from judge.data.catalog import import_items
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Judgment
from server import create_app, services
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer


@pytest.fixture
def client(db_url: str) -> FlaskClient:
    settings = Settings.model_validate(
        {
            "database_url": db_url,
            "endpoints": {"embedded": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}},
        }
    )
    with session_scope(make_engine(db_url)) as session:
        import_items(session, SAMPLE, "sample")
    return create_app({"SETTINGS": settings, "TESTING": True}).test_client()


def test_datasets_and_runs(client: FlaskClient) -> None:
    assert client.get("/api/health").json == {"status": "ok"}
    assert client.get("/api/datasets").json[0]["items"] == 72
    assert client.get("/api/datasets/sample").json["stages"]["S3"] == 18
    assert client.get("/api/runs").json == {"generation_runs": [], "judge_runs": []}


@pytest.mark.parametrize(
    ("path", "status", "fragment"),
    [
        ("/api/datasets/nope", 404, "no dataset named 'nope'"),
        ("/api/judge-runs/99/report", 404, "no judge run 99"),
        ("/api/unknown", 404, "was not found on the server"),
    ],
)
def test_one_error_shape(client: FlaskClient, path: str, status: int, fragment: str) -> None:
    reply = client.get(path)
    assert reply.status_code == status
    assert set(reply.json) == {"error"} and reply.json["error"]["status"] == status
    assert fragment in reply.json["error"]["message"]


def test_report_route_serves_the_runs_report(db_url: str, stub: StubServer) -> None:
    settings = make_settings(stub.base_url, db_url)
    engine = make_engine(db_url)
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    gen = services.generate(engine, settings, "sample", limit=18)  # the 18 S1 items
    summary = services.judge(engine, settings, gen.run_id)
    with Session(engine) as s:
        scores = [j.score for j in s.exec(select(Judgment)).all()]
    client = create_app({"SETTINGS": settings, "TESTING": True}).test_client()
    reply = client.get(f"/api/judge-runs/{summary.run_id}/report")
    assert reply.status_code == 200
    body = reply.json
    # The overall S1 ICS share >= 3, recomputed from the stored scores by hand.
    (overall,) = [r for r in body["metrics_overall"] if r["metric"] == "S1 ICS share>=3 (%)"]
    assert overall["value"] == pytest.approx(sum(s >= 3 for s in scores) / 18 * 100)
    assert overall["n_scored"] == 18 and body["judge_run"]["status"] == "finished"
    assert len(body["item_scores"]) == 18 and len(body["items"]) == 18
