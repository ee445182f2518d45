"""BBQ over HTTP and on the dashboard (issue 45): an audit job of the bbq suite reads the
items the server's config names (``[audits] bbq_data``; unset, a 400 that says to set it),
runs the use case ``audit bbq run`` runs, and its figures come back on the audit run API and
its dashboard page; ``POST /api/v1/audits/bbq/analyze`` scores predictions sent as text.

Expected values: the planted answering habits of tests/server/cli/test_audit_bbq_cli.py
(always the stereotyped answer: s_DIS = s_AMB = 1 by hand; "unknown" whenever the context
is ambiguous: ambiguous accuracy 1, s_AMB 0 by hand), a balanced habit scored by that
file's second implementation written from the paper (``paper_figures``), and for the
analyze route the real CLI's ``audit bbq analyze --from-file`` on the same shared UnifiedQA
predictions (a second path through the code) and that second implementation again.
"""

from __future__ import annotations

import csv
import gzip
import html
import io
import json
import re
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from judge.audits.bbq_data import CATEGORIES
from judge.config import load_settings
from judge.config_audits import AuditsConfig
from judge.store.engine import make_engine
from server import create_app
from server.tables import Job
from server.usecases.audit_requests import BbqCategory
from tests.server.api.test_api import Api, jobs_stored, make_api, run_jobs
from tests.server.cli.test_audit_bbq_cli import (
    BBQ,
    BBQ_ITEM,
    HABITS,
    _roles,
    _subset,
    needs_bbq,
    paper_figures,
)
from tests.server.dashboard.helpers import form_token, sign_in
from tests.support.cli import fairjudge
from tests.support.factories import write_config
from tests.support.stub_openai import StubServer

SUBSET_ITEMS = 24
"""``_subset``: 12 items each of Age and Religion."""


def _with_data(made: Api, data: Path | str | None) -> Api:
    """``made`` with ``[audits] bbq_data`` set to ``data`` (None: left unset)."""
    if data is not None:
        settings = made.settings.model_copy(update={"audits": AuditsConfig(bbq_data=str(data))})
        made.settings = settings
        made.client.application.config["SETTINGS"] = settings
    return made


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    name = "migrated_db_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def bare(migrated_db_url: str, tmp_path: Path) -> Iterator[Api]:
    """The API on SQLite with no ``[audits] bbq_data``; the stub answers anything."""
    with StubServer() as stub:
        made = make_api(migrated_db_url, stub, tmp_path)
        yield made
        made.close()


# -- the setting ----------------------------------------------------------------------------


def test_a_bbq_audit_without_the_setting_is_a_400_that_says_to_set_it(bare: Api) -> None:
    asks = [
        ("/api/v1/audits", {"suite": "bbq", "limit": 5}),
        ("/api/v1/jobs", {"kind": "audit", "params": {"suite": "bbq", "limit": 5}}),
        ("/api/v1/jobs/dry-run", {"kind": "audit", "params": {"suite": "bbq", "limit": 5}}),
    ]
    for path, body in asks:
        reply = bare.post(path, json=body)
        assert reply.status_code == 400, (path, reply.json)
        said = reply.json["error"]["message"]
        assert "set [audits] bbq_data = PATH" in said and "\n" not in said, path
    assert jobs_stored(bare) == 0
    # The planted case that must pass: another suite on the same server is queued.
    other = bare.post(
        "/api/v1/audits", json={"suite": "names", "options": {"repeats": 1}, "limit": 3}
    )
    assert other.status_code == 202, other.json
    assert jobs_stored(bare) == 1


def test_a_request_names_no_file_and_categories_are_bbqs_own(bare: Api, tmp_path: Path) -> None:
    assert typing.get_args(BbqCategory) == CATEGORIES  # the options' list is the reader's
    _with_data(bare, tmp_path / "never-read.jsonl")  # the options are refused before any read
    for options, words in (
        ({"data": "/etc/passwd"}, "options: data is not an option of the bbq suite"),
        ({"categories": ["Hobbies"]}, "options: categories.0: Input should be 'Age'"),
        ({"seed": True}, "seed: expected a number, got true"),
    ):
        reply = bare.post("/api/v1/audits", json={"suite": "bbq", "options": options})
        assert reply.status_code == 400, options
        assert words in reply.json["error"]["message"], reply.json
    assert jobs_stored(bare) == 0


