"""Pairwise judging as a job (issue 45): ``judge-pairs`` queued over ``POST /api/v1/jobs``,
run by the worker's own function, read back through ``GET /api/v1/pairwise/position``.

The runs are those of tests/server/cli/test_judge_pairs_cli.py ("good" and "mid" answer
items 0..5, each with a planted quality). Expected figures are worked by hand from the stub's
rule, not from the code under test:

- the first-position judge says "A" for every call, so each question's two orders read
  (A, A): a primacy-preferring pair; 6 questions -> 6 pairs, 6 primacy, position
  consistency 0, flagged;
- the order-blind judge names the higher planted quality whichever place it is shown in
  (equal: tie), so each readable question's two orders agree; item 0 gets prose (unreadable):
  5 consistent pairs, 1 unreadable, none primacy or recency, not flagged.

Each question is asked in both orders once (repeats 1): 6 x 2 = 12 calls per job.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from judge.store.engine import make_engine
from tests.server.api.test_api import Api, jobs_stored, make_api, run_jobs
from tests.server.cli.test_judge_pairs_cli import _runs, blind_rule, first_rule, shown
from tests.support.stub_openai import StubServer

CALLS = 6 * 2
"""By hand: 6 questions both runs answered x 2 orders x 1 repetition."""


class Rule:
    """The stub's responder, switched between jobs (one server: one judge endpoint)."""

    def __init__(self) -> None:
        self.rule: Any = first_rule
        self.fail_item: int | None = None

    def __call__(self, messages: list[dict[str, str]]) -> str | int:
        if self.fail_item is not None and shown(messages)[0][0] == self.fail_item:
            return 500  # the config allows 1 retry, then the call fails for good
        return str(self.rule(messages))


@pytest.fixture
def rule() -> Rule:
    return Rule()


@pytest.fixture
def setup(migrated_db_url: str, tmp_path: Path, rule: Rule) -> Iterator[tuple[Api, list[int]]]:
    with StubServer(responder=rule) as stub:
        api = make_api(migrated_db_url, stub, tmp_path)
        engine = make_engine(migrated_db_url)
        good, mid, _ = _runs(engine)
        engine.dispose()
        api.stub = stub  # type: ignore[attr-defined]
        try:
            yield api, [good, mid]
        finally:
            api.close()


def _calls(api: Api) -> int:
    return len(api.stub.state.bodies)  # type: ignore[attr-defined]


def _figures(api: Api, judge: str) -> dict[str, Any]:
    reply = api.get(f"/api/v1/pairwise/position?judge={quote(judge)}&n_bootstrap=200")
    assert reply.status_code == 200, reply.json
    (one,) = reply.json["judges"]
    return dict(one)


def _queue(api: Api, params: dict[str, Any]) -> dict[str, Any]:
    made = api.post("/api/v1/jobs", json={"kind": "judge-pairs", "params": params})
    assert made.status_code == 201, made.json
    return dict(made.json)


def test_a_planted_first_position_judge_is_flagged_an_order_blind_one_is_not(
    setup: tuple[Api, list[int]], rule: Rule
) -> None:
    api, runs = setup
    made = _queue(api, {"runs": runs})
    assert made["params"] == {"runs": runs, "criterion": "overall", "repeats": 1}
    assert run_jobs(api) == ["finished"]
    assert _calls(api) == CALLS
    job = api.get(f"/api/v1/jobs/{made['id']}").json
    assert (job["done"], job["total"]) == (CALLS, CALLS)  # progress as a judge job's
    first = _figures(api, job["result"]["pairwise_judge"])
    # by hand (module docstring): 6 questions, each (A, A)
    assert (first["pairs"], first["primacy_preferring"], first["consistent"]) == (6, 6, 0)
    assert first["position_consistency"] == 0.0 and first["flagged"]

    # the order-blind rule under another criterion: another judge, its own figures
    rule.rule = blind_rule
    made = _queue(api, {"runs": runs, "criterion": "fairness"})
    assert run_jobs(api) == ["finished"]
    assert _calls(api) == 2 * CALLS
    job = api.get(f"/api/v1/jobs/{made['id']}").json
    blind = _figures(api, job["result"]["pairwise_judge"])
    assert blind["judge"] != first["judge"]
    counts = (blind["pairs"], blind["consistent"], blind["primacy_preferring"],
              blind["recency_preferring"], blind["unreadable_pairs"])  # fmt: skip
    assert counts == (6, 5, 0, 0, 1)
    assert blind["position_consistency"] == 1.0 and not blind["flagged"]

    # the same job again finds every verdict stored: 0 calls repeated
    again = _queue(api, {"runs": runs, "criterion": "fairness"})
    assert run_jobs(api) == ["finished"]
    assert _calls(api) == 2 * CALLS
    summary = api.get(f"/api/v1/jobs/{again['id']}").json["result"]["summary"]
    assert [p["tasks"] for p in summary["passes"]] == [0]


