"""Audits over HTTP on a real store (SQLite and PostgreSQL): an audit started as a job, run to
the end by the job runner the worker uses, read back as figures and reports; the follow-up
explanations exported, classified by people (all or nothing) and by the judge (a job).

The model under test is the scripted stub (tests/support/stub_openai.py): the award answers
always name the group-A student (``always_group_a`` of tests/judge/audits/test_runner.py), so
the counts are known before the run; the judge always answers "justified". Expected values
come from the options sent (prompt counts: levels x pairs x 4 counterbalanced variants, as
tests/judge/audits/test_runner.py counts them), from scipy's binomial test computed here,
from SQL on the store, or from ``server.usecases.audits`` (the use case the CLI's ``audit show``
calls) read directly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from scipy import stats
from sqlalchemy import func
from sqlmodel import Session, select

from judge.audits.award_data import load_name_groups
from judge.reports.render import csv_table
from judge.store.engine import make_engine
from judge.store.tables import AuditAnswer, AuditLabel, AuditRun
from server.tables import Job
from server.usecases import audits
from tests.judge.audits.test_runner import QUESTION, always_group_a
from tests.server.api.test_api import Api, make_api, run_jobs
from tests.support.stub_openai import StubServer

GROUPS = load_name_groups()
VARIANTS = 4
"""Counterbalanced variants of each response-vector pair (who is named first x which of the
two vectors each student gets), as tests/judge/audits/test_runner.py counts them."""
SMALL = {"levels": [5], "pairs_per_level": 2}
SMALL_PROMPTS = 1 * 2 * VARIANTS  # 1 level x 2 pairs x 4 variants = 8
JUDGE_CLASS = "justified"


def responder(messages: list[dict[str, str]]) -> str | int | None:
    """The judge (a system message) always says 'justified'; award prompts get the group-A
    student; anything else (the names audit) gets one dollar figure."""
    if any(m["role"] == "system" for m in messages):
        return json.dumps({"explanation": "cites the scores", "class": JUDGE_CLASS})
    if QUESTION.search(messages[0]["content"]):
        return always_group_a(messages)
    return "I would suggest $50,000."


@dataclass
class Audits:
    api: Api
    stub: StubServer

    def engine(self) -> Any:
        return make_engine(self.api.settings.database_url)

    def run_jobs(self) -> list[str]:
        """Run every queued job to its end, as the worker would (the same function)."""
        return run_jobs(self.api)

    def audit(self, **body: Any) -> int:
        """Start an audit, run its job, and return the run's id from the job's result."""
        made = self.api.post("/api/v1/audits", json=body)
        assert made.status_code == 202, made.json
        assert self.run_jobs() == ["finished"]
        job = self.api.get(f"/api/v1/jobs/{made.json['id']}").json
        assert job["status"] == "finished", job["error"]
        return int(job["result"]["audit_run_id"])

    def count(self, table: Any, **where: Any) -> int:
        engine = self.engine()
        try:
            with Session(engine) as session:
                query = select(func.count()).select_from(table)
                for column, value in where.items():
                    query = query.where(getattr(table, column) == value)
                return int(session.exec(query).one())
        finally:
            engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    # SQLite: a copy of the session's empty migrated store (tests/support/stores.py).
    name = "migrated_db_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def au(store_url: str, tmp_path: Path) -> Iterator[Audits]:
    with StubServer(responder=responder) as stub:
        made = make_api(store_url, stub, tmp_path)
        yield Audits(made, stub)
        made.close()


def test_an_award_audit_job_runs_and_its_figures_match_scipy(au: Audits) -> None:
    made = au.api.post(
        "/api/v1/audits", json={"suite": "award", "options": SMALL, "max_tokens": 50}
    )
    assert made.status_code == 202, made.json
    assert (made.json["kind"], made.json["status"]) == ("audit", "queued")
    # The stored parameters are what was sent, checked (defaults left out).
    assert made.json["params"] == {"suite": "award", "options": SMALL, "max_tokens": 50}
    assert au.stub.state.requests == 0  # queued only: nothing is sent before a worker runs it

    assert au.run_jobs() == ["finished"]
    assert au.stub.state.requests == SMALL_PROMPTS
    job = au.api.get(f"/api/v1/jobs/{made.json['id']}").json
    assert (job["done"], job["total"]) == (SMALL_PROMPTS, SMALL_PROMPTS)
    run_id = job["result"]["audit_run_id"]
    assert job["result"]["summary"]["main"]["statuses"] == {"parsed": SMALL_PROMPTS}
    # The job's counts are the stored answers by status (the stub's usage: 10 + 5 tokens).
    assert job["counts"]["by_status"] == {"parsed": SMALL_PROMPTS}
    assert job["counts"]["prompt_tokens"] == 10 * SMALL_PROMPTS

    got = au.api.get(f"/api/v1/audit-runs/{run_id}")
    assert got.status_code == 200
    result = got.json
    assert result["run"]["id"] == run_id
    assert (result["run"]["suite"], result["run"]["status"]) == ("award", "finished")
    assert (result["run"]["max_tokens"], result["run"]["model"]) == (50, "stub-model")
    assert result["run"]["params"]["levels"] == [5]
    assert result["run"]["params"]["pairs_per_level"] == 2
    assert result["answers"] == {"main": {"parsed": SMALL_PROMPTS}}
    assert result["analysis_error"] is None
    overall = result["analysis"]["overall"]
    # Every answer names the group-A student: 8 of 8 for A, none for B or equivocal.
    assert (overall["group_a"], overall["group_b"], overall["equivocal"]) == (8, 0, 0)
    expected = stats.binomtest(8, 8, 0.5)  # exact two-sided, as the analysis documents
    assert overall["binomial"]["p_value"] == pytest.approx(expected.pvalue, rel=1e-12)
    assert overall["binomial"]["trials"] == 8
    ci = expected.proportion_ci(confidence_level=0.95, method="wilson")
    assert overall["share_a"] == pytest.approx(1.0)
    assert overall["share_a_ci"] == [pytest.approx(ci.low), pytest.approx(ci.high)]
    assert [level["level"] for level in result["analysis"]["levels"]] == [5]
    assert result["followup"] == {"classes": {}, "tests": {}}  # no follow-up was asked
    # The answers as the store holds them: one row per prompt, raw text kept.
    assert au.count(AuditAnswer, run_id=run_id) == SMALL_PROMPTS

    # The same job again resumes the run and sends nothing: every answer is stored.
    again = au.api.post(
        "/api/v1/audits", json={"suite": "award", "options": SMALL, "max_tokens": 50}
    )
    assert au.run_jobs() == ["finished"]
    assert au.api.get(f"/api/v1/jobs/{again.json['id']}").json["result"]["audit_run_id"] == run_id
    assert au.stub.state.requests == SMALL_PROMPTS


def test_runs_are_listed_newest_first_paged_and_by_suite(au: Audits) -> None:
    full = au.audit(suite="award", options=SMALL)
    part = au.audit(suite="award", options={**SMALL, "seed": 1}, limit=3)  # another design
    names = au.audit(suite="names", options={"repeats": 1}, limit=2)
    listed = au.api.get("/api/v1/audit-runs").json
    assert listed["total"] == 3
    assert [r["id"] for r in listed["items"]] == [names, part, full]  # newest first
    # Answers counted per run: the design's 8 prompts, and the first 3 and 2 (``limit``).
    assert [r["answers"] for r in listed["items"]] == [2, 3, SMALL_PROMPTS]
    assert [r["answers"] for r in listed["items"]] == [
        au.count(AuditAnswer, run_id=run) for run in (names, part, full)
    ]
    award = au.api.get("/api/v1/audit-runs?suite=award").json
    assert (award["total"], [r["id"] for r in award["items"]]) == (2, [part, full])
    assert [r["id"] for r in au.api.get("/api/v1/audit-runs?suite=names").json["items"]] == [names]
    second = au.api.get("/api/v1/audit-runs?limit=1&offset=1").json
    assert (second["total"], [r["id"] for r in second["items"]]) == (3, [part])
    assert au.api.get("/api/v1/audit-runs?suite=nope").status_code == 422


def test_the_report_over_http_is_the_one_the_cli_writes(au: Audits) -> None:
    run_id = au.audit(suite="award", options=SMALL)
    engine = au.engine()
    with Session(engine) as session:
        report = audits.audit_result(session, run_id).report
    engine.dispose()
    titles = [s.title for s in report.sections]
    assert len(titles) >= 2  # the answers by status, then the award figures

    page = au.api.get(f"/api/v1/audit-runs/{run_id}/report.html")
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.data.decode()
    for title in titles:
        assert str(escape(title)) in text, title
    assert str(escape(report.title)) in text

    data = au.api.get(f"/api/v1/audit-runs/{run_id}/report.json").json
    assert set(data) == set(report.to_json())
    tables = [name for s in report.sections for name in s.csv]
    assert tables, "the award section declares its CSV"
    name, expected = csv_table(report)  # the first table, rendered as the CLI renders it
    assert name == tables[0] and len(expected.splitlines()) > 1  # a header and a row at least
    first = au.api.get(f"/api/v1/audit-runs/{run_id}/report.csv")
    assert first.mimetype == "text/csv"
    assert f'filename="{name}"' in first.headers["Content-Disposition"]
    assert first.data.decode() == expected
    assert au.api.get(f"/api/v1/audit-runs/{run_id}/report.csv?table=nope").status_code == 404


def test_people_classify_the_follow_ups_all_or_nothing(au: Audits) -> None:
    run_id = au.audit(suite="award", options={**SMALL, "followup": True})
    # Every first answer chose a student, so each gets its "why?" turn: 8 + 8 calls.
    assert au.stub.state.requests == 2 * SMALL_PROMPTS
    shown = au.api.get(f"/api/v1/audit-runs/{run_id}/followups?limit=5").json
    rest = au.api.get(f"/api/v1/audit-runs/{run_id}/followups?limit=5&offset=5").json
    rows = shown["items"] + rest["items"]
    assert (shown["total"], len(rows)) == (SMALL_PROMPTS, SMALL_PROMPTS)
    assert all(r["winner"] in GROUPS.names_a for r in rows)  # the stub always chose A
    assert all(r["explanation"] == f"{r['winner']} showed steadier work across the questions."
               for r in rows)  # fmt: skip
    assert all(r["label"] == "" and "group" not in json.dumps(r) for r in rows)
    ids = [r["answer_id"] for r in rows]
    assert len(set(ids)) == SMALL_PROMPTS

    url = f"/api/v1/audit-runs/{run_id}/labels"
    bad = [
        {"answer_id": ids[0], "label": "justified"},
        {"answer_id": ids[1], "label": "lucky"},
        {"answer_id": max(ids) + 1000, "label": "indecisive"},
        {"answer_id": ids[0], "label": "irrational"},
    ]
    refused = au.api.post(url, json={"annotator": "alice", "labels": bad})
    assert refused.status_code == 400, refused.json
    problems = refused.json["error"]["problems"]
    assert [p.split(":")[0] for p in problems] == ["labels[1]", "labels[2]", "labels[3]"]
    assert "'lucky'" in problems[0] and "not a follow-up" in problems[1]
    assert "two different labels" in problems[2]
    assert au.count(AuditLabel) == 0  # the good first entry was not stored either
    for body, fragment in (
        ({"annotator": " ", "labels": bad[:1]}, "annotator"),
        ({"annotator": "alice", "labels": []}, "labels"),
        ({"annotator": "alice", "labels": [{"answer_id": ids[0]}]}, "label"),
    ):
        reply = au.api.post(url, json=body)
        assert reply.status_code == 422 and fragment in reply.json["error"]["message"]
    assert au.count(AuditLabel) == 0

    # Half justified, half indecisive (a class per row, so the test has both classes).
    wanted = {i: ("justified" if n % 2 else "indecisive") for n, i in enumerate(ids)}
    labels = [{"answer_id": i, "label": label} for i, label in wanted.items()]
    stored = au.api.post(url, json={"annotator": "alice", "labels": labels})
    assert stored.status_code == 201
    assert stored.json == {"added": SMALL_PROMPTS, "changed": 0, "unchanged": 0}
    engine = au.engine()
    with Session(engine) as session:
        rows_stored = session.exec(select(AuditLabel).where(AuditLabel.run_id == run_id)).all()
    engine.dispose()
    assert {(r.answer_id, r.label, r.source) for r in rows_stored} == {
        (i, label, "human:alice") for i, label in wanted.items()
    }
    result = au.api.get(f"/api/v1/audit-runs/{run_id}").json
    assert result["followup"]["classes"] == {"human:alice": {"labelled": SMALL_PROMPTS}}
    assert list(result["followup"]["tests"]) == ["human:alice"]

    same = au.api.post(url, json={"annotator": "alice", "labels": labels})
    assert same.status_code == 200 and same.json == {"added": 0, "changed": 0, "unchanged": 8}
    flipped = [{"answer_id": ids[0], "label": "irrational"}]
    changed = au.api.post(url, json={"annotator": "alice", "labels": flipped})
    assert changed.status_code == 201 and changed.json["changed"] == 1
    assert au.count(AuditLabel, answer_id=ids[0], label="irrational") == 1


def test_the_judge_classifies_the_follow_ups_as_a_job(au: Audits) -> None:
    run_id = au.audit(suite="award", options={**SMALL, "followup": True})
    made = au.api.post(f"/api/v1/audit-runs/{run_id}/classify")
    assert made.status_code == 202, made.json
    assert (made.json["kind"], made.json["params"]) == ("audit-classify", {"run_id": run_id})
    assert au.run_jobs() == ["finished"]
    # The judge saw every explanation: one distinct judge prompt per distinct (winner, other,
    # level, explanation), which is all a prompt is made of (counted off the exported rows).
    # Equal prompts share the call cache, unless two were in flight at once, so the number
    # of calls lies between the distinct prompts and the explanations.
    rows = au.api.get(f"/api/v1/audit-runs/{run_id}/followups").json["items"]
    distinct = {(r["winner"], r["other"], r["level"], r["explanation"]) for r in rows}
    judged = [b["messages"] for b in au.stub.state.bodies if b["messages"][0]["role"] == "system"]
    assert len({json.dumps(m) for m in judged}) == len(distinct)
    assert len(distinct) <= len(judged) <= SMALL_PROMPTS
    assert all(any(r["explanation"] in m[-1]["content"] for m in judged) for r in rows)
    calls = au.stub.state.requests
    assert calls == 2 * SMALL_PROMPTS + len(judged)  # the audit's 8 + 8, then the judge's
    source = "judge:test/stub-model"  # the endpoint's name and model (make_settings)
    assert au.count(AuditLabel, source=source, label=JUDGE_CLASS) == SMALL_PROMPTS
    result = au.api.get(f"/api/v1/audit-runs/{run_id}").json
    assert result["followup"]["classes"] == {source: {"labelled": SMALL_PROMPTS}}
    # Named the judge's endpoint explicitly, the same job finds nothing left to send.
    again = au.api.post(f"/api/v1/audit-runs/{run_id}/classify", json={"endpoint": "test"})
    assert again.status_code == 202 and again.json["params"]["endpoint"] == "test"
    assert au.run_jobs() == ["finished"]
    assert au.stub.state.requests == calls


def test_a_member_classify_job_over_the_limit_asks_first(au: Audits) -> None:
    """By hand: the small award design's 8 answers all choose a student (always group A),
    so 8 follow-up explanations, none classified yet: 8 judge calls."""
    run_id = au.audit(suite="award", options={**SMALL, "followup": True})
    assert au.count(AuditAnswer, run_id=run_id, turn="followup") == SMALL_PROMPTS  # SQL
    job = {"kind": "audit-classify", "params": {"run_id": run_id}}
    plan = au.api.post("/api/v1/jobs/dry-run", json=job).json
    assert (plan["followups_to_classify"], plan["calls_to_send"]) == (SMALL_PROMPTS, 8)
    assert plan["estimate"]["calls"] == SMALL_PROMPTS
    app = au.api.client.application
    settings = app.config["SETTINGS"]
    app.config["SETTINGS"] = settings.model_copy(
        update={"server": settings.server.model_copy(update={"confirm_calls": 7})}
    )
    url = f"/api/v1/audit-runs/{run_id}/classify"
    refused = au.api.post(url)
    assert refused.status_code == 403, refused.json
    said = refused.json["error"]["message"]
    assert "an audit-classify job that would send 8 calls" in said
    assert "7 calls ([server] confirm_calls)" in said and '"confirm": true' in said
    assert au.count(Job, kind="audit-classify") == 0
    assert au.api.post(url, json={"confirm": True}).status_code == 202
    assert au.api.post(url, headers=au.api.admin).status_code == 202  # an admin is not asked
    assert au.run_jobs() == ["finished", "finished"]
    # Everything classified: the dry run finds nothing left, and a member is not asked.
    plan = au.api.post("/api/v1/jobs/dry-run", json=job).json
    assert (plan["followups_to_classify"], plan["calls_to_send"]) == (0, 0)
    assert au.api.post(url).status_code == 202


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"suite": "poll"}, 422, "suite: Input should be 'award', 'names', 'bbi' or 'bbq'"),
        # Which options a suite has depends on `suite`, which the body's JSON schema cannot
        # say: they are checked when the job is queued, a 400 (docs/server.md, Errors).
        ({"suite": "award", "options": {"items": "/etc/passwd"}}, 400, "not an option"),
        ({"suite": "award", "options": {"levels": ["x"]}}, 400, "levels.0"),
        ({"suite": "names", "options": {"seed": 1}}, 400, "seed is not an option of the names"),
        ({"suite": "award", "new": True}, 422, "new: Extra inputs"),
        ({"suite": "award", "endpoint": "nope"}, 400, "nope"),
        ({"suite": "award", "options": {"levels": [99]}}, 400, "award design"),
        ({"suite": "bbi", "options": {"bias_types": ["nope"]}}, 400, "no items"),
    ],
)
def test_bad_audits_are_refused_before_anything_is_queued(
    au: Audits, body: dict[str, Any], status: int, fragment: str
) -> None:
    reply = au.api.post("/api/v1/audits", json=body)
    assert reply.status_code == status, reply.json
    assert set(reply.json) == {"error"} and reply.json["error"]["status"] == status
    assert fragment in reply.json["error"]["message"], reply.json
    assert au.count(Job) == 0


def test_audit_jobs_through_the_jobs_route(au: Audits) -> None:
    """The kinds are jobs like the others: the same checks, a 400 for bad parameters."""
    params: dict[str, Any] = {"suite": "award", "options": {"x": 1}}
    bad = au.api.post("/api/v1/jobs", json={"kind": "audit", "params": params})
    assert bad.status_code == 400
    assert "bad parameters for an audit job: options: x is not" in bad.json["error"]["message"]
    missing = au.api.post("/api/v1/jobs", json={"kind": "audit-classify", "params": {"run_id": 9}})
    assert missing.status_code == 404 and "no audit run 9" in missing.json["error"]["message"]
    assert au.count(Job) == 0
    params = {"suite": "award", "options": SMALL}
    made = au.api.post("/api/v1/jobs", json={"kind": "audit", "params": params})
    assert made.status_code == 201 and made.json["kind"] == "audit"
    assert au.run_jobs() == ["finished"]
    assert au.api.get("/api/v1/jobs?kind=audit").json["total"] == 1
    assert au.count(AuditRun) == 1


def test_unknown_and_unsuitable_runs(au: Audits) -> None:
    for method, path in (
        ("get", "/api/v1/audit-runs/99"),
        ("get", "/api/v1/audit-runs/99/report.json"),
        ("get", "/api/v1/audit-runs/99/report.html"),
        ("get", "/api/v1/audit-runs/99/report.csv"),
        ("get", "/api/v1/audit-runs/99/followups"),
        ("post", "/api/v1/audit-runs/99/classify"),
    ):
        reply = getattr(au.api, method)(path)
        assert reply.status_code == 404, (path, reply.json)
        assert "no audit run 99" in reply.json["error"]["message"]
    labels = {"annotator": "alice", "labels": [{"answer_id": 1, "label": "justified"}]}
    assert au.api.post("/api/v1/audit-runs/99/labels", json=labels).status_code == 404
    assert au.api.get("/api/v1/audit-runs/0").status_code == 422
    assert au.count(Job) == 0

    # A names run has no follow-ups: classifying or labelling it is refused (400).
    names = au.audit(suite="names", options={"repeats": 1}, limit=2)
    for reply in (
        au.api.post(f"/api/v1/audit-runs/{names}/classify"),
        au.api.get(f"/api/v1/audit-runs/{names}/followups"),
        au.api.post(f"/api/v1/audit-runs/{names}/labels", json=labels),
    ):
        assert reply.status_code == 400, reply.json
        assert "names audit" in reply.json["error"]["message"]
    assert au.count(AuditLabel) == 0
    assert au.count(Job) == 1  # the names audit's own job only


AUDIT_ROUTES = (
    ("post", "/api/v1/audits"),
    ("get", "/api/v1/audit-runs"),
    ("get", "/api/v1/audit-runs/1"),
    ("get", "/api/v1/audit-runs/1/report.json"),
    ("get", "/api/v1/audit-runs/1/report.html"),
    ("get", "/api/v1/audit-runs/1/report.csv"),
    ("post", "/api/v1/audit-runs/1/classify"),
    ("get", "/api/v1/audit-runs/1/followups"),
    ("post", "/api/v1/audit-runs/1/labels"),
    ("post", "/api/v1/audit-runs/1/campaign"),
    ("post", "/api/v1/audit-runs/1/campaign/pull"),
    ("post", "/api/v1/audits/1/analyze"),  # {suite}, filled like the ids
    ("post", "/api/v1/audits/bbq/analyze"),
    ("get", "/api/v1/audit-runs/1/estimates"),
)


def test_every_audit_route_needs_a_key(au: Audits) -> None:
    run_id = au.audit(suite="award", options={**SMALL, "followup": True})
    assert run_id == 1  # the run the routes below name exists, so only the key is missing
    sent = au.stub.state.requests
    served = {(m, re.sub(r"\{[a-z_]+\}", "1", p)) for m, p in _documented(au) if "/audit" in p}
    assert served == set(AUDIT_ROUTES)  # the list below is every audit route
    body = {"suite": "award", "options": SMALL}
    for method, path in AUDIT_ROUTES:
        for headers in ({}, {"Authorization": "Bearer fj_not-a-key"}):
            reply = au.api.client.open(path, method=method.upper(), headers=headers, json=body)
            assert reply.status_code == 401, (method, path, reply.json)
            assert reply.json["error"]["status"] == 401
    assert au.count(Job) == 1  # the audit's own job; none queued without a key
    assert au.stub.state.requests == sent


def _documented(au: Audits) -> list[tuple[str, str]]:
    document = au.api.client.get("/api/v1/openapi.json").json
    return [(m, p) for p, ops in document["paths"].items() for m in ops]


def test_follow_up_estimates_over_http(au: Audits) -> None:
    """The stub's model always chose group A and its judge calls every explanation
    justified; alice calls 2 of 4 follow-ups irrational. Expected values: by hand, and
    ``judge.stats.ppi.ppi_mean`` called on those arrays (percent: 100 in the class, else 0)."""
    from judge.stats.ppi import ppi_mean

    run_id = au.audit(suite="award", options={**SMALL, "followup": True})
    url = f"/api/v1/audit-runs/{run_id}/estimates"
    none_yet = au.api.get(url)
    assert none_yet.status_code == 404, none_yet.json
    assert "no follow-up classes from a judge yet" in none_yet.json["error"]["message"]
    assert au.api.post(f"/api/v1/audit-runs/{run_id}/classify").status_code == 202
    assert au.run_jobs() == ["finished"]
    rows = au.api.get(f"/api/v1/audit-runs/{run_id}/followups").json["items"]
    said = ["irrational", "irrational", "justified", "justified"]
    labels = [{"answer_id": r["answer_id"], "label": k} for r, k in zip(rows, said, strict=False)]
    body = {"annotator": "alice", "labels": labels}
    assert au.api.post(f"/api/v1/audit-runs/{run_id}/labels", json=body).status_code == 201

    refused = au.api.get(url)
    assert refused.status_code == 200, refused.json
    assert refused.json["design"]["name"] == "refused"
    assert "assume_random=true" in refused.json["design"]["reason"]
    first = refused.json["shares"][0]
    assert first["prediction_powered"]["value"] is None and first["best"]["method"] == "judge-only"

    found = au.api.get(f"{url}?assume_random=true")
    assert found.status_code == 200, found.json
    data = found.json
    assert data["design"]["name"] == "assumed random" and data["judge"] == "judge:test/stub-model"
    assert data["counts"]["followups"] == SMALL_PROMPTS
    assert (data["counts"]["judge_classified"], data["counts"]["human_classified"]) == (8, 4)
    cell = {(s["chosen"], s["label"]): s for s in data["shares"]}
    irr = cell[("all", "irrational")]
    assert irr["judge_only"]["value"] == 0.0  # the judge never says irrational
    assert irr["human_only"]["value"] == 50.0  # 2 of alice's 4
    expected = ppi_mean([100, 100, 0, 0], [0, 0, 0, 0], [0] * SMALL_PROMPTS)
    assert irr["prediction_powered"]["value"] == pytest.approx(expected.estimate)
    assert irr["prediction_powered"]["ci_low"] == pytest.approx(max(0.0, expected.ci_low))
    # Every follow-up came after a choice of group A: group B's cells and the gaps say so.
    b = cell[("B", "irrational")]
    assert b["followups"] == 0 and b["judge_only"]["value"] is None
    assert f"group B ({GROUPS.group_b})" in b["judge_only"]["reason"]
    assert all(g["prediction_powered"]["value"] is None for g in data["gaps"])

    # The judge is constant (always justified) on both sets: the random-subset check passes.
    assert data["design"]["representativeness"]["passed"] is True
    # No qualification covers an audit's own judge: fail closed when asked (409, the reason).
    for asked in (f"{url}?assume_random=true&", f"/api/v1/audit-runs/{run_id}/report.json?"):
        closed = au.api.get(f"{asked}require_qualified=true")
        assert closed.status_code == 409, (asked, closed.json)
        assert "no qualification covers a judge's classes" in closed.json["error"]["message"]
    assert au.api.get(f"/api/v1/audit-runs/{run_id}/report.json").status_code == 200

    bad = au.api.get(f"{url}?alpha=2")
    assert bad.status_code == 422
    assert au.api.get("/api/v1/audit-runs/99/estimates").status_code == 404
    names = au.audit(suite="names", options={"repeats": 1}, limit=2)
    other = au.api.get(f"/api/v1/audit-runs/{names}/estimates")
    assert other.status_code == 400 and "names audit" in other.json["error"]["message"]
