"""The JSON API through Flask's test client, on a real store: SQLite and PostgreSQL.

Expected values come from the sample dataset file read here with ``json`` (not through the
API), from SQL on the store, or from the domain function the CLI calls.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func
from sqlmodel import Session, select

from judge.config import Settings
from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Judgment, Response
from server import create_app, usecases
from server.auth import create_key, revoke_key
from server.tables import Job
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

SAMPLE_ITEMS = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


@dataclass
class Api:
    client: FlaskClient
    settings: Settings
    admin: dict[str, str]
    member: dict[str, str]

    def get(self, path: str, **kw: Any) -> Any:
        return self.client.get(path, headers=kw.pop("headers", self.member), **kw)

    def post(self, path: str, **kw: Any) -> Any:
        return self.client.post(path, headers=kw.pop("headers", self.member), **kw)

    def close(self) -> None:
        """Close the app's database connections (a PostgreSQL connection left open is a
        ResourceWarning when it is collected)."""
        self.client.application.extensions["fairjudge_engine"].dispose()


def run_jobs(api: Api) -> list[str]:
    """Run every queued job to its end, as the worker would (the same function); their
    statuses."""
    from server.jobs import queue

    engine = make_engine(api.settings.database_url)
    try:
        with Session(engine) as session:
            ids = queue.runnable(session)
        return [queue.run_job(engine, api.settings, job_id) for job_id in ids]
    finally:
        engine.dispose()


def jobs_stored(api: Api) -> int:
    """How many jobs the store holds (of any state): what a refused request must leave
    unchanged."""
    engine = make_engine(api.settings.database_url)
    try:
        with Session(engine) as session:
            return int(session.exec(select(func.count()).select_from(Job)).one())
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    # SQLite: a copy of the session's empty migrated store (tests/support/stores.py).
    name = "migrated_db_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


def make_api(url: str, stub: StubServer, tmp_path: Any, **server: Any) -> Api:
    settings = make_settings(stub.base_url, url)
    settings = settings.model_copy(
        update={
            "state_dir": str(tmp_path / "state"),
            "server": settings.server.model_copy(update=server),
        }
    )
    engine = make_engine(url)
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    _, admin = create_key(engine, "admin", "admin")
    _, member = create_key(engine, "member", "member")
    engine.dispose()
    app = create_app({"SETTINGS": settings, "TESTING": True})
    return Api(
        app.test_client(),
        settings,
        {"Authorization": f"Bearer {admin}"},
        {"Authorization": f"Bearer {member}"},
    )


@pytest.fixture
def api(store_url: str, stub: StubServer, tmp_path: Any) -> Iterator[Api]:
    made = make_api(store_url, stub, tmp_path)
    yield made
    made.close()


def routes(api: Api) -> list[tuple[str, str]]:
    """Every (method, OpenAPI-style path) the app serves under /api/v1, from Flask's map."""
    app = api.client.application
    out = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1/") or rule.rule.startswith("/api/v1/docs"):
            continue
        if rule.rule == "/api/v1/openapi.json":
            continue
        path = re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule.rule)
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            out.append((method.lower(), path))
    return out


def test_the_openapi_document_lists_every_route(api: Api) -> None:
    document = api.client.get("/api/v1/openapi.json").json
    assert document["openapi"].startswith("3.")
    documented = {(m, p) for p, ops in document["paths"].items() for m in ops}
    served = set(routes(api))
    assert served - documented == set(), "routes missing from the OpenAPI document"
    # Counted by hand in server/api/: health 1, keys 3, datasets 5, responses 1, endpoints 2,
    # runs 7, jobs 6 (with the dry run), judgments 1, reports 13 (a run's report, its
    # diagnostics, compare and coverage, 3 formats each, and compare/paired.json), rubrics 2,
    # ratings 2 (import, agreement on posted files), campaigns 9 (with export, gold, reviews,
    # annotators x 2), audits 14 (with a suite's analysis of posted CSV, BBQ's of posted
    # predictions, the follow-up campaign and its pull, the follow-up classes' corrected
    # estimates), estimates 3
    # (corrected figures, their transport across models, the rating plan), alt-test 2 (a
    # stored run's, files), juries 1,
    # pairwise 2 (an import of judgments sent as text, their position figures), gates 2 (the
    # last verdicts, a posted gates file checked), drift 1.
    assert len(served) == 77
    assert api.client.get("/api/v1/docs/swagger").status_code == 200  # browsable docs