def test_a_job_whose_calls_failed_resumes_with_only_those(
    setup: tuple[Api, list[int]], rule: Rule
) -> None:
    api, runs = setup
    rule.rule, rule.fail_item = blind_rule, 1
    made = _queue(api, {"runs": runs})
    assert run_jobs(api) == ["failed"]
    job = api.get(f"/api/v1/jobs/{made['id']}").json
    # item 1's two orders failed (HTTP 500, then 500 on the one retry): the job says so
    assert "2 call(s) failed for good" in job["error"] and "resume the job" in job["error"]
    assert job["result"]["pairwise_judge"]  # what it stored is linked before it stopped
    sent = _calls(api)
    rule.fail_item = None
    assert api.post(f"/api/v1/jobs/{made['id']}/resume").status_code == 200
    assert run_jobs(api) == ["finished"]
    new = api.stub.state.bodies[sent:]  # type: ignore[attr-defined]
    assert sorted(shown(b["messages"])[0][0] for b in new) == [1, 1]  # only item 1, each order
    assert _figures(api, job["result"]["pairwise_judge"])["pairs"] == 6


def test_bad_requests_are_one_line_each_and_queue_nothing(setup: tuple[Api, list[int]]) -> None:
    api, (good, mid) = setup
    head = "bad parameters for a judge-pairs job: "
    cases = {
        "one run": ({"runs": [good]}, f"runs: judge-pairs needs two generation runs or more, "
                    f"each once; got [{good}]"),
        "same run twice": ({"runs": [good, good]}, "runs: judge-pairs needs two generation "
                           f"runs or more, each once; got [{good}, {good}]"),
        "unknown run": ({"runs": [good, 999]}, "runs: no generation run 999; see `fairjudge "
                        "runs`"),
        "unknown criterion": ({"runs": [good, mid], "criterion": "vibes"}, "criterion: no "
                              "pairwise criterion 'vibes'; known: fairness, overall"),
        # the stub endpoint of make_settings has no prices: a bound could not be counted
        # (this line, as a judge job's, names the field without the head)
        "unpriced bound": ({"runs": [good, mid], "max_cost": 1.0}, "max_cost: endpoint "
                           "'test' has no prices to count the cost with; set input_price"),
    }  # fmt: skip
    for name, (params, line) in cases.items():
        for route in ("/api/v1/jobs", "/api/v1/jobs/dry-run"):
            reply = api.post(route, json={"kind": "judge-pairs", "params": params})
            assert reply.status_code == 400, (name, route, reply.json)
            said = reply.json["error"]["message"]
            want = line if name == "unpriced bound" else head + line
            assert said.startswith(want), (name, said)
            assert "\n" not in said
    assert jobs_stored(api) == 0 and _calls(api) == 0


def test_an_unconfirmed_job_over_the_limit_is_refused(setup: tuple[Api, list[int]]) -> None:
    api, runs = setup
    body = {"kind": "judge-pairs", "params": {"runs": runs}}
    plan = api.post("/api/v1/jobs/dry-run", json=body)
    assert plan.status_code == 200, plan.json
    # by hand: 12 calls to send, none cached, one pair of runs
    assert (plan.json["calls_to_send"], plan.json["estimate"]["calls"]) == (CALLS, CALLS)
    assert [p["runs"] for p in plan.json["pairs"]] == [runs]
    app = api.client.application
    settings = app.config["SETTINGS"]
    app.config["SETTINGS"] = settings.model_copy(
        update={"server": settings.server.model_copy(update={"confirm_calls": CALLS - 1})}
    )
    refused = api.post("/api/v1/jobs", json=body)
    assert refused.status_code == 403, refused.json
    said = refused.json["error"]["message"]
    assert f"a judge-pairs job that would send {CALLS} calls" in said
    assert f"{CALLS - 1} calls ([server] confirm_calls)" in said and '"confirm": true' in said
    assert jobs_stored(api) == 0
    assert api.post("/api/v1/jobs", json={**body, "confirm": True}).status_code == 201
    assert api.post("/api/v1/jobs", json=body, headers=api.admin).status_code == 201
    assert jobs_stored(api) == 2 and _calls(api) == 0  # queued, nothing sent yet
