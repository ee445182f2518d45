"""The job form shows what a job would send before it starts (issue 41, part 3): a Dry run
button that queues nothing, a job over ``[server] confirm_calls`` that comes back with its
figure and a button accepting it, an audit with a blank limit that shows the whole design's
figure first, and an enormous design refused with one line.

The store (tests/server/dashboard/conftest.py) holds the sample's 18 S1 items answered and
judged once with the plain prompt. Judging them with the ``cot`` prompt is a new judge run:
18 items x ICS (the one S1 rubric, prompts/rubrics.toml) x 1 sample = 18 judgments, none of
them in the cache, so 18 calls. The names audit's bundled design is 1,680 cells x
``repeats`` (docs/audits.md: 168,000 at the default 100).
"""

from __future__ import annotations

import html
import re

from flask import Flask
from flask.testing import FlaskClient
from sqlmodel import Session, func, select

from server.tables import Job
from tests.server.dashboard.helpers import Store, form_token

COT_CALLS = 18
"""By hand, above: 18 S1 items x ICS x 1 sample, none cached."""


def _limits(app: Flask, **server: object) -> None:
    settings = app.config["SETTINGS"]
    app.config["SETTINGS"] = settings.model_copy(
        update={"server": settings.server.model_copy(update=server)}
    )


def _jobs(store: Store) -> int:
    with Session(store.engine) as session:
        return int(session.exec(select(func.count()).select_from(Job)).one())


def _judge_form(signed_in: FlaskClient, store: Store) -> dict[str, str]:
    token = form_token(signed_in.get("/jobs/new").text)
    return {
        "csrf": token,
        "kind": "judge",
        "generation_run_id": str(store.generation_run_id),
        "prompt_variant": "cot",
    }


def test_a_job_over_the_limit_comes_back_with_its_figure_and_starts_once_accepted(
    app: Flask, signed_in: FlaskClient, store: Store
) -> None:
    _limits(app, confirm_calls=COT_CALLS - 1)
    data = _judge_form(signed_in, store)
    before = _jobs(store)
    asked = signed_in.post("/jobs/new", data=data)
    page = html.unescape(asked.text)
    assert asked.status_code == 200 and 'id="confirm-reason"' in page
    assert f"{COT_CALLS} calls" in page and "17 calls ([server] confirm_calls)" in page
    assert f'name="confirm_calls" value="{COT_CALLS}"' in page
    assert 'value="cot" selected' in page  # what was sent comes back filled in
    assert _jobs(store) == before  # nothing queued
    # accepting fewer calls than the figure is not accepting it
    again = signed_in.post("/jobs/new", data={**data, "confirm_calls": str(COT_CALLS - 1)})
    assert again.status_code == 200 and 'id="confirm-reason"' in again.text
    assert _jobs(store) == before
    # a tampered figure that is a digit to str.isdigit but not to int ("²") is no answer,
    # not a 500 (review, 2026-12-02)
    odd = signed_in.post("/jobs/new", data={**data, "confirm_calls": "\u00b2"})
    assert odd.status_code == 200 and 'id="confirm-reason"' in odd.text
    assert _jobs(store) == before
    started = signed_in.post("/jobs/new", data={**data, "confirm_calls": str(COT_CALLS)})
    assert started.status_code == 302, started.text
    assert _jobs(store) == before + 1


def test_a_job_within_the_limit_starts_at_once(
    app: Flask, signed_in: FlaskClient, store: Store
) -> None:
    _limits(app, confirm_calls=COT_CALLS)  # 18 is not over 18
    before = _jobs(store)
    started = signed_in.post("/jobs/new", data=_judge_form(signed_in, store))
    assert started.status_code == 302, started.text
    assert _jobs(store) == before + 1


