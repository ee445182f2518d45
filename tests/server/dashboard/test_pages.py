"""The dashboard through Flask's test client on a real temporary SQLite store: sign-in,
every page, and the numbers on them against the store (counted here, independently of the
code under test) and against the JSON API."""

from __future__ import annotations

import hashlib
import html
import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlmodel import Session, col, func, select
from statsmodels.stats.proportion import proportion_confint

from judge.store.tables import HumanRating, JudgeRun, Judgment
from server.auth import revoke_key
from server.jobs import queue
from server.tables import Job
from tests.server.dashboard.helpers import (
    S1_ITEMS,
    Key,
    Store,
    api_get,
    fields,
    form_token,
    sign_in,
    tables,
)

PAGES = (
    "/",
    "/live/overview",
    "/jobs",
    "/live/jobs",
    "/jobs/new",
    "/jobs/new?kind=audit",
    "/jobs/1",
    "/live/jobs/1",
    "/judge-runs/1",
    "/judge-runs/1/agreement",
    "/judge-runs/1/checks",
    "/datasets",
    "/datasets/sample",
    "/campaigns",
    "/campaigns/x",
    "/audits",
    "/audits/1",
    "/admin/keys",
    "/admin/annotators",
)


def jobs_in_store(store: Store) -> int:
    with Session(store.engine) as session:
        return int(session.exec(select(func.count()).select_from(Job)).one())


def judgments_of(store: Store, judge_run_id: int) -> list[Judgment]:
    with Session(store.engine) as session:
        return list(session.exec(select(Judgment).where(Judgment.judge_run_id == judge_run_id)))


def ended(page: str) -> bool:
    """Whether the job block is marked final (the page's script stops polling then)."""
    return re.search(r'<div id="job-status"[^>]*\bdata-final\b', page) is not None


# -- signing in ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_every_page_sends_a_stranger_to_the_login_page(client: FlaskClient, path: str) -> None:
    reply = client.get(path)
    assert reply.status_code == 302
    target = urlsplit(reply.headers["Location"])
    assert target.path == "/login" and parse_qs(target.query)["next"] == [path]
    assert reply.headers["Location"].count("login") == 1


def test_starting_a_job_needs_a_key(client: FlaskClient, store: Store) -> None:
    before = jobs_in_store(store)
    reply = client.post("/jobs/new", data={"generation_run_id": str(store.generation_run_id)})
    assert reply.status_code == 302 and urlsplit(reply.headers["Location"]).path == "/login"
    assert jobs_in_store(store) == before


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("fj_not-a-key-anyone-made", "unknown API key"), ("", "paste an API key")],
)
def test_a_wrong_or_missing_key_is_refused(client: FlaskClient, raw: str, reason: str) -> None:
    reply = sign_in(client, raw)
    assert reply.status_code == 401
    assert reason in reply.text
    if raw:
        assert raw not in reply.text  # a refused key is not echoed back
    assert client.get("/").status_code == 302


def test_a_revoked_key_is_refused_and_revoking_signs_the_session_out(
    client: FlaskClient, store: Store, member: Key
) -> None:
    assert sign_in(client, member.raw).status_code == 302
    assert client.get("/").status_code == 200
    revoke_key(store.engine, member.name)
    assert client.get("/").status_code == 302  # the next click finds the key revoked
    reply = sign_in(client, member.raw)
    assert reply.status_code == 401 and "was revoked" in reply.text


def test_the_session_keeps_no_key_and_no_page_shows_it(
    app: Flask, client: FlaskClient, store: Store, member: Key
) -> None:
    reply = sign_in(client, member.raw, next_path="/jobs/new")
    assert reply.status_code == 302 and reply.headers["Location"] == "/jobs/new"
    cookie = client.get_cookie("session")
    assert cookie is not None
    # The cookie is signed, not encrypted: decoded, it holds the stored session's random token
    # and the form token only; neither the key nor its hash (docs/server.md, Keys).
    content = app.session_interface.get_signing_serializer(app).loads(cookie.value)  # type: ignore[attr-defined]
    assert set(content) <= {"session", "csrf"} and "session" in content
    assert member.raw not in json.dumps(content)
    assert hashlib.sha256(member.raw.encode()).hexdigest() not in json.dumps(content)
    for path in ("/", "/jobs/new", f"/judge-runs/{store.judge_run_id}"):
        page = client.get(path)
        assert page.status_code == 200 and member.name in page.text
        assert member.raw not in page.text


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil.example"])
def test_login_never_redirects_off_the_site(client: FlaskClient, member: Key, target: str) -> None:
    reply = sign_in(client, member.raw, next_path=target)
    assert reply.status_code == 302 and reply.headers["Location"] == "/"