def test_every_route_but_health_needs_a_valid_key(api: Api) -> None:
    for method, path in routes(api):
        url = re.sub(r"\{[a-z_]+\}", "1", path)
        for headers in ({}, {"Authorization": "Bearer fj_not-a-key"}, {"Authorization": "x"}):
            reply = api.client.open(url, method=method.upper(), headers=headers)
            if path == "/api/v1/health":
                assert reply.status_code == 200
                continue
            assert reply.status_code == 401, (method, path, reply.json)
            assert set(reply.json) == {"error"} and reply.json["error"]["status"] == 401
            assert reply.headers["WWW-Authenticate"].startswith("Bearer")


def test_members_read_admins_manage_keys(api: Api) -> None:
    assert api.get("/api/v1/keys").status_code == 403
    assert "only an admin key" in api.get("/api/v1/keys").json["error"]["message"]
    assert api.post("/api/v1/keys", json={"name": "x"}).status_code == 403
    listed = api.get("/api/v1/keys", headers=api.admin).json
    assert [k["name"] for k in listed] == ["admin", "member"]
    assert all("key" not in k and "key_hash" not in k for k in listed)  # never the secret
    made = api.post("/api/v1/keys", headers=api.admin, json={"name": "bot", "role": "member"})
    assert made.status_code == 201 and made.json["key"].startswith("fj_")
    bot = {"Authorization": f"Bearer {made.json['key']}"}
    assert api.get("/api/v1/jobs", headers=bot).status_code == 200
    assert api.client.delete("/api/v1/keys/bot", headers=api.admin).json["revoked_at"]
    refused = api.get("/api/v1/jobs", headers=bot)
    assert refused.status_code == 401 and "revoked" in refused.json["error"]["message"]


def test_revoked_key_is_refused(store_url: str, stub: StubServer, tmp_path: Any) -> None:
    api = make_api(store_url, stub, tmp_path)
    engine = make_engine(store_url)
    revoke_key(engine, "member")
    engine.dispose()
    assert api.get("/api/v1/datasets").status_code == 401
    api.close()


def test_datasets_and_items_are_paginated(api: Api) -> None:
    stages = Counter(item["stage"] for item in SAMPLE_ITEMS)  # 18 per stage, read off the file
    listed = api.get("/api/v1/datasets").json
    assert [(d["name"], d["items"]) for d in listed] == [("sample", len(SAMPLE_ITEMS))]
    assert api.get("/api/v1/datasets/sample").json["stages"] == dict(stages)
    first = api.get("/api/v1/datasets/sample/items?limit=50").json
    rest = api.get("/api/v1/datasets/sample/items?limit=50&offset=50").json
    assert (first["total"], len(first["items"]), len(rest["items"])) == (72, 50, 22)
    keys = [i["key"] for i in first["items"] + rest["items"]]
    assert keys == [item["id"] for item in SAMPLE_ITEMS]  # file order, nothing twice
    s3 = api.get("/api/v1/datasets/sample/items?stage=S3&limit=500").json
    assert s3["total"] == stages["S3"]
    one = api.get(f"/api/v1/datasets/sample/items/{SAMPLE_ITEMS[0]['id']}").json
    assert one["stage"] == SAMPLE_ITEMS[0]["stage"]
    too_big = api.get("/api/v1/datasets/sample/items?limit=501")
    assert too_big.status_code == 422 and "limit" in too_big.json["error"]["message"]


