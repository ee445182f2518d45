"""Campaigns over HTTP against the real Label Studio (the session's server): create, status,
a pull that runs as a job, then the export, gold items, a review campaign and annotators.
Scores are given by hand through Label Studio's own API: two annotators rate every sampled
item, one 2 and the other 4."""

from __future__ import annotations

import csv
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from annotation.labelstudio.annotators import add_annotator
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.service import LabelStudioService
from judge.store.engine import make_engine
from judge.store.tables import HumanRating, Item
from server import create_app
from server.auth import create_key
from server.jobs.queue import Worker
from tests.annotation.labelstudio.conftest import shared_labelstudio
from tests.server.cli.test_campaign_cli import _target
from tests.support import stores
from tests.support.factories import make_settings

pytestmark = pytest.mark.labelstudio
TOKEN_ENV = "FJ_TEST_API_CAMPAIGN_TOKEN"


@pytest.fixture(scope="session")
def labelstudio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioService]:
    yield from shared_labelstudio(tmp_path_factory)


@pytest.fixture
def api(
    tmp_path: Path,
    labelstudio: LabelStudioService,
    monkeypatch: pytest.MonkeyPatch,
    judged_s1_template: stores.Judged,
) -> Iterator[tuple[Any, Any, dict[str, str], int]]:
    """The 18 S1 items answered and judged through the stub (a copy of the session's
    template, tests/support/stores.py), the app over them and a member's key."""
    jud = judged_s1_template
    db_url = stores.copy_store(jud.path, tmp_path / "fairjudge.db")
    engine = make_engine(db_url)
    monkeypatch.setenv(TOKEN_ENV, labelstudio.connection().token)
    settings = make_settings(jud.base_url, db_url)
    settings = settings.model_copy(
        update={
            "state_dir": str(tmp_path / "state"),
            "labelstudio": settings.labelstudio.model_copy(
                update={"url": labelstudio.url, "token_env": TOKEN_ENV}
            ),
            "server": settings.server.model_copy(update={"job_poll_s": 0.05}),
        }
    )
    run = jud.judge_run_id
    _, key = create_key(engine, "member", "member")
    app = create_app({"SETTINGS": settings, "TESTING": True})
    yield app.test_client(), engine, {"Authorization": f"Bearer {key}"}, run
    engine.dispose()


