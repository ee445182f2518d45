"""The dashboard's run page opens with the judge's standing (issue 42): on a run nobody
qualified it says plainly, once, that the judge is not validated; once a qualification
covers it, the same page says validated, with how, when and on how many ratings."""

from __future__ import annotations

import uuid
from pathlib import Path

from sqlmodel import Session

from judge.config_qualify import QualifyConfig
from judge.store.engine import make_engine
from server import create_app
from server.auth import create_key
from server.usecases.qualify import QualifyRequest, qualify
from tests.server.dashboard.helpers import sign_in
from tests.support.factories import make_settings
from tests.support.planted_judge import good_judge, plant


def test_the_run_page_opens_with_the_standing(migrated_db_url: str, tmp_path: Path) -> None:
    engine = make_engine(migrated_db_url)
    judge, raters = good_judge(80, seed=9)
    with Session(engine) as session:
        p = plant(session, judge, raters)
    settings = make_settings("http://127.0.0.1:9/v1", migrated_db_url)
    _, raw = create_key(engine, f"m-{uuid.uuid4().hex[:6]}", "member")
    app = create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "test-secret"})
    client = app.test_client()
    assert sign_in(client, raw).status_code == 302
    try:
        page = client.get(f"/judge-runs/{p.judge_run_id}")
        assert page.status_code == 200, page.text[:300]
        text = page.text
        assert text.count("NOT VALIDATED for any rubric it scored") == 1  # said once
        # ... and above the figures: before "The answer" section
        assert text.index('id="standing-line"') < text.index('id="answer"')
        assert 'data-rubric="ICS" data-state="not validated"' in text

        with Session(engine) as session:
            qualify(session, QualifyRequest(judge_run=p.judge_run_id, rubric="ICS"),
                    QualifyConfig(n_bootstrap=200))  # fmt: skip
        again = client.get(f"/judge-runs/{p.judge_run_id}").text
        assert "NOT VALIDATED" not in again
        assert "Judge standing: validated for every rubric (ICS)." in again
        assert 'data-rubric="ICS" data-state="validated"' in again
        assert "on 80 ratings" in again
    finally:
        app.extensions["fairjudge_engine"].dispose()
        engine.dispose()


def test_the_checks_page_carries_the_standing_too(migrated_db_url: str, tmp_path: Path) -> None:
    """The judge's checks page says the same as the run page: not validated before a
    qualification, validated (on how many ratings) after, above the checks' figures."""
    engine = make_engine(migrated_db_url)
    judge, raters = good_judge(80, seed=9)
    with Session(engine) as session:
        p = plant(session, judge, raters)
    settings = make_settings("http://127.0.0.1:9/v1", migrated_db_url)
    _, raw = create_key(engine, f"m-{uuid.uuid4().hex[:6]}", "member")
    app = create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "test-secret"})
    client = app.test_client()
    assert sign_in(client, raw).status_code == 302
    try:
        page = client.get(f"/judge-runs/{p.judge_run_id}/checks")
        assert page.status_code == 200, page.text[:300]
        text = page.text
        assert text.count("NOT VALIDATED for any rubric it scored") == 1
        assert text.index('id="standing-line"') < text.index('id="check-summary"')
        assert 'data-rubric="ICS" data-state="not validated"' in text
        # Fail closed when asked, on this page and on the agreement page (409, the reason).
        for page_name in ("checks", "agreement"):
            refused = client.get(f"/judge-runs/{p.judge_run_id}/{page_name}?require_qualified=1")
            assert refused.status_code == 409, (page_name, refused.status_code)
            assert f"judge run {p.judge_run_id} is not qualified for ICS" in refused.text

        with Session(engine) as session:
            qualify(session, QualifyRequest(judge_run=p.judge_run_id, rubric="ICS"),
                    QualifyConfig(n_bootstrap=200))  # fmt: skip
        for page_name in ("checks", "agreement"):
            shown = client.get(f"/judge-runs/{p.judge_run_id}/{page_name}?require_qualified=1")
            assert shown.status_code in (200, 202), (page_name, shown.status_code)
        again = client.get(f"/judge-runs/{p.judge_run_id}/checks").text
        assert "NOT VALIDATED" not in again
        assert "Judge standing: validated for every rubric (ICS)." in again
        assert 'data-rubric="ICS" data-state="validated"' in again
        assert "on 80 ratings" in again
    finally:
        app.extensions["fairjudge_engine"].dispose()
        engine.dispose()


def test_the_agreement_page_carries_the_standing(migrated_db_url: str, tmp_path: Path) -> None:
    """The agreement page says the judge's standing above its figures and beside each
    judge's row: not validated before a qualification, validated after."""
    engine = make_engine(migrated_db_url)
    judge, raters = good_judge(60, seed=9)
    with Session(engine) as session:
        p = plant(session, judge, raters)
    settings = make_settings("http://127.0.0.1:9/v1", migrated_db_url)
    _, raw = create_key(engine, f"m-{uuid.uuid4().hex[:6]}", "member")
    app = create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "test-secret"})
    client = app.test_client()
    assert sign_in(client, raw).status_code == 302
    path = f"/judge-runs/{p.judge_run_id}/agreement?n_bootstrap=50"
    try:
        page = client.get(path)
        assert page.status_code == 200, page.text[:300]
        text = page.text
        assert text.count("NOT VALIDATED for any rubric it scored") == 1
        assert text.index('id="standing-line"') < text.index('id="ceiling"')
        assert 'data-rubric="ICS" data-state="not validated"' in text
        assert '<td data-k="judge_standing">not validated</td>' in text

        with Session(engine) as session:
            qualify(session, QualifyRequest(judge_run=p.judge_run_id, rubric="ICS"),
                    QualifyConfig(n_bootstrap=200))  # fmt: skip
        again = client.get(path)
        assert again.status_code == 200, again.text[:300]
        assert "NOT VALIDATED" not in again.text
        assert "Judge standing: validated for every rubric (ICS)." in again.text
        assert '<td data-k="judge_standing">validated</td>' in again.text
        assert "on 60 ratings" in again.text
    finally:
        app.extensions["fairjudge_engine"].dispose()
        engine.dispose()