def test_create_a_dataset_from_json_items(api: Api) -> None:
    items = SAMPLE_ITEMS[:3]
    made = api.post("/api/v1/datasets", json={"name": "mine", "items": items})
    assert made.status_code == 201 and made.json["added"] == 3
    again = api.post("/api/v1/datasets", json={"name": "mine", "items": items})
    assert (again.json["added"], again.json["unchanged"]) == (0, 3)
    bad = api.post("/api/v1/datasets", json={"name": "mine", "items": [{"id": "x"}]})
    assert bad.status_code == 400
    assert api.get("/api/v1/datasets/mine").json["items"] == 3  # nothing lost, nothing added


@pytest.mark.parametrize(
    ("send", "status", "fragment"),
    [
        ({"data": "{not json", "content_type": "application/json"}, 400, "not valid JSON"),
        ({"data": "kind=judge", "content_type": "text/plain"}, 400, "Content-Type"),
        ({"json": {"kind": "judge", "params": {}, "extra": 1}}, 422, "extra: Extra inputs"),
        ({"json": {"kind": 5}}, 422, "kind: Input should be a valid string"),
        ({"json": {"kind": "bake"}}, 422, "kind: String should match"),
        ({"json": {"kind": "judge", "params": {"generation_run_id": "x"}}}, 400, "integer"),
        ({"json": {"kind": "judge", "params": {"generation_run_id": 99}}}, 404, "no generation"),
        # Every body of the API is a JSON object: anything else is refused before the schema.
        ({"json": [1, 2]}, 400, "the body is a JSON list"),
    ],
)
def test_bad_requests_get_one_error_shape_and_store_nothing(
    api: Api, send: dict[str, Any], status: int, fragment: str
) -> None:
    reply = api.post("/api/v1/jobs", **send)
    assert reply.status_code == status, reply.json
    assert set(reply.json) == {"error"} and reply.json["error"]["status"] == status
    assert fragment in reply.json["error"]["message"]
    with Session(make_engine(api.settings.database_url)) as session:
        assert session.exec(select(func.count()).select_from(Job)).one() == 0


@pytest.mark.parametrize(
    ("path", "status", "fragment"),
    [
        ("/api/v1/datasets/nope", 404, "no dataset named 'nope'"),
        ("/api/v1/judge-runs/99/report.json", 404, "no judge run 99"),
        ("/api/v1/jobs/7", 404, "no job 7"),
        ("/api/v1/unknown", 404, "not found"),
        ("/api/v1/judge-runs/0", 422, "greater than or equal to 1"),
    ],
)
def test_missing_things_get_one_error_shape(
    api: Api, path: str, status: int, fragment: str
) -> None:
    reply = api.get(path)
    assert reply.status_code == status
    assert set(reply.json) == {"error"} and reply.json["error"]["status"] == status
    assert fragment in reply.json["error"]["message"]


def test_an_oversize_body_is_413_naming_the_limit(
    db_url: str, stub: StubServer, tmp_path: Any
) -> None:
    api = make_api(db_url, stub, tmp_path, max_body_mb=0.01)  # 10,485.76 bytes
    reply = api.post("/api/v1/jobs", json={"kind": "judge", "params": {"x": "y" * 20_000}})
    assert reply.status_code == 413
    assert "limit of 0.01 MiB" in reply.json["error"]["message"]


def test_job_lifecycle_without_a_worker(api: Api) -> None:
    engine = make_engine(api.settings.database_url)
    gen = usecases.generate(
        engine, api.settings, usecases.GenerateRequest(dataset="sample", limit=2)
    )
    made = api.post("/api/v1/jobs", json={"kind": "judge", "params": {"generation_run_id": 1}})
    assert made.status_code == 201 and made.json["status"] == "queued"
    assert made.json["params"] == {"generation_run_id": gen.run_id}
    job = made.json["id"]
    assert api.post(f"/api/v1/jobs/{job}/cancel").json["status"] == "cancelled"
    assert api.post(f"/api/v1/jobs/{job}/cancel").status_code == 409
    assert api.post(f"/api/v1/jobs/{job}/resume").json["status"] == "queued"
    listed = api.get("/api/v1/jobs?status=queued").json
    assert listed["total"] == 1 and listed["items"][0]["id"] == job
    engine.dispose()