def test_forms_without_the_sessions_token_are_refused(
    signed_in: FlaskClient, store: Store, member: Key
) -> None:
    before = jobs_in_store(store)
    reply = signed_in.post("/jobs/new", data={"generation_run_id": str(store.generation_run_id)})
    assert reply.status_code == 400 and "did not come from this dashboard" in reply.text
    assert jobs_in_store(store) == before
    assert signed_in.post("/login", data={"key": member.raw}).status_code == 400


def test_sign_out(signed_in: FlaskClient) -> None:
    token = form_token(signed_in.get("/").text)
    reply = signed_in.post("/logout", data={"csrf": token})
    assert reply.status_code == 302 and reply.headers["Location"] == "/login"
    assert signed_in.get("/").status_code == 302


# -- the overview -------------------------------------------------------------------------


def test_overview_numbers_match_the_store_and_the_api(
    signed_in: FlaskClient, store: Store, member: Key
) -> None:
    # Two jobs written straight into the store, with numbers chosen here.
    with Session(store.engine) as session:
        running = Job(kind="judge", params={"generation_run_id": 1}, status="running", done=7)
        running.total = 18
        failed = Job(kind="generate", params={"dataset": "sample"}, status="failed", done=3)
        failed.total, failed.error = 72, "endpoint 'test' answered HTTP 500 three times"
        session.add_all([running, failed])
        session.commit()
        running_id, failed_id = running.id, failed.id
    page = signed_in.get("/").text

    assert fields(page, "job", running_id) == {
        "kind": "judge",
        "status": "running",
        "done": "7",
        "total": "18",
        "error": "",
    }
    assert fields(page, "job", failed_id)["done"] == "3"
    assert fields(page, "job", failed_id)["error"] == failed.error
    # 18 answers: the 18 S1 items, each with its one answer part.
    gen = fields(page, "generation-run", store.generation_run_id)
    assert gen["answers"] == str(S1_ITEMS)
    assert (gen["source"], gen["status"], gen["model"]) == ("generated", "finished", "stub-model")
    # The judge run's counts, from its Judgment rows counted here: 18 items x 1 rubric (ICS
    # is S1's only rubric) x 1 sample.
    statuses = [j.status for j in judgments_of(store, store.judge_run_id)]
    assert len(statuses) == S1_ITEMS
    judge = fields(page, "judge-run", store.judge_run_id)
    assert judge["scored"] == str(statuses.count("scored"))
    assert judge["unscored"] == str(statuses.count("unscored"))

    # The JSON API says the same.
    api = f"/api/v1/generation-runs/{store.generation_run_id}"
    api_gen = api_get(signed_in, api, member)
    assert (str(api_gen["answers"]), api_gen["source"]) == (gen["answers"], gen["source"])
    api = f"/api/v1/judge-runs/{store.judge_run_id}"
    api_judge = api_get(signed_in, api, member)
    for k in ("scored", "unscored", "status", "samples", "prompt_variant", "rubric_set"):
        assert str(api_judge[k]) == judge[k], k
    for job_id in (running_id, failed_id):
        api_job = api_get(signed_in, f"/api/v1/jobs/{job_id}", member)
        shown = fields(page, "job", job_id)
        assert (api_job["status"], str(api_job["done"]), str(api_job["total"])) == (
            shown["status"],
            shown["done"],
            shown["total"],
        )
        assert (api_job["error"] or "") == shown["error"]

    # The live fragment the page polls carries the same rows.
    live = signed_in.get("/live/overview")
    assert live.status_code == 200 and "<html" not in live.text
    assert fields(live.text, "job", running_id) == fields(page, "job", running_id)


def test_pages_load_nothing_from_other_sites(signed_in: FlaskClient, store: Store) -> None:
    for path in ("/", "/jobs/new", f"/judge-runs/{store.judge_run_id}", "/login"):
        page = signed_in.get(path).text
        assert not re.search(r'(src|href)="(https?:)?//', page), path
    css = signed_in.get("/dashboard/static/dashboard.css")
    assert css.status_code == 200 and "text/css" in css.content_type
    css.close()


# -- a judge run --------------------------------------------------------------------------


