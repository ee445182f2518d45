"""The JSON API on a real temporary SQLite store; one error shape for every failure."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from judge.config import Settings
from judge.data.catalog import import_items
from judge.store.engine import make_engine, session_scope
from server import create_app
from tests.support.factories import SAMPLE


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