def test_results_over_http_match_the_store(api: Api) -> None:
    engine = make_engine(api.settings.database_url)
    gen = usecases.generate(
        engine, api.settings, usecases.GenerateRequest(dataset="sample", limit=18)
    )  # the 18 S1 items
    run = usecases.judge(
        engine, api.settings, usecases.JudgeRequest(generation_run_id=gen.run_id)
    ).run_id
    with Session(engine) as s:
        scores = Counter(j.score for j in s.exec(select(Judgment)).all())
        answers = s.exec(select(func.count()).select_from(Response)).one()
    engine.dispose()
    listed = api.get(f"/api/v1/judgments?judge_run={run}&limit=5").json
    assert listed["total"] == sum(scores.values()) == 18 and len(listed["items"]) == 5
    for score, n in scores.items():
        assert api.get(f"/api/v1/judgments?judge_run={run}&score={score}").json["total"] == n
    assert api.get(f"/api/v1/judgments?judge_run={run}&status=unscored").json["total"] == 0
    key = listed["items"][0]["item_key"]
    assert api.get(f"/api/v1/judgments?item={key}").json["total"] == 1
    assert api.get(f"/api/v1/generation-runs/{gen.run_id}").json["answers"] == answers == 18
    assert api.get(f"/api/v1/judge-runs/{run}").json["scored"] == 18

    # the report the CLI writes, over HTTP: JSON, HTML and CSV
    report = api.get(f"/api/v1/judge-runs/{run}/report.json").json
    (share,) = [r for r in report["metrics_overall"] if r["metric"] == "S1 ICS share>=3 (%)"]
    expected = sum(n for s, n in scores.items() if s is not None and s >= 3) / 18 * 100
    assert share["value"] == pytest.approx(expected)
    metrics = api.get(f"/api/v1/judge-runs/{run}/metrics").json
    (same,) = [r for r in metrics["overall"] if r["metric"] == "S1 ICS share>=3 (%)"]
    assert same["value"] == pytest.approx(expected)
    page = api.get(f"/api/v1/judge-runs/{run}/report.html")
    assert page.mimetype == "text/html" and b"judge run" in page.data
    table = api.get(f"/api/v1/judge-runs/{run}/report.csv").data.decode().splitlines()
    assert table[0].startswith("model,") and len(table) > 1
    assert api.get(f"/api/v1/judge-runs/{run}/report.csv?table=nope").status_code == 404
    agreement = api.get(f"/api/v1/judge-runs/{run}/agreement")
    assert agreement.status_code == 404 and "no human ratings" in agreement.json["error"]["message"]


def test_answers_produced_elsewhere_over_http(api: Api) -> None:
    s1 = [item for item in SAMPLE_ITEMS if item["stage"] == "S1"][:3]
    rows = [{"item_id": i["id"], "part": "answer", "text": f"answer {n}"} for n, i in enumerate(s1)]
    made = api.post("/api/v1/responses", json={"dataset": "sample", "model": "m", "rows": rows})
    assert made.status_code == 201 and (made.json["added"], made.json["unchanged"]) == (3, 0)
    again = api.post("/api/v1/responses", json={"dataset": "sample", "model": "m", "rows": rows})
    assert again.status_code == 200 and (again.json["added"], again.json["unchanged"]) == (0, 3)
    bad = rows + [{"item_id": "nope", "part": "answer", "text": "x"}, rows[0]]
    refused = api.post("/api/v1/responses", json={"dataset": "sample", "model": "m", "rows": bad})
    assert refused.status_code == 400
    problems = refused.json["error"]["problems"]
    assert any("row 4" in p and "nope" in p for p in problems)  # the unknown item
    assert any("row 5" in p for p in problems)  # the duplicate of row 1
    run = api.get(f"/api/v1/generation-runs/{made.json['generation_run_id']}").json
    assert (run["answers"], run["source"]) == (3, "imported")  # nothing of the bad batch