def test_create_status_and_pull_a_campaign_over_http(
    api: tuple[Any, Any, dict[str, str], int], labelstudio: LabelStudioService
) -> None:
    client, engine, key, run = api
    body = {"judge_run": run, "size": 4, "annotators": 2, "seed": 3, "name": "api-campaign"}
    made = client.post("/api/v1/campaigns", json=body, headers=key)
    assert made.status_code == 201, made.json
    assert (made.json["size"], made.json["population"], made.json["imported"]) == (4, 18, 4)
    again = client.post("/api/v1/campaigns", json=body, headers=key)
    assert again.json["imported"] == 0  # idempotent: nothing sent twice

    project = made.json["project"]
    admin = LabelStudioClient(labelstudio.url, labelstudio.connection().token)
    labelstudio_rater = "api.rater@example.org"
    with Session(engine) as session:
        person = add_annotator(session, admin, labelstudio_rater, service=labelstudio)
        session.commit()
    assert person.password is not None
    rater = LabelStudioClient(
        labelstudio.url, labelstudio.login_token(labelstudio_rater, person.password)
    )
    target = _target(admin, project)
    for who, score in ((admin, 2), (rater, 4)):
        for task in admin.export_tasks(project):
            value = {"choices": [str(score)]}
            result = [
                {"from_name": "score_ICS", "to_name": target, "type": "choices", "value": value}
            ]
            who.annotate(task["id"], result)

    status = client.get("/api/v1/campaigns/api-campaign", headers=key).json
    assert sorted(a["done"] for a in status["annotators"]) == [4, 4]

    pulled = client.post("/api/v1/campaigns/api-campaign/pull", headers=key)
    assert pulled.status_code == 202 and pulled.json["kind"] == "pull"
    stop = threading.Event()
    settings = client.application.config["SETTINGS"]
    worker = threading.Thread(target=Worker(engine, settings, stop).run, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while (job := client.get(f"/api/v1/jobs/{pulled.json['id']}", headers=key).json)[
            "status"
        ] not in ("finished", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        stop.set()
        worker.join(timeout=10)
    assert job["status"] == "finished", job["error"]
    assert job["result"]["added"] == 4 * 2  # 4 items x 2 annotators x ICS
    with Session(engine) as session:
        scores = sorted(r.score for r in session.exec(select(HumanRating)).all())
    assert scores == [2.0] * 4 + [4.0] * 4
    listed = client.get("/api/v1/campaigns", headers=key).json
    assert [(c["name"], c["ratings"]) for c in listed] == [("api-campaign", 8)]
    # The run's agreement over HTTP now has something to compare with.
    assert client.get(f"/api/v1/judge-runs/{run}/agreement", headers=key).status_code == 200
    assert client.get("/api/v1/campaigns/nope", headers=key).status_code == 404

    # -- what the CLI's campaign export, gold, review and annotators do, over HTTP --
    exported = client.get("/api/v1/campaigns/api-campaign/ratings.csv", headers=key)
    assert exported.status_code == 200 and exported.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(exported.get_data(as_text=True))))
    # the same 8 ratings as the SQL read above, in the `ratings import` columns
    assert sorted(float(r["score"]) for r in rows) == scores
    assert len({r["rater"] for r in rows}) == 2 and labelstudio_rater in {r["rater"] for r in rows}
    assert set(rows[0]) == {"item_id", "rubric", "rater", "score", "rationale"}
    sampled = {r["item_id"] for r in rows}

    people = client.get("/api/v1/annotators", headers=key).json
    mine = next(p for p in people if p["email"] == labelstudio_rater)
    assert mine["campaigns"] == {"api-campaign": "4/4"}  # rated 4 of the 4 sampled items
    _, admin_key = create_key(engine, "boss", "admin")
    boss = {"Authorization": f"Bearer {admin_key}"}
    person = {"email": "second.rater@example.org", "name": "Second"}
    assert client.post("/api/v1/annotators", json=person, headers=key).status_code == 403
    added = client.post("/api/v1/annotators", json=person, headers=boss)
    assert added.status_code == 201 and added.json["created"], added.json
    again = client.post("/api/v1/annotators", json=person, headers=boss)
    assert again.status_code == 200 and not again.json["created"]
    assert added.json["user_id"] == again.json["user_id"]

    with Session(engine) as session:
        s1 = sorted(session.exec(select(Item.key).where(Item.stage == "S1")).all())
    outside = next(k for k in s1 if k not in sampled)
    gold = {"rows": [{"item_id": outside, "rubric": "ICS", "score": 3}]}
    made_gold = client.post("/api/v1/campaigns/api-campaign/gold", json=gold, headers=key)
    assert made_gold.status_code == 201, made_gold.json
    assert (made_gold.json["added"], made_gold.json["imported"]) == (1, 1)
    assert (
        client.post("/api/v1/campaigns/api-campaign/gold", json=gold, headers=key).json["added"]
        == 0
    )
    # Label Studio itself now holds the 4 sampled tasks and the gold one
    assert len(admin.export_tasks(project)) == 5
    inside = {"rows": [{"item_id": next(iter(sampled)), "rubric": "ICS", "score": 3}]}
    refused = client.post("/api/v1/campaigns/api-campaign/gold", json=inside, headers=key)
    assert refused.status_code == 400 and "/tmp" not in refused.json["error"]["message"]

    review = {"dataset": "sample", "items": s1[:2], "name": "api-review"}
    reviewed = client.post("/api/v1/reviews", json=review, headers=key)
    assert reviewed.status_code == 201, reviewed.json
    assert (reviewed.json["campaign"], reviewed.json["imported"]) == ("api-review", 2)
    assert len(admin.export_tasks(reviewed.json["project"])) == 2