def test_judge_run_page_shows_metrics_charts_and_report_links(
    signed_in: FlaskClient, store: Store, member: Key
) -> None:
    page = signed_in.get(f"/judge-runs/{store.judge_run_id}")
    assert page.status_code == 200
    # S1 ICS >= 3 over all factors: the share of stored scores >= 3, with the Wilson
    # interval from statsmodels, formatted as the report does ('62 [41-80] n=18').
    scores = [j.score for j in judgments_of(store, store.judge_run_id) if j.score is not None]
    hits, n = sum(s >= 3 for s in scores), len(scores)
    low, high = proportion_confint(hits, n, method="wilson")
    expected = f"{100 * hits / n:.0f} [{100 * low:.0f}-{100 * high:.0f}] n={n}"
    (metrics,) = [rows for title, rows in tables(page.text).items() if "FairMonitor" in title]
    column = metrics[0].index("S1 ICS>=3")
    (overall,) = [row for row in metrics if row[0] == "all"]
    assert overall[column] == expected
    # The same cell in the grid's numbers (value, interval, n) and in its picture's hover.
    grid = tables(page.text)["Stage metrics per factor (percent, 95 % interval, n scored)"]
    (cell,) = [r for r in grid[1:] if r[:2] == ["all", "S1 ICS>=3"]]
    assert cell[2:] == [
        f"{100 * hits / n:.1f}",
        f"{100 * low:.1f}",
        f"{100 * high:.1f}",
        str(n),
        "0",
        # the overall row has no other factor: no test, no flag, no simultaneous interval
        "—",
        "—",
        "no",
        "—",
        "—",
    ]
    assert grid[0][7:10] == ["p vs rest", "p (Holm)", "flag"]
    assert f"all, S1 ICS share&gt;=3 (%): {100 * hits / n:.1f} [{100 * low:.1f}" in page.text

    # Charts are inline SVG with a title for screen readers; no image is fetched or embedded.
    assert page.text.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img"') >= 3
    assert "<img" not in page.text and "data:image/png" not in page.text
    assert "Judge vs human ratings" not in page.text  # no human ratings yet

    links = re.findall(r'href="(/api/v1/[^"]+)"', html.unescape(page.text))
    assert f"/api/v1/judge-runs/{store.judge_run_id}/report.html" in links
    assert f"/api/v1/judge-runs/{store.judge_run_id}/report.csv?table=metrics.csv" in links
    for link in links:
        reply = signed_in.get(link, headers=member.header)
        assert reply.status_code == 200, link
        reply.close()


def test_agreement_page_shows_reliability_once_humans_rated(
    signed_in: FlaskClient, store: Store
) -> None:
    path = f"/judge-runs/{store.judge_run_id}/agreement?n_bootstrap=0"
    assert "has no human ratings" in signed_in.get(path).text
    judged = judgments_of(store, store.judge_run_id)
    with Session(store.engine) as session:
        # Two raters who give exactly the judge's score: human mean == judge score on every
        # item, so Pearson's r is 1 by definition.
        session.add_all(
            HumanRating(
                generation_run_id=store.generation_run_id,
                item_id=j.item_id,
                rubric=j.rubric,
                rater=rater,
                score=float(j.score),
            )
            for j in judged
            if j.score is not None
            for rater in ("r1", "r2")
        )
        session.commit()
    try:
        page = signed_in.get(path).text  # the store changed: computed again, not kept
        ics = fields(page, "rubric", "ICS")
        assert ics["n"] == str(sum(j.score is not None for j in judged))
        assert ics["pearson"] == "1.000"
    finally:
        with Session(store.engine) as session:
            for rating in session.exec(select(HumanRating)):
                session.delete(rating)
            session.commit()


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/judge-runs/999999", 404, "no judge run 999999"),
        ("/jobs/999999", 404, "no job 999999"),
        ("/jobs/99999999999999999999", 404, "ids run from 1 to"),
    ],
)
def test_missing_rows_get_an_html_error_page(
    signed_in: FlaskClient, path: str, status: int, message: str
) -> None:
    reply = signed_in.get(path)
    assert reply.status_code == status and reply.content_type.startswith("text/html")
    assert message in reply.text


# -- starting a judge job -----------------------------------------------------------------


