"""Every page of the loop (datasets, a judge run, its agreement with people, the judge's own
checks, an audit, jobs, the admin pages) on the loop store (tests/server/dashboard/
loop_store.py), through Flask's test client: each page's numbers against the JSON API asked
with the same key and options, and against what the store was built with (planted unscored
judgments, the raters, the audit's design)."""

from __future__ import annotations

import html
import re
from collections import Counter
from typing import Any

import pytest
from sqlmodel import Session, col, func, select

from judge.store.tables import HumanRating
from server.tables import Job
from server.usecases.requests import JOB_REQUESTS
from tests.server.dashboard.conftest import LoopApp
from tests.server.dashboard.helpers import api_get, fields, form_token, tables
from tests.server.dashboard.loop_store import (
    AWARD_PROMPTS,
    NO_SCORE,
    RATERS,
    UNSCORED_ITEMS,
)


def rows_of(page: str, title: str) -> list[dict[str, str]]:
    """A table of the page (a chart's numbers or a report table) as dicts by header."""
    found = tables(page)[title]
    return [dict(zip(found[0], row, strict=True)) for row in found[1:]]


def short(metric: str) -> str:
    """The report's short label of a metric ('S1 ICS share>=3 (%)' -> 'S1 ICS>=3')."""
    return re.sub(r"\s*\((%|% of max)\)$", "", metric).replace(" share>=", ">=")


def _number(page: str, before: str) -> int:
    found = re.search(re.escape(before) + r"(\d+)<", page)
    assert found, f"no number after {before!r}"
    return int(found.group(1))