def test_a_relative_bbq_data_is_read_from_the_config_files_folder(tmp_path: Path) -> None:
    config = tmp_path / "conf" / "fairjudge.toml"
    config.parent.mkdir()
    endpoint = '[endpoints.embedded]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    config.write_text(endpoint + '[audits]\nbbq_data = "bbq/items.jsonl"\n', encoding="utf-8")
    assert load_settings(config).audits.bbq_data == str(config.parent / "bbq" / "items.jsonl")
    config.write_text(endpoint, encoding="utf-8")
    assert load_settings(config).audits.bbq_data == ""  # unset by default


# -- an audit job on planted habits ---------------------------------------------------------


def _balanced(items: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """Never "unknown": within each category and context, in file order, the stereotyped
    answer and the anti-stereotyped one in turn. Each of the four cells of the subset has 6
    items, so half of the answers in each are biased: both raw scores are 2 * 3/6 - 1 = 0,
    so s_DIS = 0 and s_AMB = (1 - 0) * 0 = 0 (by hand), in each category and overall."""
    seen: dict[tuple[str, str], int] = {}
    picks = {}
    for r in items:
        cell = (r["category"], r["context_condition"])
        turn = seen.get(cell, 0)
        seen[cell] = turn + 1
        picks[(r["context"], r["question"])] = "stereo" if turn % 2 == 0 else "anti"
    return picks


def _habit(items: list[dict[str, Any]], habit: str) -> Callable[[dict[str, Any]], str]:
    """The answer text the planted model gives to an item."""
    if habit != "balanced":
        answer = HABITS[habit][0]
        return lambda r: answer(r["context_condition"], _roles(r))
    picks = _balanced(items)
    return lambda r: _roles(r)[picks[(r["context"], r["question"])]]


def _responder(items: list[dict[str, Any]], pick: Callable[[dict[str, Any]], str]) -> Any:
    """A model answering each prompt with the letter under which it shows ``pick(item)``
    (the options' order is the prompt's own: read off it, as the CLI's test does)."""
    by_prompt = {(r["context"], r["question"]): r for r in items}

    def respond(messages: list[dict[str, str]]) -> str:
        text = messages[-1]["content"]
        context, question = text.split("\n\n")[:2]
        want = pick(by_prompt[(context, question)])
        letters = dict(re.findall(r"^([ABC])\. (.*)$", text, re.M))
        return next(letter for letter, option in letters.items() if option == want)

    return respond


@needs_bbq
@pytest.mark.parametrize("habit", ["stereotyped", "unknown", "balanced"])
def test_a_bbq_job_over_the_api_gives_the_planted_figures(
    store_url: str, tmp_path: Path, habit: str
) -> None:
    data, items = _subset(tmp_path)
    pick = _habit(items, habit)
    with StubServer(responder=_responder(items, pick)) as stub:
        made = _with_data(make_api(store_url, stub, tmp_path), data)
        try:
            params = {"suite": "bbq", "options": {"seed": 3}}
            plan = made.post("/api/v1/jobs/dry-run", json={"kind": "audit", "params": params})
            assert plan.status_code == 200, plan.json
            assert plan.json["calls_to_send"] == SUBSET_ITEMS and stub.state.requests == 0
            started = made.post("/api/v1/audits", json=params)
            assert started.status_code == 202, started.json
            assert started.json["params"] == params  # the path is the server's, never stored
            assert run_jobs(made) == ["finished"]
            assert stub.state.requests == SUBSET_ITEMS
            job = made.get(f"/api/v1/jobs/{started.json['id']}").json
            run_id = job["result"]["audit_run_id"]
            got = made.get(f"/api/v1/audit-runs/{run_id}").json
            listed = made.get("/api/v1/audit-runs", query_string={"suite": "bbq"})
            report = made.get(f"/api/v1/audit-runs/{run_id}/report.json").json
            page = _dashboard_page(made, run_id)
        finally:
            made.close()
    assert (got["run"]["suite"], got["run"]["status"]) == ("bbq", "finished")
    assert got["run"]["params"]["seed"] == 3 and got["run"]["params"]["data"] == str(data)
    assert got["answers"] == {"main": {"parsed": SUBSET_ITEMS}}
    assert got["analysis_error"] is None
    assert listed.status_code == 200 and [r["id"] for r in listed.json["items"]] == [run_id]
    analysis = got["analysis"]
    groups = {"all": analysis["overall"], **analysis["by_category"]}
    assert set(groups) == {"all", "Age", "Religion"}
    # The hand-derived extremes (HABITS; balanced: its docstring), and the second
    # implementation on the same answers.
    by_hand = HABITS[habit][1] if habit != "balanced" else {"s_dis": 0.0, "s_amb": 0.0}
    # (Always unknown when ambiguous leaves the paper's raw score 0/0 there: by hand only.)
    answers = [{**r, "pick": pick(r)} for r in items]
    paper = paper_figures(answers, "pick") if habit != "unknown" else {w: {} for w in groups}
    for where, group in groups.items():
        for name, value in by_hand.items():
            assert group[name]["value"] == pytest.approx(value, abs=1e-12), (where, name)
        for name, value in paper[where].items():
            have = group[name]["value"] if isinstance(group[name], dict) else group[name]
            assert have == pytest.approx(value, abs=1e-12), (where, name)
    if habit == "stereotyped":  # the flagged case: the paper's largest bias in both contexts
        assert groups["all"]["s_amb"]["value"] == 1.0 and groups["all"]["s_dis"]["value"] == 1.0
    else:  # not flagged: no bias in ambiguous contexts
        assert groups["all"]["s_amb"]["value"] == 0.0
    # The report (report.json, the dashboard) carries the same figures.
    assert report["bbq"]["overall"]["s_amb"] == analysis["overall"]["s_amb"]
    assert "BBQ accuracy and bias scores" in page and "s_AMB x 100 by category" in page
    shown = f"{100 * analysis['overall']['s_amb']['value']:.1f}"
    assert shown in page


@needs_bbq
def test_a_cli_made_bbq_run_reads_back_over_http_and_a_job_resumes_it(
    migrated_db_url: str, tmp_path: Path
) -> None:
    """``audit bbq run`` stores the run; the API and the dashboard read it as they read a
    job's; a job with the same design (the config naming the same file) resumes that run
    and sends nothing (a run is identified by the data's path and hash, the seed and the
    sampling)."""
    data, items = _subset(tmp_path)
    pick = _habit(items, "stereotyped")
    with StubServer(responder=_responder(items, pick)) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, migrated_db_url)
        done = fairjudge("--config", config, "audit", "bbq", "run", "--data", data, "--json")
        assert done.returncode == 0, done.stderr
        cli = json.loads(done.stdout)
        sent = stub.state.requests
        assert sent == SUBSET_ITEMS
        made = _with_data(make_api(migrated_db_url, stub, tmp_path), data)
        try:
            run_id = cli["run"]["id"]
            got = made.get(f"/api/v1/audit-runs/{run_id}").json
            page = _dashboard_page(made, run_id)
            table = made.get(f"/api/v1/audit-runs/{run_id}/report.csv?table=bbq.csv")
            started = made.post("/api/v1/audits", json={"suite": "bbq"})
            assert started.status_code == 202, started.json
            assert run_jobs(made) == ["finished"]
            job = made.get(f"/api/v1/jobs/{started.json['id']}").json
        finally:
            made.close()
    assert got["analysis"] == cli["analysis"]
    assert got["analysis"]["overall"]["s_amb"]["value"] == 1.0  # always stereotyped, by hand
    assert "BBQ accuracy and bias scores" in page and "100.0 [100.0, 100.0]" in page
    assert job["result"]["audit_run_id"] == run_id and stub.state.requests == sent
    rows = {r["category"]: r for r in csv.DictReader(io.StringIO(table.text))}
    assert table.status_code == 200 and set(rows) == {"all", "Age", "Religion"}
    assert float(rows["all"]["s_amb_value"]) == 1.0 and rows["all"]["items"] == "24"


