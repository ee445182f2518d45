"""Judge runs compared over HTTP: ``/api/v1/compare/paired.json`` (typed reply) and
``/compare.json?paired=true`` on a real SQLite store holding two models' answers to the same
40 S1 items, judged, with people's ratings imported for 30 items of each.

Planted (tests/support/planted_pairs.py): people score each item ``truth`` (1-3) on
both models' answers; the judge scores A's answer ``truth`` and B's ``truth + 1``. Derived by
hand from that: on the S1 ICS mean (% of 5) every pair differs by +20 points for the judge
(1 / 5 x 100), so the interval has no spread, the sign-flip test's p is 2 / 2**40 and Holm
flags it; people see 0, so the prediction-powered difference is 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from judge.store.engine import make_engine
from tests.server.api.test_api import Api, make_api
from tests.support.planted_pairs import plant_pairs
from tests.support.stub_openai import StubServer

MEAN = "S1 ICS mean (% of max)"
SHARE = "S1 ICS share>=3 (%)"


@dataclass(frozen=True)
class TwoModels:
    api: Api
    a: int
    b: int
    other: int  # a judge run of other items
    truth: list[float]


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoModels]:
    folder = tmp_path_factory.mktemp("compare-api")
    url = f"sqlite:///{folder / 'fairjudge.db'}"
    truth = np.random.default_rng(7).integers(1, 4, 40).astype(float).tolist()
    rated = [*truth[:30], *[float("nan")] * 10]
    with StubServer() as stub:
        api = make_api(url, stub, folder)  # migrates the store; no test calls a model
        engine = make_engine(url)
        runs = plant_pairs(engine, truth, rated)
        engine.dispose()
        yield TwoModels(api, runs.a, runs.b, runs.other, truth)
        api.close()


def _row(rows: list[dict[str, Any]], metric: str, factor: str = "all") -> dict[str, Any]:
    (row,) = [r for r in rows if r["metric"] == metric and r["factor"] == factor]
    return row


def test_the_paired_route_carries_every_figure_of_a_cell(two_models: TwoModels) -> None:
    m = two_models
    reply = m.api.get(f"/api/v1/compare/paired.json?judge_run={m.a}&judge_run={m.b}&margin=3")
    assert reply.status_code == 200, reply.json
    body = reply.json
    assert (body["a"]["judge_run_id"], body["b"]["judge_run_id"]) == (m.a, m.b)
    assert body["margin"] == 3 and body["p_adjust_method"] == "holm"
    mean = _row(body["rows"], MEAN)
    assert mean["n_pairs"] == 40 and mean["diff"] == pytest.approx(20.0)
    # Every pair +20: no spread, so no interval (the verdicts bound unseen pairs instead).
    assert mean["ci_low"] is None and mean["note"].startswith("every pair differs")
    assert mean["p_value"] == pytest.approx(2 / 2**40)  # both sign patterns as extreme
    assert mean["flagged"] is True and mean["equivalent"] is False
    share = _row(body["rows"], SHARE)
    # A passes (>= 3) where truth is 3, B where truth is 2 or 3: the flips fail -> pass are
    # the items of truth 2, none pass -> fail.
    assert share["fail_to_pass"] == m.truth.count(2.0) and share["pass_to_fail"] == 0
    assert f"all {MEAN}" in body["flagged"]
    corrected = body["corrected"]
    assert corrected["usable"] is False and "assume_random=true" in corrected["reason"]


def test_assume_random_gives_the_corrected_difference(two_models: TwoModels) -> None:
    m = two_models
    url = f"/api/v1/compare/paired.json?judge_run={m.a}&judge_run={m.b}&assume_random=true"
    body = m.api.get(url).json
    corrected = body["corrected"]
    assert corrected["usable"] is True, corrected
    mean = _row(corrected["rows"], MEAN)
    assert (mean["n_pairs"], mean["n_rated"]) == (40, 30)
    assert mean["judge_only"]["value"] == pytest.approx(20.0)
    assert mean["prediction_powered"]["value"] == pytest.approx(0.0)
    assert mean["human_only"]["value"] == pytest.approx(0.0)


def test_compare_json_takes_paired_and_refuses_bad_input(two_models: TwoModels) -> None:
    m = two_models
    base = f"/api/v1/compare.json?judge_run={m.a}&judge_run={m.b}"
    report = m.api.get(base + "&paired=true&assume_random=true").json
    assert _row(report["paired"]["rows"], MEAN)["diff"] == pytest.approx(20.0)
    assert report["paired_corrected"]["usable"] is True
    assert "paired" not in m.api.get(base).json
    csv = m.api.get(base.replace(".json", ".csv") + "&paired=true&table=paired.csv")
    assert csv.status_code == 200 and MEAN in csv.get_data(as_text=True)
    # margin without paired, different items, three runs, an unknown run: one clear line each
    refused = m.api.get(base + "&margin=3")
    assert refused.status_code == 400
    assert refused.json["error"]["message"] == (
        "margin is the equivalence margin of paired=true: set paired=true"
    )
    other = m.api.get(f"/api/v1/compare/paired.json?judge_run={m.a}&judge_run={m.other}")
    assert other.status_code == 400
    assert "did not judge the same items" in other.json["error"]["message"]
    three = f"/api/v1/compare/paired.json?judge_run={m.a}&judge_run={m.b}&judge_run={m.other}"
    assert m.api.get(three).status_code == 422
    missing = m.api.get(f"/api/v1/compare/paired.json?judge_run={m.a}&judge_run=99999")
    assert missing.status_code == 404 and "99999" in missing.json["error"]["message"]
