"""Grouped agreement for a stored run (issue 26): ``?group_by=`` over HTTP and ``agreement
--group-by`` on the CLI give the same numbers, in the same model, as correlating the judge's
scores with the humans' mean within each group of items and averaging over the groups,
computed here with scipy from the raw rows. A field the items lack is one clear 400 / exit 1
naming it (an unknown kind of grouping is the request's own 422 / usage error)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from scipy import stats
from sqlmodel import Session, select

from judge.store.engine import make_engine
from judge.store.tables import Item, Judgment
from server import usecases
from tests.server.api.test_api import make_api
from tests.support.cli import fairjudge
from tests.support.factories import write_config
from tests.support.stub_openai import StubServer

RATERS = ("r1", "r2")


def test_grouped_agreement_over_http_and_cli(db_url: str, stub: StubServer, tmp_path: Any) -> None:
    api = make_api(db_url, stub, tmp_path)
    engine = make_engine(db_url)
    gen = usecases.generate(
        engine, api.settings, usecases.GenerateRequest(dataset="sample")
    )  # all 72 items
    run = usecases.judge(
        engine, api.settings, usecases.JudgeRequest(generation_run_id=gen.run_id)
    ).run_id
    with Session(engine) as s:
        rows = s.exec(
            select(Judgment, Item)
            .join(Item, Item.id == Judgment.item_id)  # type: ignore[arg-type]
            .where(Judgment.judge_run_id == run, Judgment.rubric == "ICS")
        ).all()
    engine.dispose()
    judged = {item.key: (float(j.score), item.stage) for j, item in rows if j.score is not None}
    assert {stage for _, stage in judged.values()} == {"S1", "S4"}  # ICS: stages 1 and 4
    keys = sorted(judged)
    # Hand-made ratings that vary within each stage: two raters, a few levels apart.
    ratings = {
        (key, rater): 1 + (n * (3 if rater == "r1" else 7) + len(key)) % 5
        for n, key in enumerate(keys)
        for rater in RATERS
    }
    body = {
        "generation_run": gen.run_id,
        "rows": [
            {"item_id": key, "rater": rater, "rubric": "ICS", "score": score}
            for (key, rater), score in ratings.items()
        ],
    }
    posted = api.post("/api/v1/ratings", json=body)
    assert posted.status_code == 201, posted.json

    # By hand: per stage, Pearson/Spearman/Kendall of judge vs the raters' mean, averaged.
    expected: dict[str, list[float]] = {"pearson": [], "spearman": [], "kendall": []}
    for stage in ("S1", "S4"):
        chosen = [k for k in keys if judged[k][1] == stage]
        x = np.array([judged[k][0] for k in chosen])
        y = np.array([np.mean([ratings[(k, r)] for r in RATERS]) for k in chosen])
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue  # a constant side: the group is skipped, as documented
        expected["pearson"].append(float(stats.pearsonr(x, y).statistic))
        expected["spearman"].append(float(stats.spearmanr(x, y).statistic))
        expected["kendall"].append(float(stats.kendalltau(x, y).statistic))
    assert expected["pearson"], "the stub's scores must vary within a stage for this test"

    reply = api.get(f"/api/v1/judge-runs/{run}/agreement?group_by=stage&n_bootstrap=200")
    assert reply.status_code == 200, reply.json
    (row,) = reply.json["rubrics"]["ICS"]["judges"]
    grouped = row["grouped"]
    assert grouped["group_by"] == "stage"
    assert grouped["n_groups"] == len(expected["pearson"])
    assert grouped["n_groups"] + grouped["n_groups_skipped"] == 2
    for name, values in expected.items():
        assert grouped[name]["value"] == pytest.approx(float(np.mean(values)), abs=1e-12)
    # Without group_by there is no grouped entry.
    plain = api.get(f"/api/v1/judge-runs/{run}/agreement?n_bootstrap=0").json
    assert "grouped" not in plain["rubrics"]["ICS"]["judges"][0]

    # The CLI's --json: the same model, the same numbers.
    config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
    done = fairjudge(
        "--config", str(config), "agreement", "--run", str(gen.run_id), "--group-by", "stage",
        "--bootstrap", "200", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)
    (cli_row,) = [j for j in cli["rubrics"]["ICS"]["judges"] if j["judge_run"] == run]
    assert cli_row["grouped"] == grouped

    # A field the items do not have: one clear error naming it, on both interfaces.
    missing = api.get(f"/api/v1/judge-runs/{run}/agreement?group_by=fields.document")
    assert missing.status_code == 400 and "no field 'document'" in missing.json["error"]["message"]
    bad = api.get(f"/api/v1/judge-runs/{run}/agreement?group_by=colour")
    assert bad.status_code == 422, bad.json
    done = fairjudge(
        "--config", str(config), "agreement", "--run", str(gen.run_id), "--group-by", "colour"
    )
    # An option the request refuses is a usage error on the CLI (exit 2), naming the option.
    assert done.returncode == 2 and "--group-by" in done.stderr, done.stderr
    done = fairjudge(
        "--config", str(config), "agreement", "--run", str(gen.run_id),
        "--group-by", "fields.document",
    )  # fmt: skip
    assert done.returncode == 1 and "no field 'document'" in done.stderr, done.stderr
    api.close()
