"""A judge run's pages kept in the store (server.usecases.figures): computed ahead, read back
by another web worker as they were, never when the store changed since, never when a row holds
anything but figures, and left by a job's worker when the job ends.

The reference each time is the same page computed now, from the rows (``?fresh=1``, which
skips every kept figure): the kept page must show the same numbers. The loop store is a module
copy of its own of the small loop (tests/server/dashboard/conftest.py: every section of the
pages, at 60 judgments a run instead of 108), so the rows added here reach no other test."""

from __future__ import annotations

import os
import pickle
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlmodel import Session, col, select

from server import create_app
from server.tables import DashboardFigure
from server.usecases.dashboard import checks_options, default_pages, page_key, run_version
from server.usecases.figures import (
    compute_page,
    dump,
    load,
    read,
    signing_key,
    version_text,
    warm_run,
)
from server.usecases.warming import runs_of_result
from tests.server.dashboard.conftest import LoopApp
from tests.server.dashboard.helpers import sign_in
from tests.support.factories import make_settings

COMPUTED = re.compile(r'<p class="note computed" id="computed">.*?</p>', re.S)
SVG_ID = re.compile(r"\b([ch])\d+([td]?)\b")
PAGES = {"judge-run": "", "agreement": "/agreement", "checks": "/checks"}
WARMED = {*PAGES, "report", "report.html", "report.json", "agreement-json"}
"""Pages computed ahead: the dashboard's three, and what the API serves with no query (its
diagnostics are the checks page's figures; report.json is the report's JSON text)."""


def _another_worker(loop_app: LoopApp) -> Flask:
    """A second app on the same store: an empty figure cache, as a web worker that has just
    started (or one on another machine)."""
    url = str(loop_app.engine.url)
    settings = make_settings("http://127.0.0.1:9/v1", url)
    return create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "test-secret"})


def _client(app: Flask, loop_app: LoopApp) -> Any:
    client = app.test_client()
    assert sign_in(client, loop_app.member.raw).status_code == 302
    return client


def _page(app: Flask | Any, loop_app: LoopApp, path: str) -> str:
    client = _client(app, loop_app) if isinstance(app, Flask) else app
    reply = client.get(path)
    assert reply.status_code == 200, reply.text[:500]
    return reply.text


def _kept_rows(loop_app: LoopApp, run: int) -> list[DashboardFigure]:
    with Session(loop_app.engine) as session:
        return list(
            session.exec(select(DashboardFigure).where(col(DashboardFigure.judge_run_id) == run))
        )


def test_pages_computed_ahead_are_read_by_another_worker_as_computed(loop_app: LoopApp) -> None:
    run = loop_app.loop.judge_run_id
    settings = loop_app.app.config["SETTINGS"]
    took = warm_run(loop_app.engine, settings, run)
    assert set(took) == WARMED and all((s or 0) > 0 for s in took.values())
    rows = _kept_rows(loop_app, run)
    with Session(loop_app.engine) as session:
        version = version_text(run_version(session, run), settings)
    assert len(rows) == len(WARMED) and {r.version for r in rows} == {version}
    # Asked again at the same version: nothing computed twice.
    assert warm_run(loop_app.engine, settings, run) == dict.fromkeys(WARMED, 0.0)

    worker = _client(_another_worker(loop_app), loop_app)
    for name, suffix in PAGES.items():
        kept = _page(worker, loop_app, f"/judge-runs/{run}{suffix}")
        # The kept figures were used: the page says so, with the time warm_run took.
        note = COMPUTED.search(kept)
        assert note is not None and "kept since then" in note.group(0), name
        fresh = _page(worker, loop_app, f"/judge-runs/{run}{suffix}?fresh=1")
        assert "kept since then" not in COMPUTED.search(fresh).group(0)  # type: ignore[union-attr]

        # Every number and word of the page is the same as computed now from the rows: all
        # but the note on when, the fresh page's links carrying ?fresh=1, and the charts'
        # element ids (c1t, h2: numbered by each render in a process).
        def strip(text: str) -> str:
            text = COMPUTED.sub("", text).replace("fresh=1&amp;", "").replace("?fresh=1", "")
            return SVG_ID.sub(r"\1#\2", text)

        assert strip(kept) == strip(fresh), name