def test_the_dry_run_button_shows_the_figure_and_queues_nothing(
    signed_in: FlaskClient, store: Store
) -> None:
    form = signed_in.get("/jobs/new").text
    assert 'id="dry-run-job"' in form and 'formaction="/jobs/new/dry-run"' in form
    assert 'id="dry-run-job"' not in signed_in.get("/jobs/new?kind=pull").text  # no dry run
    before = _jobs(store)
    shown = signed_in.post("/jobs/new/dry-run", data=_judge_form(signed_in, store))
    page = html.unescape(shown.text)
    assert shown.status_code == 200 and 'id="dry-run"' in page
    line = re.search(r'<p id="dry-run-line"><strong>(.*?)</strong>', page)
    assert line is not None and line.group(1).startswith(f"{COT_CALLS} calls, about ")
    assert "cost unknown (the endpoint has no prices)" in line.group(1)
    assert 'id="confirm-reason"' not in page  # under the default 10,000: nothing to accept
    assert f"Start the judge job: {COT_CALLS} calls" in page
    assert _jobs(store) == before


def test_an_audit_with_a_blank_limit_shows_the_whole_design_first(
    signed_in: FlaskClient, store: Store
) -> None:
    token = form_token(signed_in.get("/jobs/new?kind=audit").text)
    data = {"csrf": token, "kind": "audit", "suite": "names", "options": '{"repeats": 1}'}
    before = _jobs(store)
    asked = signed_in.post("/jobs/new", data=data)
    page = html.unescape(asked.text)
    # 1,680 cells x 1 repeat: under 10,000 calls, asked because the limit is blank
    assert asked.status_code == 200 and "1,680 calls" in page
    assert "the whole design (limit is blank)" in page
    assert _jobs(store) == before
    limited = signed_in.post("/jobs/new", data={**data, "limit": "20"})
    assert limited.status_code == 302, limited.text  # a limit was set: 20 calls, no asking
    assert _jobs(store) == before + 1


def test_an_enormous_design_ends_with_one_clear_line_and_nothing_stored(
    signed_in: FlaskClient, store: Store
) -> None:
    token = form_token(signed_in.get("/jobs/new?kind=audit").text)
    data = {"csrf": token, "kind": "audit", "suite": "names", "options": '{"repeats": 1000}'}
    before = _jobs(store)
    for path in ("/jobs/new", "/jobs/new/dry-run"):
        reply = signed_in.post(path, data=data)
        error = re.search(r'<pre class="error" id="form-error">(.*?)</pre>', reply.text, re.S)
        assert reply.status_code == 400 and error is not None
        said = html.unescape(error.group(1))
        # 1,680 x 1000 = 1,680,000 prompts (by hand), over the 200,000 a dry run plans
        assert said.startswith("the names design with these options has 1,680,000 prompts")
        assert "set limit to 200,000 or fewer" in said and "\n" not in said
    assert _jobs(store) == before
    # the other way: the same design cut by a limit is planned and shown
    shown = signed_in.post("/jobs/new/dry-run", data={**data, "limit": "200"})
    assert shown.status_code == 200 and "200 calls" in html.unescape(shown.text)


def test_an_item_generate_job_has_a_dry_run_and_asks_over_the_limit(
    app: Flask, signed_in: FlaskClient, store: Store
) -> None:
    """By hand: 12 new items of one cell at 5 a call (the default items_per_call) are 3 calls
    (5 + 5 + 2), none cached."""
    form = signed_in.get("/jobs/new?kind=item-generate").text
    assert 'id="dry-run-job"' in form  # the kind has a dry run now
    data = {
        "csrf": form_token(form),
        "kind": "item-generate",
        "endpoint": "test",
        "stage": "S1",
        "factor": "gender",
        "scenario": "career_counseling",
        "count": "12",
    }
    before = _jobs(store)
    shown = signed_in.post("/jobs/new/dry-run", data=data)
    line = re.search(r'<p id="dry-run-line"><strong>(.*?)</strong>', html.unescape(shown.text))
    assert shown.status_code == 200 and line is not None
    assert line.group(1).startswith("3 calls, about ")
    _limits(app, confirm_calls=2)
    asked = signed_in.post("/jobs/new", data=data)
    page = html.unescape(asked.text)
    assert asked.status_code == 200 and 'id="confirm-reason"' in page
    assert "2 calls ([server] confirm_calls)" in page and 'name="confirm_calls" value="3"' in page
    assert _jobs(store) == before
    started = signed_in.post("/jobs/new", data={**data, "confirm_calls": "3"})
    assert started.status_code == 302, started.text
    assert _jobs(store) == before + 1
