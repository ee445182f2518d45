"""The dashboard's pairwise page: "none imported yet" on an empty store, then, once a file is
imported (the store changed, so the kept figures are computed again), each judge's figures as
the API gives them, on the hand-worked file of tests/server/api/test_pairwise_api.py; and an
import leaves a judge run's version (its pages' kept figures) alone."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from judge.store.engine import make_engine
from server import create_app
from server.auth import create_key
from server.usecases.dashboard import run_version, store_version
from server.usecases.pairwise import import_judgments
from tests.server.api.test_pairwise_api import ROWS
from tests.server.dashboard.helpers import Key, Store, api_get, fields, sign_in
from tests.support.factories import make_settings


def test_the_page_before_and_after_an_import(migrated_db_url: str, tmp_path: Path) -> None:
    engine = make_engine(migrated_db_url)
    settings = make_settings("http://127.0.0.1:9/v1", migrated_db_url)
    app = create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "test-secret"})
    key = Key("member", create_key(engine, "member", "member")[1])
    client = app.test_client()
    assert sign_in(client, key.raw).status_code == 302
    try:
        empty = client.get("/pairwise")
        assert empty.status_code == 200 and 'id="no-pairwise"' in empty.text
        path = tmp_path / "mine.csv"
        lines = ["question,model_a,model_b,verdict"] + [",".join(r) for r in ROWS]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        import_judgments(engine, path, "csv", judge="j")
        page = client.get("/pairwise")
        assert page.status_code == 200
        shown = fields(page.text, "judge", "j")
        # hand-worked in the API test: 6 pairs, PC 4/5, PF -1/6, one repetition (no RS)
        assert shown["pairs"] == "6"
        assert shown["pc"].startswith("0.800 [") and shown["pf"].startswith("-0.167 [")
        assert (shown["rs"], shown["unreadable"]) == ("n/a", "1")
        body = api_get(client, "/api/v1/pairwise/position", key)
        (j,) = body["judges"]
        low, high = j["position_consistency_ci"]
        assert shown["pc"] == f"0.800 [{low:.3f}, {high:.3f}]"  # the API's interval
        apart = client.get("/pairwise?inconsistent=apart")
        assert "kept apart" in apart.text
    finally:
        engine.dispose()


def test_an_import_changes_the_store_not_a_judge_runs_version(store: Store, tmp_path: Path) -> None:
    # a judge run's pages read no pairwise row, so their kept figures stay current; the
    # pairwise page's key (the store's version) does change
    with Session(store.engine) as session:
        run_before = run_version(session, store.judge_run_id)
        store_before = store_version(session)
    path = tmp_path / "mine.csv"
    lines = ["question,model_a,model_b,verdict"] + [",".join(r) for r in ROWS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    import_judgments(store.engine, path, "csv", judge="version-check")
    with Session(store.engine) as session:
        assert run_version(session, store.judge_run_id) == run_before
        assert store_version(session) != store_before