def test_figures_of_another_version_are_not_used(loop_app: LoopApp) -> None:
    from server.usecases.ratings import import_rating_rows

    run = loop_app.loop.judge_run_id
    settings = loop_app.app.config["SETTINGS"]
    warm_run(loop_app.engine, settings, run)
    key = page_key("agreement", run, default_pages(settings)[1][1])
    sign = signing_key(settings)
    with Session(loop_app.engine) as session:
        before = version_text(run_version(session, run), settings)
        assert read(session, key, before, sign) is not None
    # A new rater's ratings: the agreement they feed has changed, so must the version.
    with Session(loop_app.engine) as session:
        from judge.store.tables import Item, Judgment

        item_id, rubric = session.exec(
            select(Judgment.item_id, Judgment.rubric).where(col(Judgment.judge_run_id) == run)
        ).first()  # type: ignore[misc]
        item = session.get(Item, item_id)
        assert item is not None
        key_of_item = item.key
    row = {"item_id": key_of_item, "rubric": rubric, "rater": "late-rater", "score": 5}
    with Session(loop_app.engine) as session:
        import_rating_rows(session, settings, loop_app.loop.generation_run_id, [row])
        session.commit()
    with Session(loop_app.engine) as session:
        after = version_text(run_version(session, run), settings)
        assert after != before
        assert read(session, key, after, sign) is None  # the kept figures are of the old store
    page = _page(_another_worker(loop_app), loop_app, f"/judge-runs/{run}/agreement")
    assert "kept since then" not in COMPUTED.search(page).group(0)  # type: ignore[union-attr]
    # Computed now, and kept for the next worker at the new version.
    with Session(loop_app.engine) as session:
        assert read(session, key, after, sign) is not None
    # The endpoints' prices are part of what figures are kept by (a run's cost is read from
    # the config): other prices, another key.
    endpoint = settings.endpoints["test"].model_copy(update={"input_price_per_mtok": 1.0})
    priced = settings.model_copy(update={"endpoints": {"test": endpoint}})
    with Session(loop_app.engine) as session:
        assert version_text(run_version(session, run), priced) != after


def test_a_row_the_server_did_not_sign_is_refused_and_the_page_computed(
    loop_app: LoopApp, caplog: pytest.LogCaptureFixture
) -> None:
    class Planted:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, ("echo planted",))

    sign = signing_key(loop_app.app.config["SETTINGS"])
    unsigned = bytes(32) + zlib.compress(pickle.dumps(Planted()), 1)
    with pytest.raises(ValueError, match="not signed with this server's secret"):
        load(unsigned, sign)
    with pytest.raises(ValueError, match="not signed"):  # signed with another secret
        load(dump({"a": 1}, b"another server"), sign)
    # Signed, the allow-list still refuses code, and a dotted name (an attribute path from
    # an allowed module to the builtins), written by hand in protocol 4.
    with pytest.raises(pickle.UnpicklingError, match=r"may not name posix\.system"):
        load(dump(Planted(), sign), sign)
    dotted = b"\x80\x04\x8c\x0cnumpy.dtypes\x8c\x10__builtins__.get\x93."
    signed = _signed(zlib.compress(dotted, 1), sign)
    with pytest.raises(
        pickle.UnpicklingError, match=r"may not name a path \(numpy\.dtypes: __builtins__\.get\)"
    ):
        load(signed, sign)
    # Plain values, dates and FairJudge's own dataclasses do load.
    from judge.reports.sections import BarChart

    assert load(dump({"a": (1, 2.5, None)}, sign), sign) == {"a": (1, 2.5, None)}
    chart = BarChart("t", [("a", 1.0, 0.5, 1.5)], "y")
    assert load(dump(chart, sign), sign) == chart

    run = loop_app.loop.judge_run_id
    settings = loop_app.app.config["SETTINGS"]
    # The checks page kept at the run's version now (the one page loaded below, which reads
    # only its own row): warm_run would compute the run's six other pages too.
    checks = page_key("checks", run, checks_options({}))
    with Session(loop_app.engine) as session:
        version = version_text(run_version(session, run), settings)
    compute_page(loop_app.engine, settings, checks, version, sign)
    with Session(loop_app.engine) as session:
        assert read(session, checks, version, sign) is not None
        for row in session.exec(select(DashboardFigure)).all():
            row.data = unsigned  # someone with write access to the table plants a payload
            session.add(row)
        session.commit()
    page = _page(_another_worker(loop_app), loop_app, f"/judge-runs/{run}/checks")
    assert "kept since then" not in COMPUTED.search(page).group(0)  # type: ignore[union-attr]
    assert "could not be read back (not signed" in caplog.text


