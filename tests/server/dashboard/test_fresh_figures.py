"""Figures kept per judge run (``run_version``), brought up to date by the worker's warmer after
a write that is not a job, and the API's agreement, report and diagnostics served kept, the
latest kept (marked stale) after a write, or answered 202 while none was ever kept, never a
request held for them.

The store is ``two_runs`` (tests/support/two_runs.py): runs ``a`` and ``b`` of 18 S1 items,
one ICS judgment each; run ``a`` has 2 raters' ratings of its first 3 items (6 ratings). The
reference for a kept figure is the same figure computed now from the rows by the use case the
route calls.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC
from typing import Any

import pytest
from flask import Flask
from sqlmodel import Session, col, select

from server import create_app, usecases
from server.tables import DashboardFigure
from server.usecases.dashboard import default_pages, page_key, run_version
from server.usecases.figures import read, signing_key, version_text, warm_run
from server.usecases.warming import Warmer
from tests.server.dashboard.helpers import sign_in
from tests.support.two_runs import TwoRuns, import_ratings


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
        import_ratings(t, "a", ("r3",), 3)
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
        from server.usecases.agreement import AgreementRequest
        from server.usecases.standing import agreement_with_standing  # what the route serves

        agreed = agreement_with_standing(session, AgreementRequest(judge_run=a)).to_dict()
    got = _api(app, t, f"/api/v1/judge-runs/{a}/report.json")
    assert got.status_code == 200, got.text[:300]
    assert got.get_json() == expected  # no "stale" field: the figures are the rows now
    assert got.headers["X-Figures-Stale"] == "false"
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
    # One computation for both (the second request waited for the first one's): it runs in
    # a process of its own (its log line is not this process's), so it is told by when the
    # figures were computed, which each computation stamps anew (to the microsecond).
    stamps = {r.headers["X-Figures-Computed-At"] for r in replies}
    assert len(stamps) == 1, stamps
    with Session(t.engine) as session:
        kept = session.exec(
            select(DashboardFigure.computed_at).where(col(DashboardFigure.judge_run_id) == a)
        ).all()
    assert stamps <= {k.replace(tzinfo=UTC).isoformat() for k in kept}, (stamps, kept)


def _stored_row(t: TwoRuns, run: int, page: str) -> tuple[str, str]:
    """The version digest and the time (ISO 8601, UTC) of the row kept for the run's default
    ``page``, read from the table itself."""
    from judge.hashing import sha256

    options = dict(default_pages(t.settings))[page]
    digest = sha256(page_key(page, run, options).text())
    with Session(t.engine) as session:
        row = session.exec(
            select(DashboardFigure.version, DashboardFigure.computed_at).where(
                col(DashboardFigure.key) == digest
            )
        ).one()
    return row[0], row[1].replace(tzinfo=None).isoformat()


def test_after_a_write_the_api_serves_the_kept_figures_marked_stale_then_the_new_ones(
    two_runs: TwoRuns,
) -> None:
    t = two_runs
    a = t.runs["a"]
    warm_run(t.engine, t.settings, a)
    with Session(t.engine) as session:
        from server.usecases.agreement import AgreementRequest
        from server.usecases.standing import agreement_with_standing  # what the route serves

        found = agreement_with_standing(session, AgreementRequest(judge_run=a))
        before = json.loads(json.dumps(found.to_dict()))
        report_before = json.loads(
            json.dumps(usecases.full_report(session, a, settings=t.settings).to_json())
        )
    rubric = next(iter(before["rubrics"]))
    ratings_before = before["rubrics"][rubric]["n_ratings"]
    app = _app(t, FIGURES_WAIT_S=0.0)  # no wait: what is kept, or 202
    path = f"/api/v1/judge-runs/{a}/agreement"
    fresh = _api(app, t, path)  # kept at the run's version now: no alarm
    assert fresh.status_code == 200 and fresh.headers["X-Figures-Stale"] == "false"
    assert "stale" not in fresh.get_json() and "X-Figures-Version" not in fresh.headers
    kept_version, kept_at = _stored_row(t, a, "agreement-json")
    # A fourth rater's ratings of the first 3 items: 3 more than before (by hand).
    import_ratings(t, "a", ("r4",), 3)
    stale = _api(app, t, path)
    assert stale.status_code == 200, stale.text[:300]
    assert stale.headers["X-Figures-Stale"] == "true"
    assert stale.headers["X-Figures-Version"] == kept_version  # the row's, read from the table
    body = stale.get_json()
    mark = body.pop("stale")
    assert body == before  # the figures kept before the write, word for word
    assert mark["version"] == kept_version
    assert mark["computed_at"].replace("+00:00", "") == kept_at
    # This web worker served them before the write: it knows what changed since.
    assert mark["behind"] == ["ratings"]
    assert "before the latest writes to this run's rows (ratings)" in mark["message"]
    # Another web worker (nothing in memory) reads them from the store, which keeps only
    # the version's digest: what changed is not known, and said so (null, not []).
    other = _api(_app(t, FIGURES_WAIT_S=0.0), t, f"/api/v1/judge-runs/{a}/report.json")
    assert other.status_code == 200 and other.headers["X-Figures-Stale"] == "true"
    report = other.get_json()
    assert report.pop("stale")["behind"] is None and report == report_before
    html = _api(_app(t, FIGURES_WAIT_S=0.0), t, f"/api/v1/judge-runs/{a}/report.html")
    assert html.status_code == 200 and html.headers["X-Figures-Stale"] == "true"
    # Asked again, the route serves the figures as the rows are now, once computed.
    deadline = time.monotonic() + 180
    while (reply := _api(app, t, path)).headers["X-Figures-Stale"] == "true":
        assert time.monotonic() < deadline, "the agreement was not computed again"
        time.sleep(0.2)
    now = reply.get_json()
    assert "stale" not in now
    assert now["rubrics"][rubric]["n_ratings"] == ratings_before + 3
    for tail in ("report.json", "report.html"):  # their computations end before the next test
        while _api(app, t, f"/api/v1/judge-runs/{a}/{tail}").headers["X-Figures-Stale"] == "true":
            assert time.monotonic() < deadline, f"{tail} was not computed again"
            time.sleep(0.2)


def test_nothing_ever_kept_is_a_202_not_a_stale_answer(two_runs: TwoRuns) -> None:
    """Options never asked before: no figures kept at any version, so no stale answer."""
    t = two_runs
    a = t.runs["a"]
    app, path = _app(t, FIGURES_WAIT_S=0.0), f"/api/v1/judge-runs/{a}/agreement?seed=11"
    reply = _api(app, t, path)
    assert reply.status_code == 202 and "X-Figures-Stale" not in reply.headers
    assert reply.get_json()["status"] == "computing"
    deadline = time.monotonic() + 120
    while (reply := _api(app, t, path)).status_code == 202:  # then the answer, fresh
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert reply.status_code == 200 and reply.headers["X-Figures-Stale"] == "false"


def test_report_json_is_kept_as_its_text_and_served_as_read(two_runs: TwoRuns) -> None:
    """report.json is kept as the report's JSON text (``DERIVED``), so a load, fresh or
    stale, reads text instead of unpickling the report and serialising it again. Reference:
    the report computed now from the rows by the use case, serialised by ``json``."""
    t = two_runs
    a = t.runs["a"]
    warm_run(t.engine, t.settings, a)
    kept = _kept(t, a, "report.json")
    assert kept is not None and isinstance(kept.value, str)
    with Session(t.engine) as session:
        report = usecases.full_report(session, a, settings=t.settings).to_json()
    assert json.loads(kept.value) == json.loads(json.dumps(report))
    got = _api(_app(t, FIGURES_WAIT_S=0.0), t, f"/api/v1/judge-runs/{a}/report.json")
    assert got.status_code == 200 and got.headers["X-Figures-Stale"] == "false"
    assert got.mimetype == "application/json"
    assert got.get_data(as_text=True) == kept.value  # the kept text, byte for byte


def test_a_stale_field_is_written_into_kept_json_text() -> None:
    """By hand: the field after the last member; an empty object gets it alone; a field the
    object held is overridden for a reader (the last of equal names wins, as ``{**body,
    "stale": ...}`` did); text that is not an object is refused."""
    from server.kept.serving import JsonText

    assert json.loads(JsonText('{"a":1,"b":[2]}').with_field("stale", {"x": None})) == {
        "a": 1,
        "b": [2],
        "stale": {"x": None},
    }
    assert JsonText("{ }").with_field("stale", 1) == '{"stale":1}'
    assert json.loads(JsonText('{"stale":0,"a":1}').with_field("stale", 2))["stale"] == 2
    with pytest.raises(ValueError, match="not an object"):
        JsonText("[1, 2]").with_field("stale", 1)
