"""A campaign's dashboard page against the real Label Studio (the session's server): a rating
campaign of four S1 answers, rated by two annotators through Label Studio's own API (one
gives 2 to every item, the other 4 to three of them), then the page's progress, items short
of ratings, flags and link into Label Studio against ``GET /api/v1/campaigns/NAME``.

Tests that use the session's Label Studio run in one xdist worker: tests/conftest.py lists
this module in ``SERVER_MODULES``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from annotation.labelstudio.annotators import add_annotator
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.service import LabelStudioService
from judge.store.engine import make_engine
from server import create_app, usecases
from server.auth import create_key
from tests.annotation.labelstudio.conftest import shared_labelstudio
from tests.server.cli.test_campaign_cli import _target
from tests.server.dashboard.helpers import Key, api_get, fields, sign_in
from tests.support import stores
from tests.support.factories import make_settings

pytestmark = pytest.mark.labelstudio
TOKEN_ENV = "FJ_TEST_DASHBOARD_CAMPAIGN_TOKEN"
SIZE = 4


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioService]:
    yield from shared_labelstudio(tmp_path_factory)


def test_a_campaigns_page_matches_the_api(
    tmp_path: Path,
    label_studio: LabelStudioService,
    monkeypatch: pytest.MonkeyPatch,
    judged_s1_template: stores.Judged,
) -> None:
    jud = judged_s1_template
    db_url = stores.copy_store(jud.path, tmp_path / "fairjudge.db")
    engine = make_engine(db_url)
    monkeypatch.setenv(TOKEN_ENV, label_studio.connection().token)
    settings = make_settings(jud.base_url, db_url)
    settings = settings.model_copy(
        update={
            "state_dir": str(tmp_path / "state"),
            "labelstudio": settings.labelstudio.model_copy(
                update={"url": label_studio.url, "token_env": TOKEN_ENV}
            ),
        }
    )
    name = f"dash-{uuid.uuid4().hex[:6]}"
    with Session(engine) as session:
        made, _ = usecases.create_campaign(
            session,
            settings,
            judge_run_id=jud.judge_run_id,
            size=SIZE,
            annotators=2,
            seed=3,
            name=name,
        )
        project, project_url = made.to_dict()["project"], made.to_dict()["url"]
        session.commit()
    admin = LabelStudioClient(label_studio.url, label_studio.connection().token)
    rater_email = f"{name}@example.org"
    with Session(engine) as session:
        person = add_annotator(session, admin, rater_email, service=label_studio)
        session.commit()
    assert person.password is not None
    rater = LabelStudioClient(
        label_studio.url, label_studio.login_token(rater_email, person.password)
    )
    target = _target(admin, project)
    tasks = admin.export_tasks(project)
    for who, score, rated in ((admin, 2, tasks), (rater, 4, tasks[:-1])):
        for task in rated:
            value = {"choices": [str(score)]}
            result = [
                {"from_name": "score_ICS", "to_name": target, "type": "choices", "value": value}
            ]
            who.annotate(task["id"], result)

    _, raw = create_key(engine, "member", "member")
    key = Key("member", raw)
    app = create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "test-secret"})
    client = app.test_client()
    assert sign_in(client, raw).status_code == 302
    listing = client.get("/campaigns").text
    assert fields(listing, "campaign", name)["size"] == str(SIZE)

    page = client.get(f"/campaigns/{name}")
    assert page.status_code == 200, page.text
    status: dict[str, Any] = api_get(client, f"/api/v1/campaigns/{name}", key)
    assert fields(page.text, "campaign", name)["tasks"] == str(status["tasks"]) == str(SIZE)
    # Progress per annotator: SIZE done by one, SIZE - 1 by the other, as the API says.
    progress = {
        email: done for email, done in re.findall(r"<title>([^:<]+): (\d+) of \d+", page.text)
    }
    assert progress == {a["email"]: str(a["done"]) for a in status["annotators"]}
    assert sorted(int(d) for d in progress.values()) == [SIZE - 1, SIZE]
    # One item is short of its two ratings.
    assert (
        re.search(r'id="short-count">(\d+)<', page.text).group(1)
        == str(  # type: ignore[union-attr]
            len(status["items_short"])
        )
        == "1"
    )
    for annotator in status["annotators"]:
        shown = fields(page.text, "annotator", annotator["email"])
        assert shown["flags"] == (", ".join(annotator["flags"]) or "none")
    link = re.search(r'<a href="([^"]+)" id="labelstudio-link"', page.text)
    assert link is not None
    assert link.group(1) == project_url  # where `campaign create` says the project is
    engine.dispose()