def _signed(data: bytes, key: bytes) -> bytes:
    import hashlib
    import hmac

    return hmac.new(key, data, hashlib.sha256).digest() + data


def test_runs_named_by_a_job_result() -> None:
    # Results as server/jobs/tasks.py writes them for judging, a counterfactual check and a
    # sweep; other kinds name no judge run.
    assert runs_of_result({"judge_run_id": 4, "summary": {}}) == [4]
    assert runs_of_result({"judge_run_id": 9, "checked_judge_run_id": 4}) == [4, 9]
    assert runs_of_result({"judge_run_ids": [2, 3], "sweep": {}}) == [2, 3]
    assert runs_of_result({"generation_run_id": 1}) == []
    assert runs_of_result(None) == [] and runs_of_result({"judge_run_id": True}) == []


def test_the_warm_command_keeps_a_runs_pages_and_refuses_an_unknown_run(
    loop_app: LoopApp, tmp_path: Path
) -> None:
    import json

    from tests.support.cli import fairjudge
    from tests.support.factories import write_config

    run = loop_app.loop.copy_judge_run_id  # a run no other test here computed
    config = write_config(tmp_path / "f.toml", "http://127.0.0.1:9/v1", str(loop_app.engine.url))
    done = fairjudge("--config", config, "dashboard", "warm", str(run), "--json")
    assert done.returncode == 0, done.stderr
    took = json.loads(done.stdout)[str(run)]
    # Nobody rated the copy's answers: its agreement JSON is an error (a 404), kept nowhere.
    assert set(took) == WARMED and took.pop("agreement-json") is None
    assert all(s > 0 for s in took.values())
    assert len(_kept_rows(loop_app, run)) == len(WARMED) - 1
    again = fairjudge("--config", config, "dashboard", "warm", str(run))
    assert again.returncode == 0 and "judge-run kept already" in again.stdout
    unknown = fairjudge("--config", config, "dashboard", "warm", "999")
    assert unknown.returncode == 1 and "999" in unknown.stderr, unknown.stderr


def test_workers_keeping_the_same_page_at_once_leave_one_row(pg_url: str) -> None:
    # On PostgreSQL two transactions that both find no row insert the same key: the second
    # meets the unique key, and keeps the first one's figures (written at the same version).
    import threading
    from datetime import UTC, datetime

    from judge.store.engine import make_engine
    from server.usecases.figures import write

    engine = make_engine(pg_url, migrate=True)
    key = page_key("judge-run", 1, ())
    sign = b"a test's secret"
    start = threading.Barrier(6)
    errors: list[BaseException] = []

    def keep(n: int) -> None:
        start.wait()
        try:
            write(engine, key, "v1", {"writer": n}, sign=sign, at=datetime.now(UTC), seconds=0.1)
        except BaseException as exc:  # what the test is about: nothing may escape
            errors.append(exc)

    threads = [threading.Thread(target=keep, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with Session(engine) as session:
        rows = session.exec(select(DashboardFigure)).all()
        found = read(session, key, "v1", sign)
    assert errors == [] and len(rows) == 1
    assert found is not None and found.value["writer"] in range(6)
    # A later write replaces the row (a newer version).
    write(engine, key, "v2", {"writer": "later"}, sign=sign, at=datetime.now(UTC), seconds=0.1)
    with Session(engine) as session:
        assert read(session, key, "v1", sign) is None
        assert read(session, key, "v2", sign).value == {"writer": "later"}  # type: ignore[union-attr]
    engine.dispose()