def _dashboard_page(made: Api, run_id: int) -> str:
    """The audit run's dashboard page, read by a member signed in as a browser is."""
    app = create_app({"SETTINGS": made.settings, "TESTING": True, "SECRET_KEY": "test"})
    client = app.test_client()
    key = made.member["Authorization"].removeprefix("Bearer ")
    assert sign_in(client, key).status_code == 302
    reply = client.get(f"/audits/{run_id}")
    assert reply.status_code == 200, reply.text
    return html.unescape(reply.text)


@needs_bbq
def test_the_dashboard_job_form_starts_a_bbq_audit_and_refuses_one_without_data(
    bare: Api, tmp_path: Path
) -> None:
    app = create_app({"SETTINGS": bare.settings, "TESTING": True, "SECRET_KEY": "test"})
    client = app.test_client()
    assert sign_in(client, bare.member["Authorization"].removeprefix("Bearer ")).status_code == 302
    form = client.get("/jobs/new?kind=audit").text
    assert '<option value="bbq"' in form
    data = {
        "csrf": form_token(form),
        "kind": "audit",
        "suite": "bbq",
        "options": '{"categories": ["Religion"]}',
        "limit": "5",
    }
    refused = client.post("/jobs/new", data=data)
    assert refused.status_code == 400 and "set [audits] bbq_data" in html.unescape(refused.text)
    assert jobs_stored(bare) == 0
    path, _ = _subset(tmp_path)
    settings = bare.settings.model_copy(update={"audits": AuditsConfig(bbq_data=str(path))})
    app.config["SETTINGS"] = settings
    shown = client.post("/jobs/new/dry-run", data=data)
    assert shown.status_code == 200 and "5 calls" in html.unescape(shown.text)
    started = client.post("/jobs/new", data=data)
    assert started.status_code == 302, started.text
    engine = make_engine(bare.settings.database_url)
    with Session(engine) as session:
        (job,) = session.exec(select(Job)).all()
    engine.dispose()
    assert (job.kind, job.params) == (
        "audit",
        {"suite": "bbq", "options": {"categories": ["Religion"]}, "limit": 5},
    )


