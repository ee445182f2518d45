"""Figures kept per judge run (``run_version``), brought up to date by the worker's warmer after
a write that is not a job, and the API's agreement, report and diagnostics served kept, or
answered 202 while they are computed, never a request held for them.

Two datasets (``a`` and ``b``: the sample's 18 S1 items each, one ICS judgment per item),
answered and judged against the scripted stub on a real SQLite store; run ``a`` has 2 raters'
ratings of its first 3 items (6 ratings, counted by hand). The reference for a kept figure is
the same figure computed now from the rows by the use case the route calls.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.config import Settings
from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from judge.store.tables import DashboardFigure, Item, Judgment
from server import create_app, usecases
from server.auth import create_key
from server.usecases.dashboard import default_pages, page_key, run_version
from server.usecases.figures import Warmer, read, signing_key, version_text, warm_run
from tests.server.dashboard.helpers import sign_in
from tests.support import stores
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

S1_ITEMS = 18
RATERS = ("r1", "r2")


@dataclass(frozen=True)
class TwoRuns:
    engine: Engine
    settings: Settings
    runs: dict[str, int]
    generations: dict[str, int]
    key: str


def _rows(engine: Engine, run: int, raters: tuple[str, ...], items: int) -> list[dict[str, Any]]:
    """Ratings of the run's first ``items`` judged items by ``raters`` (score 3 then 4)."""
    with Session(engine) as session:
        found = session.exec(
            select(Item.key, Judgment.rubric)
            .join(Item, col(Item.id) == col(Judgment.item_id))
            .where(col(Judgment.judge_run_id) == run)
            .order_by(col(Judgment.id))
            .limit(items)
        ).all()
    return [
        {"item_id": key, "rubric": rubric, "rater": r, "score": 3 + i % 2}
        for key, rubric in found
        for i, r in enumerate(raters)
    ]


def _import(t: TwoRuns, name: str, raters: tuple[str, ...], items: int) -> None:
    from server.usecases.ratings import import_rating_rows

    rows = _rows(t.engine, t.runs[name], raters, items)
    with Session(t.engine) as session:
        import_rating_rows(session, t.settings, t.generations[name], rows)
        session.commit()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, empty_template: Path) -> Iterator[TwoRuns]:
    path = tmp_path_factory.mktemp("fresh") / "fairjudge.db"
    stores.copy_store(empty_template, path)
    db_url = f"sqlite:///{path}"
    engine = make_engine(db_url)
    with StubServer() as stub:
        settings = make_settings(stub.base_url, db_url)
        runs, generations = {}, {}
        for name in ("a", "b"):
            with session_scope(engine) as session:
                import_items(session, SAMPLE, name)
            gen = usecases.generate(engine, settings, name, limit=S1_ITEMS)
            generations[name] = gen.run_id
            runs[name] = usecases.judge(engine, settings, gen.run_id).run_id
        _, raw = create_key(engine, "fresh-admin", "admin")
        t = TwoRuns(engine, settings, runs, generations, raw)
        _import(t, "a", RATERS, 3)
        yield t
    engine.dispose()


def _kept(t: TwoRuns, run: int, page: str) -> Any:
    """The figures kept for the run's default ``page`` at its version now, or None."""
    options = dict(default_pages(t.settings))[page]
    with Session(t.engine) as session:
        version = version_text(run_version(session, run), t.settings)
        found = read(session, page_key(page, run, options), version, signing_key(t.settings))
    return found


def _computed_at(t: TwoRuns, run: int) -> dict[str, Any]:
    with Session(t.engine) as session:
        rows = session.exec(
            select(DashboardFigure.page, DashboardFigure.computed_at).where(
                col(DashboardFigure.judge_run_id) == run
            )
        ).all()
    return dict(rows)