def test_a_judge_job_started_from_the_form_runs_and_links_its_judge_run(
    signed_in: FlaskClient, store: Store, member: Key
) -> None:
    form = signed_in.get(f"/jobs/new?generation_run_id={store.generation_run_id}").text
    assert f'<option value="{store.generation_run_id}" selected>' in form
    assert '<option value="test" selected>test</option>' in form  # the config's endpoint
    assert '<option value="cot">cot</option>' in form
    reply = signed_in.post(
        "/jobs/new",
        data={
            "csrf": form_token(form),
            "generation_run_id": str(store.generation_run_id),
            "endpoint": "test",
            "prompt_variant": "cot",
            "temperature": "0.5",
            "samples": "2",
            "rubric_set": "",
        },
    )
    assert reply.status_code == 302
    job_id = int(reply.headers["Location"].rsplit("/", 1)[1])
    with Session(store.engine) as session:
        job = session.get(Job, job_id)
        assert job is not None and (job.kind, job.status, job.created_by) == (
            "judge",
            "queued",
            member.name,
        )
        assert job.params == {
            "generation_run_id": store.generation_run_id,
            "endpoint": "test",
            "prompt_variant": "cot",
            "temperature": 0.5,
            "samples": 2,
        }
    page = signed_in.get(f"/jobs/{job_id}").text
    assert fields(page, "job", job_id)["status"] == "queued"
    assert f'data-live="/live/jobs/{job_id}"' in page and not ended(page)

    # The worker's own function runs it, as the worker beside `fairjudge serve` does.
    assert queue.run_job(store.engine, store.settings, job_id) == "finished"
    live = signed_in.get(f"/live/jobs/{job_id}").text
    shown = fields(live, "job", job_id)
    assert shown["status"] == "finished" and ended(live)
    with Session(store.engine) as session:
        run = session.exec(
            select(JudgeRun).where(
                JudgeRun.generation_run_id == store.generation_run_id,
                col(JudgeRun.prompt_variant) == "cot",
                JudgeRun.samples == 2,
            )
        ).one()
    assert f'href="/judge-runs/{run.id}"' in live
    # 18 S1 items x 1 rubric (ICS) x 2 samples = 36 judgments, counted in the store.
    statuses = [j.status for j in judgments_of(store, run.id or 0)]
    assert len(statuses) == S1_ITEMS * 2
    assert (shown["scored"], shown["unscored"]) == (
        str(statuses.count("scored")),
        str(statuses.count("unscored")),
    )
    api_job = api_get(signed_in, f"/api/v1/jobs/{job_id}", member)
    assert (api_job["status"], str(api_job["done"]), str(api_job["total"])) == (
        shown["status"],
        shown["done"],
        shown["total"],
    )
    assert api_job["result"]["judge_run_id"] == run.id


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("generation_run_id", "abc", "generation_run_id: 'abc' is not an integer"),
        ("generation_run_id", "", "generation_run_id: choose one"),
        ("temperature", "hot", "temperature: 'hot' is not a number"),
        ("temperature", "3", "temperature"),
        ("samples", "0", "samples"),
        ("prompt_variant", "shouting", "prompt_variant"),
    ],
)
def test_a_bad_form_comes_back_with_the_reason_and_queues_nothing(
    signed_in: FlaskClient, store: Store, field: str, value: str, reason: str
) -> None:
    form = signed_in.get("/jobs/new").text
    data = {
        "csrf": form_token(form),
        "generation_run_id": str(store.generation_run_id),
        "endpoint": "test",
        "prompt_variant": "plain",
        "temperature": "0",
        "samples": "1",
        field: value,
    }
    before = jobs_in_store(store)
    reply = signed_in.post("/jobs/new", data=data)
    assert reply.status_code == 400
    assert reason in html.unescape(reply.text) and 'id="judge-form"' in reply.text
    assert jobs_in_store(store) == before


def test_the_job_form_carries_what_the_cli_judge_takes(
    signed_in: FlaskClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Aggregation, --swap-order and --max-cost, as `fairjudge judge` takes them, are fields
    of the form and land in the job's parameters (the same request). A cost bound needs
    prices: on this store's unpriced endpoint the form refuses it at once, naming the field
    (issue 41 review), and queues it once the endpoint has prices."""
    form = signed_in.get("/jobs/new").text
    assert '<option value="mean" selected>mean</option>' in form  # the config's aggregation
    assert 'name="swap_order"' in form and 'name="max_cost"' in form
    data = {
        "csrf": form_token(form),
        "generation_run_id": str(store.generation_run_id),
        "aggregation": "majority",
        "swap_order": "on",
        "max_cost": "0.5",
    }
    refused = signed_in.post("/jobs/new", data=data)
    assert refused.status_code == 400 and "max_cost: endpoint" in html.unescape(refused.text)
    settings = signed_in.application.config["SETTINGS"]
    name = settings.judge.endpoint
    priced = settings.endpoint(name).model_copy(
        update={"input_price_per_mtok": 0.0, "output_price_per_mtok": 1.0}
    )
    with_prices = settings.model_copy(update={"endpoints": {**settings.endpoints, name: priced}})
    monkeypatch.setitem(signed_in.application.config, "SETTINGS", with_prices)
    reply = signed_in.post("/jobs/new", data=data)
    assert reply.status_code == 302
    job_id = int(reply.headers["Location"].rsplit("/", 1)[1])
    with Session(store.engine) as session:
        job = session.get(Job, job_id)
        assert job is not None
        assert job.params == {
            "generation_run_id": store.generation_run_id,
            "aggregation": "majority",
            "swap_order": True,
            "max_cost": 0.5,
        }