def one(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


@pytest.fixture(scope="module")
def member_client(loop_app: LoopApp) -> Any:
    return loop_app.client()


# -- navigation and access ------------------------------------------------------------------


def test_every_page_is_reached_from_the_navigation(loop_app: LoopApp, member_client: Any) -> None:
    page = member_client.get("/").text
    nav = re.search(r'<nav aria-label="Pages">(.*?)</nav>', page, re.S)
    assert nav is not None
    linked = re.findall(r'href="([^"]+)"', nav.group(1))
    assert linked == [
        "/",
        "/datasets",
        "/campaigns",
        "/audits",
        "/pairwise",
        "/gates",
        "/jobs",
        "/jobs/new",
    ]
    run = loop_app.loop.judge_run_id
    for path in (f"/judge-runs/{run}", f"/judge-runs/{run}/agreement", f"/judge-runs/{run}/checks"):
        assert f'href="{path}"' in page, path
    # Live progress is the only script; everything else is in the HTML the server sent.
    for path in ("/", "/datasets/sample", f"/judge-runs/{run}", "/audits", "/jobs"):
        assert member_client.get(path).text.count("<script") == 1, path


def test_admin_pages_are_for_admins_only(loop_app: LoopApp, member_client: Any) -> None:
    for path in ("/admin/keys", "/admin/annotators"):
        refused = member_client.get(path)
        assert refused.status_code == 403 and "only an admin key" in refused.text, path
        assert loop_app.member.raw not in refused.text
    admin = loop_app.client(loop_app.admin)
    nav = admin.get("/").text
    assert 'href="/admin/keys"' in nav and 'href="/admin/annotators"' in nav
    keys = admin.get("/admin/keys")
    assert keys.status_code == 200
    assert fields(keys.text, "key", loop_app.member.name)["role"] == "member"
    assert loop_app.admin.raw not in keys.text and loop_app.member.raw not in keys.text
    # The API agrees: the same keys listed, the member refused.
    listed = admin.get("/api/v1/keys", headers=loop_app.admin.header).json
    assert {k["name"] for k in listed} == set(re.findall(r'data-key="([^"]+)"', keys.text))
    assert member_client.get("/api/v1/keys", headers=loop_app.member.header).status_code == 403
    people = admin.get("/admin/annotators")
    assert people.status_code == 200 and 'id="no-annotators"' in people.text


# -- datasets -------------------------------------------------------------------------------


def test_dataset_coverage_matches_the_api(loop_app: LoopApp, member_client: Any) -> None:
    key = loop_app.member
    listing = member_client.get("/datasets").text
    api_list = {d["name"]: d["items"] for d in api_get(member_client, "/api/v1/datasets", key)}
    # The loop's 48 items: stages S1 and S4 whole (18 each), S2 and S3 on three factors (6
    # each), loop_store.py's small_sample.
    assert fields(listing, "dataset", "sample")["items"] == str(api_list["sample"]) == "48"

    page = member_client.get("/datasets/sample").text
    cov = api_get(member_client, "/api/v1/datasets/sample/coverage.json", key)["coverage"]
    shown = fields(page, "dataset", "sample")
    assert shown == {
        "items": str(cov["items"]),
        "empty": str(len(cov["empty_cells"])),
        "grid_cells": str(cov["grid_cells"]),
        "unusable": str(len(cov["unusable_cells"])),
    }
    for stage, counts in cov["stage_totals"].items():
        assert fields(page, "stage", stage) == {s: str(n) for s, n in counts.items()}
    # The factor x stage heatmap's numbers: usable items summed over each factor's scenarios,
    # summed here from the API's cells.
    usable: Counter[tuple[str, str]] = Counter()
    for cell in cov["cells"]:
        usable[(cell["factor"], cell["stage"])] += cell["usable"]
    summary = rows_of(page, "Usable items per factor and stage: sample")
    assert {(r["factor"], r["stage"]): int(r["usable"]) for r in summary} == dict(usable)
    # Every empty grid cell is drawn hatched and written "empty", never as a 0.
    grid = rows_of(page, "Every stage x factor x scenario cell: sample")
    assert sum(r["all"] == "0" for r in grid) == len(cov["empty_cells"])
    assert page.count(">empty</text>") >= len(cov["empty_cells"])


# -- a judge run ----------------------------------------------------------------------------


def test_judge_run_page_matches_the_api(loop_app: LoopApp, member_client: Any) -> None:
    """The run page against the API's run, metrics, estimates, alt-test and judgments (the
    report's own sources: report.json holds the same, at the cost of the whole report)."""
    run, key = loop_app.loop.judge_run_id, loop_app.member
    page = member_client.get(f"/judge-runs/{run}").text
    info = api_get(member_client, f"/api/v1/judge-runs/{run}", key)
    assert fields(page, "judge-run", run) == {
        "scored": str(info["scored"]),
        "unscored": str(info["unscored"]),
        "status": info["status"],
    }
    # "The answer" comes first: the best figure per metric (prediction-powered where people
    # rated cells under a usable design, else the judge's: imported ratings have none), and
    # the alt-test's verdict per rubric at each margin.
    assert page.index('id="answer"') < page.index('id="grid"') < page.index('id="items"')
    estimates = api_get(member_client, f"/api/v1/judge-runs/{run}/estimates", key)
    best = rows_of(page, "The best figure per stage metric, all factors (percent, 95 % interval)")
    assert [(r["metric"], r["figure"], r["CI low"], r["from"]) for r in best] == [
        (c["label"], one(c["best"]["value"]), one(c["best"]["ci_low"]), c["best"]["method"])
        for c in estimates["metrics"]
        if c["factor"] == "all"
    ]
    for preset in ("expert", "skilled", "crowd"):
        alt = api_get(member_client, f"/api/v1/judge-runs/{run}/alt-test?epsilon={preset}", key)
        for r in alt["rubrics"]:
            assert fields(page, "rubric", r["rubric"])[preset] == (
                r["verdict"] or f"cannot run: {r['refused']}"
            )

    # The grid: every factor x metric cell, value, interval and n as the API has them.
    metrics = api_get(member_client, f"/api/v1/judge-runs/{run}/metrics", key)
    grid = rows_of(page, "Stage metrics per factor (percent, 95 % interval, n scored)")
    api_rows = metrics["by_factor"] + metrics["overall"]
    assert len(grid) == len(api_rows)
    by_cell = {(r["factor"], r["metric"]): r for r in grid}
    for m in api_rows:
        r = by_cell[(m["factor"], short(m["metric"]))]
        assert (r["value"], r["CI low"], r["CI high"]) == tuple(
            one(m[k]) for k in ("value", "ci_low", "ci_high")
        )
        assert (r["n scored"], r["n unscored"]) == (str(m["n_scored"]), str(m["n_unscored"]))
    # Distributions: per stage and rubric, n scored and the unscored items beside them, as
    # the metrics count them.
    dist = rows_of(page, "Score distributions: stub-model")
    counts = {f"{m['stage']} {m['rubric']}": m for m in metrics["overall"]}
    for r in dist:
        m = counts[r["series"]]
        assert r["n scored"] == str(m["n_scored"])
        assert r["unscored items"] == (str(m["n_unscored"]) if m["n_unscored"] else "—")

    # Unscored judgments: the two planted ones, counted, with the judge's reply as it came.
    unscored = api_get(member_client, f"/api/v1/judgments?judge_run={run}&status=unscored", key)
    assert unscored["total"] == len(UNSCORED_ITEMS) == info["unscored"]
    assert _number(page, 'id="unscored-count">') == len(UNSCORED_ITEMS)
    assert page.count(html.escape(NO_SCORE, quote=False)) >= len(UNSCORED_ITEMS)
    # The item browser filters to the planted unscored items.
    flagged = member_client.get(f"/judge-runs/{run}?flag=unscored").text
    assert set(re.findall(r'data-item="([^"]+)"', flagged)) == set(UNSCORED_ITEMS)
    assert _number(flagged, 'data-k="matching">') == len(UNSCORED_ITEMS)


def test_agreement_page_matches_the_api(loop_app: LoopApp, member_client: Any) -> None:
    run, key = loop_app.loop.judge_run_id, loop_app.member
    query = "n_bootstrap=20&assume_random=true"
    page = member_client.get(f"/judge-runs/{run}/agreement?{query}").text
    agree = api_get(member_client, f"/api/v1/judge-runs/{run}/agreement?n_bootstrap=20", key)
    for rubric, entry in agree["rubrics"].items():
        (judge,) = entry["judges"]
        shown = fields(page, "rubric", rubric)
        assert shown["n"] == str(judge["n"]) and shown["rated"] == str(entry["n_rated_items"])
        for name in ("kappa_quadratic", "pearson"):
            assert shown[name] == f"{judge['coefficients'][name]['value']:.3f}", (rubric, name)
        ceiling = entry["human_vs_human"]["alpha_interval"]["value"]
        assert shown["alpha_interval"] == f"{ceiling:.3f}"
        assert entry["n_raters"] == len(RATERS)
    # The ceiling chart's numbers, with intervals, are the API's.
    ceiling = rows_of(page, "The judge against the people's ceiling (95 % interval)")
    ics = next(r for r in ceiling if r["rubric"] == "ICS" and r["who"] == "judge vs people")
    api_kappa = agree["rubrics"]["ICS"]["judges"][0]["coefficients"]["kappa_quadratic"]
    assert (ics["CI low"], ics["CI high"]) == (
        f"{api_kappa['ci_low']:.2f}",
        f"{api_kappa['ci_high']:.2f}",
    )
    # One scatter dot per item the judge scored among the rated ones (ICS: 36 - 2 planted).
    scatter = rows_of(page, next(t for t in tables(page) if t.startswith("ICS:") and "scores" in t))
    assert len(scatter) == agree["rubrics"]["ICS"]["judges"][0]["n"] == 36 - len(UNSCORED_ITEMS)

    estimates = api_get(
        member_client, f"/api/v1/judge-runs/{run}/estimates?assume_random=true", key
    )
    shown = rows_of(page, "Stage metrics over all factors, three ways (percent, 95 % interval)")
    for cell in (c for c in estimates["metrics"] if c["factor"] == "all"):
        for method in ("judge_only", "human_only", "prediction_powered"):
            e = cell[method]
            row = next(
                r for r in shown if (r["metric"], r["method"]) == (cell["label"], e["method"])
            )
            assert (row["value"], row["CI low"], row["n rated"]) == (
                one(e["value"]),
                one(e["ci_low"]),
                str(e["n"]),
            )
    alt = api_get(member_client, f"/api/v1/judge-runs/{run}/alt-test?epsilon=expert", key)
    for r in alt["rubrics"]:
        verdict = re.search(
            rf'<h3 data-rubric="{r["rubric"]}">.*?data-k="verdict"[^>]*>([^<]*)<', page
        )
        assert verdict is not None
        assert html.unescape(verdict.group(1)) == (r["verdict"] or f"refused: {r['refused']}")


def test_checks_page_matches_the_diagnostics_api(loop_app: LoopApp, member_client: Any) -> None:
    run, key = loop_app.loop.judge_run_id, loop_app.member
    page = member_client.get(f"/judge-runs/{run}/checks").text
    diag = api_get(member_client, f"/api/v1/judge-runs/{run}/diagnostics.json", key)
    payload = diag["judge_diagnostics"]
    summary = fields(page, "section", "Summary")
    assert summary["counterfactual"] == str(len(payload["counterfactual"])) == "1"
    assert summary["order"] == "measured" and payload["order"] is not None
    directions = rows_of(
        page, "Counterfactual shifts by swap direction (score points, 95 % interval)"
    )
    api_dirs = [d for c in payload["counterfactual"] for d in c["directions"] if d["n"]]
    assert [(r["rubric"], r["pairs"], r["mean"], r["CI low"]) for r in directions] == [
        (d["scope"], str(d["n"]), f"{d['mean']:.2f}", one(d["ci_low"], 2)) for d in api_dirs
    ]
    position = rows_of(page, "Position consistency per rubric (share of pairs, 95 % interval)")
    assert [(r["rubric"], r["pairs"], r["consistency"]) for r in position] == [
        (o["rubric"], str(o["pairs"]), f"{o['position_consistency']:.2f}")
        for o in payload["order"]["rubrics"]
    ]
    assert "Self-preference" in page and payload["self_preference"] is True


# -- an audit -------------------------------------------------------------------------------


def test_audit_page_matches_the_api(loop_app: LoopApp, member_client: Any) -> None:
    run, key = loop_app.loop.audit_run_id, loop_app.member
    listing = member_client.get("/audits").text
    api_runs = api_get(member_client, "/api/v1/audit-runs", key)["items"]
    (listed,) = api_runs
    assert fields(listing, "audit-run", run)["answers"] == str(listed["answers"])
    page = member_client.get(f"/audits/{run}").text
    result = api_get(member_client, f"/api/v1/audit-runs/{run}", key)
    # 8 prompts, each answered and each followed up (the audit's design, loop_store.py).
    assert result["answers"]["main"]["parsed"] == AWARD_PROMPTS
    turns = re.findall(r'<span data-turn="(\w+)">(.*?)</span>(?:;|\.)', page)
    shown = {t: dict(re.findall(r'data-k="(\w+)">(\d+)<', body)) for t, body in turns}
    assert shown == {t: {s: str(n) for s, n in c.items()} for t, c in result["answers"].items()}
    for source, counts in result["followup"]["classes"].items():
        assert fields(page, "source", source)["labelled"] == str(counts["labelled"])
    # The share choosing group A, with its Wilson interval, from the analysis.
    overall = result["analysis"]["overall"]
    chart = rows_of(page, next(t for t in tables(page) if t.startswith("Share choosing group A")))
    row = next(r for r in chart if r[""] == "all")
    assert (row["value"], row["CI low"]) == (
        f"{overall['share_a']:.3f}",
        f"{overall['share_a_ci'][0]:.3f}",
    )


# -- jobs of every kind, and the form ------------------------------------------------------


def test_the_form_of_every_kind_is_its_request_model(member_client: Any) -> None:
    """The inputs of each kind's form are exactly the request's fields a job may carry, read
    from the pydantic model here (a field added to a request appears in the form)."""
    for kind, model in JOB_REQUESTS.items():
        page = member_client.get(f"/jobs/new?kind={kind}")
        assert page.status_code == 200, kind
        form = re.search(r"<form method=\"post\" action=\"/jobs/new\".*?</form>", page.text, re.S)
        assert form is not None, kind
        names = set(re.findall(r'name="([^"]+)"', form.group(0))) - {"csrf", "kind"}
        expected = set(model.model_fields) - set(model.NOT_FOR_JOBS)
        assert names == expected, kind
        assert f'id="{kind}-form"' in page.text


def test_jobs_of_other_kinds_start_from_the_form_and_are_listed(
    loop_app: LoopApp, member_client: Any
) -> None:
    # Issue 41: the form runs the job's dry run before it queues it, and a dry run (like the
    # job itself) refuses to continue a run at another server than the one it was made at;
    # so the endpoint points at the loop's server for this test (a dry run calls no model).
    from judge.store.tables import JudgeRun

    app_settings = loop_app.app.config["SETTINGS"]
    with Session(loop_app.engine) as session:
        made_at = session.get(JudgeRun, loop_app.loop.judge_run_id).base_url  # type: ignore[union-attr]
    moved = app_settings.endpoints["test"].model_copy(update={"base_url": made_at})
    loop_app.app.config["SETTINGS"] = app_settings.model_copy(update={"endpoints": {"test": moved}})
    try:
        _start_jobs_of_other_kinds(loop_app, member_client)
    finally:
        loop_app.app.config["SETTINGS"] = app_settings


def _start_jobs_of_other_kinds(loop_app: LoopApp, member_client: Any) -> None:
    form = member_client.get("/jobs/new?kind=counterfactual").text
    token = form_token(form)
    run = loop_app.loop.judge_run_id
    made = member_client.post(
        "/jobs/new",
        data={
            "csrf": token,
            "kind": "counterfactual",
            "judge_run_id": str(run),
            "swap": ["gender", "race"],
            "limit": "",
        },
    )
    assert made.status_code == 302, made.text
    counterfactual = int(made.headers["Location"].rsplit("/", 1)[1])
    audit_form = {
        "csrf": token,
        "kind": "audit",
        "suite": "award",
        "options": '{"levels": [5], "pairs_per_level": 1}',
        "max_tokens": "40",
    }
    # A blank limit means the whole design: the form shows its figure first and queues
    # nothing (issue 41). By hand: one level x one pair x 4 variants = 4 prompts, one call
    # each (docs/audits.md: each pair is shown in 4 variants).
    asked = member_client.post("/jobs/new", data=audit_form)
    assert asked.status_code == 200 and 'id="confirm-reason"' in asked.text, asked.text
    assert "4 calls" in html.unescape(asked.text)
    assert 'name="confirm_calls" value="4"' in asked.text
    made = member_client.post("/jobs/new", data={**audit_form, "confirm_calls": "4"})
    assert made.status_code == 302, made.text
    audit = int(made.headers["Location"].rsplit("/", 1)[1])
    bad = member_client.post(
        "/jobs/new", data={"csrf": token, "kind": "audit", "suite": "award", "options": "{levels"}
    )
    assert bad.status_code == 400 and "options: not JSON" in html.unescape(bad.text)
    with Session(loop_app.engine) as session:
        params = {j.id: (j.kind, j.params) for j in session.exec(select(Job))}
        queued = session.exec(select(func.count()).select_from(Job)).one()
    # A form that names no side to swap gets the documented default, both (docs/judging.md).
    assert params[counterfactual] == (
        "counterfactual",
        {"judge_run_id": run, "swap": ["gender", "race"], "swap_in": "both"},
    )
    assert params[audit] == (
        "audit",
        {"suite": "award", "options": {"levels": [5], "pairs_per_level": 1}, "max_tokens": 40},
    )
    assert queued == len(params)

    listing = member_client.get("/jobs").text
    for job_id in (counterfactual, audit):
        api_job = api_get(member_client, f"/api/v1/jobs/{job_id}", loop_app.member)
        shown = fields(listing, "job", job_id)
        assert (shown["kind"], shown["status"], shown["done"]) == (
            api_job["kind"],
            api_job["status"],
            str(api_job["done"]),
        )
    only = member_client.get("/live/jobs?kind=audit").text
    assert re.findall(r'data-job="(\d+)"', only) == [str(audit)]
    page = member_client.get(f"/jobs/{audit}").text
    assert 'data-live="/live/jobs/' in page and 'id="cancel-job"' in page
    cancelled = member_client.post(f"/jobs/{audit}/cancel", data={"csrf": form_token(page)})
    assert cancelled.status_code == 302
    assert api_get(member_client, f"/api/v1/jobs/{audit}", loop_app.member)["status"] == "cancelled"


# -- figures kept between loads -----------------------------------------------------------------


def test_figures_are_kept_only_while_the_store_is_unchanged(loop_app: LoopApp) -> None:
    client = loop_app.client()
    run = loop_app.loop.judge_run_id
    path = f"/judge-runs/{run}/checks"
    assert "kept since then" not in client.get(path + "?fresh=1").text  # asked for: computed
    assert "kept since then" in client.get(path).text  # nothing changed: kept
    with Session(loop_app.engine) as session:
        rating = session.exec(select(HumanRating).order_by(col(HumanRating.id))).first()
        assert rating is not None
        added = HumanRating(
            generation_run_id=rating.generation_run_id,
            item_id=rating.item_id,
            rubric=rating.rubric,
            rater="rater-d",
            score=3.0,
            scope="import:extra",
        )
        session.add(added)
        session.commit()
        added_id = added.id
    try:
        after = client.get(path).text
        assert "kept since then" not in after  # a rating was added: computed again
        assert "kept since then" in client.get(path).text
    finally:
        with Session(loop_app.engine) as session:
            session.delete(session.get(HumanRating, added_id))
            session.commit()
    assert "kept since then" not in client.get(path).text  # and removed: again


def test_unknown_rows_are_404_pages(member_client: Any) -> None:
    for path, message in (
        ("/datasets/nope", "nope"),
        ("/campaigns/nope", "nope"),
        ("/audits/999", "999"),
        ("/judge-runs/999/agreement", "999"),
        ("/judge-runs/999/checks", "999"),
        ("/jobs/new?kind=nope", "unknown job kind"),
    ):
        reply = member_client.get(path)
        assert reply.status_code in (400, 404) and message in reply.text, path
        assert reply.content_type.startswith("text/html")