def test_a_rating_for_one_run_leaves_the_other_runs_figures_kept_and_the_warmer_refreshes_it(
    two_runs: TwoRuns,
) -> None:
    t = two_runs
    a, b = t.runs["a"], t.runs["b"]
    for run in (a, b):
        warm_run(t.engine, t.settings, run)
    with Session(t.engine) as session:
        before = {run: run_version(session, run) for run in (a, b)}
    kept_b = _computed_at(t, b)
    # Ratings of run a's first 3 items by a third rater: 3 more, 9 in all (6 + 3 by hand).
    warmer = Warmer(t.engine, t.settings, watch_s=0.1)
    try:
        time.sleep(0.5)  # its first look: nothing changed since the pages were computed
        _import(t, "a", ("r3",), 3)
        with Session(t.engine) as session:
            assert run_version(session, b) == before[b]  # another run's rows: b unchanged
            assert run_version(session, a) != before[a]
        # Nobody rated run b: its agreement JSON is a 404, nothing kept; every other page is.
        assert [p for p, _ in default_pages(t.settings) if _kept(t, b, p) is None] == [
            "agreement-json"
        ]
        deadline = time.monotonic() + 180
        while _kept(t, a, "agreement-json") is None or _kept(t, a, "agreement") is None:
            assert time.monotonic() < deadline, "the warmer did not refresh run a's figures"
            time.sleep(0.2)
        while warmer.busy.is_set():  # let it finish run a's last pages
            time.sleep(0.1)
    finally:
        warmer.close()
    fresh = _kept(t, a, "agreement-json").value  # type: ignore[union-attr]
    rubric = next(iter(fresh["rubrics"]))
    assert fresh["rubrics"][rubric]["n_ratings"] == 9 and fresh["rubrics"][rubric]["n_raters"] == 3
    # Run b's figures were not computed again (the same rows, the same moment).
    assert _computed_at(t, b) == kept_b
    # A web worker that has just started shows run a's agreement page from the kept figures.
    app = _app(t)
    client = app.test_client()
    assert sign_in(client, t.key).status_code == 302
    page = client.get(f"/judge-runs/{a}/agreement")
    assert page.status_code == 200 and "kept since then" in page.text


def _app(t: TwoRuns, **config: Any) -> Flask:
    return create_app(
        {"SETTINGS": t.settings, "TESTING": True, "SECRET_KEY": "test-secret", **config}
    )


def _api(app: Flask, t: TwoRuns, path: str) -> Any:
    return app.test_client().get(path, headers={"Authorization": f"Bearer {t.key}"})


def test_routes_serve_kept_figures_without_computing(two_runs: TwoRuns) -> None:
    t = two_runs
    a = t.runs["a"]
    warm_run(t.engine, t.settings, a)
    # No wait at all: only figures kept in the store can answer 200.
    app = _app(t, FIGURES_WAIT_S=0.0)
    with Session(t.engine) as session:
        report = usecases.full_report(session, a, settings=t.settings)
        expected = json.loads(json.dumps(report.to_json()))
        from server.usecases.agreement import AgreementRequest, agreement

        agreed = agreement(session, AgreementRequest(judge_run=a)).to_dict()
    got = _api(app, t, f"/api/v1/judge-runs/{a}/report.json")
    assert got.status_code == 200, got.text[:300]
    assert got.get_json() == expected
    got = _api(app, t, f"/api/v1/judge-runs/{a}/agreement")
    assert got.status_code == 200 and got.get_json() == json.loads(json.dumps(agreed))
    html = _api(app, t, f"/api/v1/judge-runs/{a}/report.html")
    assert html.status_code == 200 and html.mimetype == "text/html"
    assert f"(judge run {a})</title>" in html.text  # the page of this run's report
    diag = _api(app, t, f"/api/v1/judge-runs/{a}/diagnostics.json")
    assert diag.status_code == 200


def test_a_route_answers_202_while_computing_then_the_figures(two_runs: TwoRuns) -> None:
    t = two_runs
    a = t.runs["a"]
    app = _app(t, FIGURES_WAIT_S=0.0)
    path = f"/api/v1/judge-runs/{a}/diagnostics.json?tolerance=0.5"  # options kept nowhere
    first = _api(app, t, path)
    assert first.status_code == 202, first.text[:300]
    body = first.get_json()
    assert body["status"] == "computing" and body["judge_run_id"] == a
    assert first.headers["Retry-After"] == str(body["retry_after_s"])
    deadline = time.monotonic() + 120
    reply = first
    while reply.status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.2)
        reply = _api(app, t, path)
    assert reply.status_code == 200
    with Session(t.engine) as session:
        direct = usecases.diagnostics_report(session, a, tolerance=0.5, settings=t.settings)
    assert reply.get_json() == json.loads(json.dumps(direct.to_json()))
    # An unknown run is a 404 as before, not a 202 for ever.
    missing = _api(_app(t), t, "/api/v1/judge-runs/999/report.json")
    assert missing.status_code == 404


def test_two_clients_at_once_both_get_the_answer_of_one_computation(
    two_runs: TwoRuns, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="fairjudge.figures")
    t = two_runs
    a = t.runs["a"]
    app = _app(t)
    path = f"/api/v1/judge-runs/{a}/agreement?n_bootstrap=60&seed=3"
    replies: list[Any] = []

    def ask() -> None:
        replies.append(_api(app, t, path))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [r.status_code for r in replies] == [200, 200]
    assert replies[0].get_json() == replies[1].get_json()
    assert replies[0].get_json()["rubrics"]  # ratings of 3 items: a real answer
    # One computation for both (the second request waited for the first one's).
    lines = [m for m in caplog.messages if "computed for the API" in m and "n_bootstrap', 60" in m]
    assert len(lines) == 1, lines