# -- predictions made elsewhere, posted ------------------------------------------------------


def _shared_text() -> str:
    """The shared files' lines, in the order the CLI reads the folder (file names sorted)."""
    return "".join(
        gzip.open(p, "rt", encoding="utf-8").read() for p in sorted(BBQ.glob("*.jsonl.gz"))
    )


@needs_bbq
def test_the_analyze_route_equals_the_clis_figures_on_the_shared_predictions(bare: Api) -> None:
    text = _shared_text()
    reply = bare.post("/api/v1/audits/bbq/analyze", json={"jsonl": text, "predictions": "arc"})
    assert reply.status_code == 200, reply.json
    got = reply.json
    done = fairjudge(
        "audit", "bbq", "analyze", "--from-file", str(BBQ), "--predictions", "arc", "--json"
    )
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)
    assert set(got["by_category"]) == set(cli["by_category"])
    for where in ("overall", *cli["by_category"]):
        mine = got["overall"] if where == "overall" else got["by_category"][where]
        theirs = cli["overall"] if where == "overall" else cli["by_category"][where]
        for name, value in theirs.items():
            if isinstance(value, dict):
                for part in ("value", "low", "high"):
                    assert mine[name][part] == pytest.approx(value[part], abs=1e-12), (where, name)
            else:
                assert mine[name] == value, (where, name)
    assert got["interval"] == cli["interval"]
    assert got["no_single_target"]["n"] == cli["no_single_target"]["n"] == 36
    assert got["unread"]["by_reason"] == cli["unread"]["by_reason"]
    assert got["unread"]["by_reason"] == {"prediction matches no option": 12}
    assert got["note"] is not None and "12 predictions match no option" in got["note"]
    assert got["source"] == {"path": "the jsonl text", "predictions": "arc", "categories": []}
    # And the paper's definitions, written apart (tests/server/cli/test_audit_bbq_cli.py).
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    paper = paper_figures(rows, "unifiedqa-t5-11b_pred_arc")
    assert got["overall"]["s_amb"]["value"] == pytest.approx(paper["all"]["s_amb"], abs=1e-12)
    assert got["overall"]["s_dis"]["value"] == pytest.approx(paper["all"]["s_dis"], abs=1e-12)


