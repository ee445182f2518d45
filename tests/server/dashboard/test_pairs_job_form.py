"""The dashboard's job form starts a judge-pairs job (issue 45), as it starts the other kinds:
the form is generated from ``JudgePairsRequest``, posts into it, and the finished job's page
links to the pairwise page of the job's judge.

The store (conftest.py) holds one generation run of the 18 S1 items; a second run of other
answers to the same 18 items is imported here, so each of the 18 questions is judged in both
orders once: 36 calls (by hand). The module's stub replies with its default text, not a
verdict, so every verdict is stored unreadable (docs/pairwise.md, "Reading a reply"): 18
pairs, all unreadable, still shown under their judge.
"""

from __future__ import annotations

import html
import re

import pytest
from flask.testing import FlaskClient
from sqlmodel import Session, func, select

from judge.data.responses import import_responses
from judge.store.tables import Item, Response
from server.jobs import queue
from server.tables import Job
from tests.server.dashboard.helpers import S1_ITEMS, Store, fields, form_token


@pytest.fixture(scope="module")
def other_run(store: Store) -> int:
    with Session(store.engine) as session:
        keys = session.exec(
            select(Item.key)
            .join(Response, Response.item_id == Item.id)  # type: ignore[arg-type]
            .where(Response.run_id == store.generation_run_id)
        ).all()
    rows = [{"item_id": k, "part": "answer", "text": f"Another answer to {k}."} for k in keys]
    return import_responses(store.engine, "sample", rows, model="other").generation_run_id


def _jobs(store: Store) -> int:
    with Session(store.engine) as session:
        return int(session.exec(select(func.count()).select_from(Job)).one())


def test_the_form_starts_a_judge_pairs_job_and_its_page_links_the_figures(
    signed_in: FlaskClient, store: Store, other_run: int
) -> None:
    form = signed_in.get("/jobs/new?kind=judge-pairs").text
    assert 'name="runs"' in form and 'name="criterion"' in form and 'name="repeats"' in form
    assert 'name="dry_run"' not in form  # a job always runs; the Dry run button instead
    assert 'id="dry-run-job"' in form
    runs = f"{store.generation_run_id}, {other_run}"
    data = {"csrf": form_token(form), "kind": "judge-pairs", "runs": runs}
    shown = signed_in.post("/jobs/new/dry-run", data=data)
    line = re.search(r'<p id="dry-run-line"><strong>(.*?)</strong>', html.unescape(shown.text))
    assert line is not None and line.group(1).startswith(f"{S1_ITEMS * 2} calls, about ")
    before = _jobs(store)
    reply = signed_in.post("/jobs/new", data=data)
    assert reply.status_code == 302, reply.text
    job_id = int(reply.headers["Location"].rsplit("/", 1)[1])
    with Session(store.engine) as session:
        job = session.get(Job, job_id)
        assert job is not None and job.kind == "judge-pairs"
        assert job.params == {
            "runs": [store.generation_run_id, other_run], "criterion": "overall", "repeats": 1,
        }  # fmt: skip
    assert _jobs(store) == before + 1

    assert queue.run_job(store.engine, store.settings, job_id) == "finished"
    live = html.unescape(signed_in.get(f"/live/jobs/{job_id}").text)
    assert fields(live, "job", job_id)["done"] == str(S1_ITEMS * 2)
    link = re.search(r'id="pairwise-link" href="([^"]+)">([^<]+)</a>', live)
    assert link is not None
    judge = link.group(2)
    page = signed_in.get(link.group(1)).text
    assert 'id="pairwise-one-judge"' in page  # the page of that judge alone
    row = fields(html.unescape(page), "judge", judge)
    assert (row["pairs"], row["unreadable"]) == (str(S1_ITEMS), str(S1_ITEMS))


def test_a_form_with_one_run_comes_back_with_the_reason(
    signed_in: FlaskClient, store: Store
) -> None:
    form = signed_in.get("/jobs/new?kind=judge-pairs").text
    before = _jobs(store)
    data = {"csrf": form_token(form), "kind": "judge-pairs", "runs": str(store.generation_run_id)}
    reply = signed_in.post("/jobs/new", data=data)
    page = html.unescape(reply.text)
    assert reply.status_code == 400 and 'id="judge-pairs-form"' in reply.text
    assert "judge-pairs needs two generation runs or more, each once" in page
    assert _jobs(store) == before
