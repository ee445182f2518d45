"""The alt-test over HTTP (issue 27): ``GET /api/v1/judge-runs/RUN/alt-test`` on a stored run
and ``POST /api/v1/alt-test`` on CSV text, through Flask's test client on a real SQLite store.

The stored run is tests/server/test_alttest_store.py's: the sample's answers judged through
the scripted stub with planted scores, rated by three annotators (A and B in one import
batch, C in another). Expected numbers come from ``judge.stats.alttest.alt_test`` called on
arrays built here by hand; every reply is read back through the route's response model,
which forbids fields it does not declare.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judge.stats.alttest import alt_test
from judge.store.engine import make_engine
from server.api.alttest import AltTestOut
from tests.server.api.test_api import Api, make_api
from tests.server.test_alttest_store import ANNOTATORS, prepare, sample_responder
from tests.support.cli import fairjudge
from tests.support.stub_openai import StubServer


@pytest.fixture
def api(migrated_db_url: str, tmp_path: Path) -> Iterator[tuple[Api, int, Any]]:
    """The app, the stored judge run, and its planted ratings and judge scores."""
    with StubServer(responder=sample_responder()) as stub:
        made = make_api(migrated_db_url, stub, tmp_path)
        engine = make_engine(migrated_db_url)
        try:
            judge_run, planted = prepare(engine, made.settings)
        finally:
            engine.dispose()
        yield made, judge_run, planted
        made.close()


def test_stored_run_verdict_and_the_two_annotator_refusal(api: tuple[Api, int, Any]) -> None:
    client, run, planted = api
    expected = alt_test(planted.ratings, planted.judge, epsilon="expert", annotators=ANNOTATORS)
    reply = client.get(f"/api/v1/judge-runs/{run}/alt-test?epsilon=expert&rubric=ICS")
    assert reply.status_code == 200, reply.json
    body = AltTestOut.model_validate(reply.json).model_dump(mode="json")
    assert body == reply.json  # nothing undeclared, nothing missing
    (ics,) = body["rubrics"]
    assert (ics["rubric"], ics["n_items"], ics["omega"]) == ("ICS", 36, expected.omega)
    assert ics["rho"] == pytest.approx(expected.rho, abs=1e-12)
    got = [(a["annotator"], a["p_corrected"]) for a in ics["annotators"]]
    assert got == [(c.annotator, pytest.approx(c.p_corrected)) for c in expected.annotators]
    # Both rubrics: TCS (never scored) refused inside a 200, with nulls where a result would be.
    both = client.get(f"/api/v1/judge-runs/{run}/alt-test?epsilon=0.2")
    assert both.status_code == 200, both.json
    tcs = AltTestOut.model_validate(both.json).rubrics[1]
    assert tcs.rubric == "TCS" and tcs.omega is None and "scored none" in (tcs.refused or "")
    # Only the first import batch: two annotators, nothing to test: a 400 in the one shape.
    refused = client.get(
        f"/api/v1/judge-runs/{run}/alt-test?epsilon=expert&campaign=import:pair&rubric=ICS"
    )
    assert refused.status_code == 400
    assert set(refused.json) == {"error"} and refused.json["error"]["status"] == 400
    assert "needs at least 3 annotators, got 2" in refused.json["error"]["message"]
    # epsilon is required, and a margin outside (0, 1) or a boolean is no margin.
    for query in ("", "?epsilon=1.5", "?epsilon=guru"):
        assert client.get(f"/api/v1/judge-runs/{run}/alt-test{query}").status_code == 422
    assert client.get(f"/api/v1/judge-runs/{run + 50}/alt-test?epsilon=expert").status_code == 404


# 12 items rated by r1, r2, r3 (r2 skipped items k and l); the judge file has two samples of item a
# (2 and 4: mean 3), an NA row for item l (left out) and an item nobody rated (m).
RATINGS = {
    #    r1 r2 r3
    "a": (3, 3, 4),
    "b": (1, 2, 2),
    "c": (5, 4, 5),
    "d": (2, 4, 3),
    "e": (4, 4, 4),
    "f": (3, 2, 3),
    "g": (5, 5, 4),
    "h": (1, 1, 2),
    "i": (2, 3, 2),
    "j": (4, 5, 5),
    "k": (3, None, 3),
    "l": (2, None, 1),
}
JUDGE = {"a": 3.0, "b": 2, "c": 5, "d": 3, "e": 4, "f": 3, "g": 5, "h": 1, "i": 2, "j": 5, "k": 3}
HUMAN_CSV = "item_id,rater,score\n" + "".join(
    f"{item},r{n + 1},{score}\n"
    for item, scores in RATINGS.items()
    for n, score in enumerate(scores)
    if score is not None
)
JUDGE_CSV = (
    "item_id,score\na,2\na,4\n"
    + "".join(f"{i},{int(s)}\n" for i, s in JUDGE.items() if i != "a")
    + "l,NA\nm,3\n"
)


def test_posted_files_match_alt_test_and_the_cli(api: tuple[Api, int, Any], tmp_path: Path) -> None:
    client, _, _ = api
    body = {"human_csv": HUMAN_CSV, "judge_csv": JUDGE_CSV, "epsilon": 0.1}
    # 10-11 items per annotator: under the authors' 30, no verdict unless asked for (issue 42)
    default = client.post("/api/v1/alt-test", json=body)
    assert default.status_code == 400, default.json
    assert "the authors' rule: 30 items or more" in default.json["error"]["message"]
    assert "lower min_items" in default.json["error"]["message"]
    body["min_items"] = 10
    reply = client.post("/api/v1/alt-test", json=body)
    assert reply.status_code == 200, reply.json
    assert reply.json["items_rule"].startswith("lowered by the user to 10 items")
    assert AltTestOut.model_validate(reply.json).model_dump(mode="json") == reply.json
    items = sorted(JUDGE)  # a..k: l has no judge score
    table = np.array([[np.nan if s is None else s for s in RATINGS[i]] for i in items], float)
    expected = alt_test(
        table, [JUDGE[i] for i in items], epsilon=0.1, annotators=["r1", "r2", "r3"], min_items=10
    )
    (entry,) = reply.json["rubrics"]
    assert reply.json["items"] == {"paired": 11, "human_only": 0, "judge_only": 1,
                                   "judge_unscored_items": 1, "judge_unscored_rows": 1}  # fmt: skip
    assert (entry["n_items"], entry["judge_unscored"]) == (11, 1)
    assert entry["omega"] == expected.omega and entry["rho"] == pytest.approx(expected.rho)
    for row, want in zip(entry["annotators"], expected.annotators, strict=True):
        assert row["test"] == want.test == "wilcoxon"  # 11 items: under 30
        assert row["statistic"] == pytest.approx(want.statistic)
        assert row["p_value"] == pytest.approx(want.p_value)
    # The same files through `fairjudge agreement alt-test --json`: the same JSON.
    (tmp_path / "h.csv").write_text(HUMAN_CSV)
    (tmp_path / "j.csv").write_text(JUDGE_CSV)
    cli = fairjudge("agreement", "alt-test", "--human", tmp_path / "h.csv",
                    "--judge", tmp_path / "j.csv", "--epsilon", "0.1", "--min-items", "10",
                    "--json")  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == reply.json


def test_posted_files_refusals_are_400s_without_temporary_paths(api: tuple[Api, int, Any]) -> None:
    client, _, _ = api
    body = {"human_csv": HUMAN_CSV, "judge_csv": JUDGE_CSV, "epsilon": "crowd"}
    # r1 and r3 share 11 items with the others, r2 10: asking for 11 refuses r2 by name.
    refused = client.post("/api/v1/alt-test", json={**body, "min_items": 11})
    assert refused.status_code == 400, refused.json
    assert "'r2' (10) have fewer than 11" in refused.json["error"]["message"]
    bad = client.post(
        "/api/v1/alt-test", json={**body, "human_csv": HUMAN_CSV.replace(",4\n", ",9\n", 1)}
    )
    assert bad.status_code == 400, bad.json
    text = json.dumps(bad.json)
    assert "human_csv" in text and "/tmp" not in text, text
    assert client.post("/api/v1/alt-test", json={**body, "epsilon": True}).status_code == 422
    assert client.post("/api/v1/alt-test", json={**body, "judge_csv": ""}).status_code == 422