GOOD = {**BBQ_ITEM, "prediction": "the old man"}
"""The CLI tests' valid item (tests/server/cli/test_audit_bbq_cli.py), whose prediction is the
target: in an ambiguous context, a wrong and biased answer."""


def test_a_bad_text_is_a_400_listing_every_problem_and_a_good_one_is_scored(bare: Api) -> None:
    route = "/api/v1/audits/bbq/analyze"
    # 60 items of an unknown category, more than the 50 lines the CLI's message shows.
    bad = [{**GOOD, "example_id": k, "category": "Hobbies"} for k in range(1, 61)]
    lines = [
        json.dumps(GOOD),
        *map(json.dumps, bad),
        "{not json",
        json.dumps({**GOOD, "label": 7, "example_id": 99}),
    ]
    body = {"jsonl": "\n".join(lines) + "\n", "predictions": "prediction"}
    reply = bare.post(route, json=body)
    assert reply.status_code == 400
    error = reply.json["error"]
    assert error["message"] == "the jsonl text: invalid BBQ items (nothing was read)"
    problems = error["problems"]
    assert len(problems) == 62  # 60 categories + 1 not JSON + 1 label, counted by hand
    assert problems[0].startswith("line 2: body.jsonl: unknown category 'Hobbies'")
    assert problems[59].startswith("line 61: body.jsonl: unknown category 'Hobbies'")
    assert problems[60].startswith("line 62: body.jsonl: not JSON")
    assert problems[61] == "line 63: body.jsonl: label must be 0, 1 or 2, got 7"
    assert not any(p.startswith("line 1:") for p in problems)
    missing = bare.post(route, json={"jsonl": json.dumps(GOOD), "predictions": "race"})
    assert missing.status_code == 400
    assert missing.json["error"]["problems"] == [
        "line 1: body.jsonl: missing prediction field unifiedqa-t5-11b_pred_race"
    ]
    # The good line alone is scored: one ambiguous item, answered with its target (biased,
    # wrong): accuracy 0, raw score 2 * 1/1 - 1 = 1, s_AMB = (1 - 0) * 1 = 1; one template,
    # so no interval; no disambiguated item, so accuracy and s_DIS there are undefined (null).
    good = bare.post(route, json={"jsonl": json.dumps(GOOD), "predictions": "prediction"})
    assert good.status_code == 200, good.json
    overall = good.json["overall"]
    assert overall["s_amb"] == {"value": 1.0, "low": None, "high": None}
    assert overall["accuracy_ambig"]["value"] == 0.0
    assert overall["s_dis"]["value"] is None and overall["accuracy_disambig"]["value"] is None
    assert (overall["answered_ambig"], overall["non_unknown_ambig"]) == (1, 1)
    assert good.json["note"] is None and good.json["unread"]["by_reason"] == {}
    # A lone surrogate (the JSON escape \ud800) is no character: refused by the body's
    # schema (422) before the text is written anywhere, never a 500.
    odd = json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "example_id": 1})[:-1] + '"x": "\ud800"}'
    reply = bare.post(route, json={"jsonl": odd, "predictions": "prediction"})
    assert reply.status_code == 422, reply.json
    assert reply.json["error"]["problems"] == [
        "jsonl: Input should be a valid string, unable to parse raw data as a unicode string"
    ]


def test_a_body_over_the_servers_limit_is_a_413_naming_it(
    migrated_db_url: str, tmp_path: Path
) -> None:
    with StubServer() as stub:
        made = make_api(migrated_db_url, stub, tmp_path, max_body_mb=0.01)
        try:
            text = (json.dumps(GOOD) + "\n") * 40  # about 24 KB, over 0.01 MiB (10,485 bytes)
            reply = made.post(
                "/api/v1/audits/bbq/analyze", json={"jsonl": text, "predictions": "prediction"}
            )
        finally:
            made.close()
    assert reply.status_code == 413
    assert "[server] max_body_mb" in reply.json["error"]["message"]
