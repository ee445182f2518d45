"""``GET /api/v1/judge-runs/<id>/estimates`` and ``/rating-plan`` through Flask's test client
on a real SQLite store: the planted judge of tests/annotation/test_estimates.py (2 points
above the truth except on race_culture items), ratings of the truth imported over HTTP
(``POST /api/v1/ratings``), and the figures checked against ``judge.stats.ppi`` on arrays
built from the planted table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from judge.stats.ppi import ppi_mean
from judge.store.engine import make_engine
from judge.vocab import STAGE_PARTS
from tests.annotation.test_estimates import (
    RATED,
    RUBRICS,
    Planted,
    answer_and_judge,
    pct,
    planted_judge,
    truth,
)
from tests.annotation.test_estimates import judged as judge_score
from tests.server.api.test_api import Api, make_api
from tests.support.stub_openai import StubServer


@pytest.fixture
def planted_api(db_url: str, tmp_path: Any) -> Iterator[tuple[Api, Planted]]:
    with StubServer(responder=planted_judge) as stub:
        api = make_api(db_url, stub, tmp_path)
        engine = make_engine(db_url)
        gen, run, items = answer_and_judge(engine, db_url, stub)
        engine.dispose()
        yield api, Planted(tmp_path, gen, run, stub.base_url, items)
    api.close()


def test_estimates_over_http(planted_api: tuple[Api, Planted]) -> None:
    api, planted = planted_api
    rated = [k for k in planted.keys() if k.endswith(RATED)]
    rows = [
        {"item_id": k, "rubric": rubric, "rater": "r1", "score": truth(k)}
        for k in rated
        for rubric in RUBRICS[planted.items[k][1]]
    ]
    body = {"generation_run": planted.generation_run, "rows": rows, "batch": "pilot"}
    imported = api.post("/api/v1/ratings", json=body)
    assert imported.status_code == 201, imported.json
    url = f"/api/v1/judge-runs/{planted.judge_run}/estimates"

    refused = api.get(url)
    assert refused.status_code == 200, refused.json
    assert refused.json["design"]["name"] == "refused"
    assert "import:pilot were imported" in refused.json["design"]["reason"]
    first = refused.json["metrics"][0]
    assert first["prediction_powered"]["value"] is None
    assert first["best"]["method"] == "judge-only"

    found = api.get(f"{url}?assume_random=true&campaign=import:pilot")
    assert found.status_code == 200, found.json
    assert found.json["design"]["name"] == "assumed random (imported ratings)"
    (tcs,) = [
        c
        for c in found.json["metrics"]
        if c["target"] == "S2 TCS mean (% of max)" and c["factor"] == "all"
    ]
    s2 = planted.keys("S2")
    labelled = [k for k in s2 if k in rated]
    expected = ppi_mean(
        [pct(truth(k)) for k in labelled],
        [pct(judge_score(k)) for k in labelled],
        [pct(judge_score(k)) for k in s2 if k not in rated],  # the unrated (ppi_py's way)
    )
    ppi = tcs["prediction_powered"]
    assert ppi["value"] == pytest.approx(expected.estimate)
    assert (ppi["n"], ppi["N"]) == (9, 18)
    assert tcs["best"] == {
        "method": "prediction-powered",
        "value": ppi["value"],
        "ci_low": ppi["ci_low"],
        "ci_high": ppi["ci_high"],
    }

    gap = api.get(
        f"{url}?assume_random=true&gap_by=factor&gap_a=gender&gap_b=race_culture&gap_metric=ICS"
    )
    assert gap.status_code == 200, gap.json
    # The judge adds 2 to gender items and nothing to race_culture ones (planted).
    judge_gap = gap.json["gap"]["judge_only"]["value"]
    human_gap = gap.json["gap"]["human_only"]["value"]
    assert judge_gap - human_gap == pytest.approx(2.0)

    half = api.get(f"{url}?gap_by=factor&gap_a=gender")
    # a rule the query's schema cannot state: 400, not 422 (schemathesis holds us to it)
    assert half.status_code == 400
    assert "gap_by, gap_a, gap_b and gap_metric together" in half.json["error"]["message"]
    assert api.get(f"{url}?campaign=none-such").status_code == 400
    assert api.get("/api/v1/judge-runs/999/estimates").status_code == 404
    assert api.get(url, headers={}).status_code == 401


def test_rating_plan_over_http(planted_api: tuple[Api, Planted]) -> None:
    api, planted = planted_api
    url = f"/api/v1/judge-runs/{planted.judge_run}/rating-plan"
    # No ratings yet: a given rho still plans (the judge's spread stands in for people's).
    given = api.get(f"{url}?target_half_width=0.5&rho=0.8&metric=ICS")
    assert given.status_code == 200, given.json
    (plan,) = given.json["plans"]
    assert plan["rho"] == 0.8 and plan["rho_source"] == "given"
    assert plan["sd_source"] == "the judge's spread"
    assert plan["n_ppi"] < plan["n_human_only"]
    # Without rho or a pilot there is nothing to plan with, and the reason says so.
    bare = api.get(f"{url}?target_half_width=5")
    assert bare.status_code == 200
    assert all(p["n_ppi"] is None and "pilot pair" in p["reason"] for p in bare.json["plans"])
    assert api.get(url).status_code == 422  # target_half_width is required
    assert api.get(f"{url}?target_half_width=5&rho=2").status_code == 422


def test_the_random_subset_check_and_transport_over_http(
    planted_api: tuple[Api, Planted], db_url: str
) -> None:
    # The 40 items the planted judge scores highest, imported: assume_random is a 400 with
    # the numbers and the API's own words for the override; with it, a 200 naming it.
    from judge.data.responses import import_responses
    from server import usecases
    from tests.annotation.test_estimates import judged as judge_of
    from tests.support.factories import make_settings

    api, planted = planted_api
    top = sorted(planted.keys(), key=lambda k: (-judge_of(k), k))[:40]
    rows = [
        {"item_id": k, "rubric": rubric, "rater": "r1", "score": truth(k)}
        for k in top
        for rubric in RUBRICS[planted.items[k][1]]
    ]
    body = {"generation_run": planted.generation_run, "rows": rows, "batch": "top"}
    assert api.post("/api/v1/ratings", json=body).status_code == 201
    url = f"/api/v1/judge-runs/{planted.judge_run}/estimates"
    refused = api.get(url, query_string={"assume_random": "true"})
    assert refused.status_code == 400, refused.json
    message = refused.json["error"]["message"]
    assert "assume_random=true refused" in message and "standardised difference" in message
    assert "set accept_unrepresentative=true" in message and "--" not in message
    ok = api.get(url, query_string={"assume_random": "true", "accept_unrepresentative": "true"})
    assert ok.status_code == 200, ok.json
    assert ok.json["design"]["name"].endswith("unrepresentative accepted")
    # Transport: a second model's answers judged by the same judge (the fixture's stub).
    engine = make_engine(db_url)
    answers = [
        {"item_id": k, "part": part, "text": f"Other {part} [[{k}]]"}
        for k, (_, stage) in sorted(planted.items.items())
        for part in STAGE_PARTS[stage]
    ]
    gen2 = import_responses(engine, "sample", answers, model="writer-2").generation_run_id
    run2 = usecases.judge(
        engine,
        make_settings(planted.base_url, db_url),
        usecases.JudgeRequest(generation_run_id=gen2),
    ).run_id
    engine.dispose()
    body = {"generation_run": gen2, "rows": rows, "batch": "top"}
    assert api.post("/api/v1/ratings", json=body).status_code == 201
    moved = api.get(
        f"/api/v1/judge-runs/{planted.judge_run}/transport",
        query_string={"others": [run2], "assume_random": "true", "accept_unrepresentative": "1"},
    )
    assert moved.status_code == 200, moved.json
    (ics,) = [t for t in moved.json["targets"] if t["target"] == "ICS"]
    assert ics["transports"] is True  # the same ratings and judge scores on both models
    assert [m["run"]["model"] for m in ics["models"]] == ["writer", "writer-2"]


def _agreement_page(api: Api, planted: Planted, **query: str) -> Any:
    from tests.server.dashboard.helpers import sign_in

    api.client.application.config["PAGE_WAIT_S"] = 300.0  # the figures, not the reloading page
    assert sign_in(api.client, api.member["Authorization"].removeprefix("Bearer ")).status_code
    return api.client.get(f"/judge-runs/{planted.judge_run}/agreement", query_string=query)


@pytest.mark.parametrize("subset", ["top", "random"])
def test_the_agreement_page_shows_the_assume_random_refusal_beside_its_figures(
    planted_api: tuple[Api, Planted], subset: str
) -> None:
    """Planted: the 40 items the judge scores highest, imported as ratings, fail the
    random-subset check (the API's estimates answer 400, above): the dashboard's agreement
    page is a 200 with its agreement figures and the refusal said with its override. A
    seeded random 40 of the same items passes: no refusal line."""
    import random

    from tests.annotation.test_estimates import judged as judge_of

    api, planted = planted_api
    keys = planted.keys()
    chosen = (
        sorted(keys, key=lambda k: (-judge_of(k), k))[:40]
        if subset == "top"
        else random.Random(7).sample(keys, 40)
    )
    rows = [
        {"item_id": k, "rubric": rubric, "rater": "r1", "score": truth(k)}
        for k in chosen
        for rubric in RUBRICS[planted.items[k][1]]
    ]
    body = {"generation_run": planted.generation_run, "rows": rows, "batch": subset}
    assert api.post("/api/v1/ratings", json=body).status_code == 201
    api_says = api.get(
        f"/api/v1/judge-runs/{planted.judge_run}/estimates", query_string={"assume_random": "true"}
    )
    page = _agreement_page(api, planted, assume_random="true")
    assert page.status_code == 200, page.text[:500]
    assert "Krippendorff" in page.text or "kappa" in page.text.lower()  # agreement figures
    if subset == "top":
        assert api_says.status_code == 400
        assert 'id="design">refused (unrepresentative)' in page.text
        assert "assume-random refused: the rated items do not look like a random" in page.text
        assert "accept_unrepresentative=true" in page.text  # the override, named
    else:
        assert api_says.status_code == 200, api_says.json
        assert "assume-random refused" not in page.text
        assert 'id="design">assumed random' in page.text
