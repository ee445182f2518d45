"""Campaigns over HTTP against the real Label Studio (the session's server): create, status,
and a pull that runs as a job. Scores are given by hand through Label Studio's own API: two
annotators rate every sampled item, one 2 and the other 4."""

from __future__ import annotations

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
from judge.store.tables import HumanRating
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
        add_annotator(session, admin, labelstudio_rater, service=None)
        session.commit()
    rater = LabelStudioClient(labelstudio.url, labelstudio.user_token(labelstudio_rater))
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
