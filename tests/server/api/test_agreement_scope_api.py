"""The API's agreement and report routes take ``?campaign=`` (issue 25, item 1): two campaigns
over the same answers, rated differently by one person, give the newest campaign's rating by
default and one campaign's alone when named; an unknown name is one clear 400."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from scipy import stats
from sqlmodel import Session, select

from judge.store.engine import make_engine, session_scope
from judge.store.tables import Campaign, CampaignTask, HumanRating, Item, Judgment
from server import usecases
from tests.server.api.test_api import make_api
from tests.support.stub_openai import StubServer


def test_agreement_and_report_take_campaigns(db_url: str, stub: StubServer, tmp_path: Any) -> None:
    api = make_api(db_url, stub, tmp_path)
    engine = make_engine(db_url)
    gen = usecases.generate(
        engine, api.settings, usecases.GenerateRequest(dataset="sample", limit=18)
    )  # the 18 S1 items (ICS)
    run = usecases.judge(
        engine, api.settings, usecases.JudgeRequest(generation_run_id=gen.run_id)
    ).run_id
    with Session(engine) as s:
        judge = {
            j.item_id: float(j.score)
            for j in s.exec(select(Judgment).where(Judgment.judge_run_id == run))
            if j.score is not None
        }
        dataset = s.exec(select(Item.dataset_id)).first() or 0
    items = sorted(judge)[:12]
    a_items, b_items = items[:8], items[4:]  # items[4:8] are in both campaigns
    # Hand-made ratings: r1 and r2 in campaign "a"; in "b" r2 the same, r1 one level up
    # (5 wraps to 1), so the shared items' r1 ratings differ between the campaigns.
    r2 = {i: 1 + (i * 3) % 5 for i in items}
    r1_a = {i: 1 + (i * 7) % 5 for i in items}
    r1_b = {i: r1_a[i] % 5 + 1 for i in items}
    with session_scope(engine) as session:
        for name, day, chosen in (("a", 1, a_items), ("b", 2, b_items)):
            c = Campaign(
                name=name, kind="rating", dataset_id=dataset, generation_run_id=gen.run_id,
                judge_run_id=run, rubrics=["ICS"], strategy="random", population=18,
                size=len(chosen), annotators=2, ls_url="http://x",
                created_at=datetime(2026, 1, day, tzinfo=UTC),
            )  # fmt: skip
            session.add(c)
            session.flush()
            for i in chosen:
                session.add(CampaignTask(campaign_id=c.id, item_id=i, task_key=f"{name}:{i}"))
                for rater, score in (("r1", (r1_a if name == "a" else r1_b)[i]), ("r2", r2[i])):
                    session.add(
                        HumanRating(
                            generation_run_id=gen.run_id, item_id=i, rubric="ICS", rater=rater,
                            score=score, source="labelstudio", campaign_id=c.id,
                        )
                    )  # fmt: skip
    engine.dispose()

    def spearman(r1: dict[int, int], chosen: list[int]) -> float:
        human = [np.mean([r1[i], r2[i]]) for i in chosen]
        return float(stats.spearmanr([judge[i] for i in chosen], human).statistic)

    # Default: both campaigns, "b" (created later) wins on the 4 shared items for both raters.
    newest = {i: (r1_b[i] if i in b_items else r1_a[i]) for i in items}
    found = api.get(f"/api/v1/judge-runs/{run}/agreement").json
    assert found["ratings_used"]["scopes"] == ["a", "b"]
    assert found["ratings_used"]["superseded"] == 4 * 2
    assert "several campaigns" in found["weighted_absent"]
    (row,) = found["rubrics"]["ICS"]["judges"]
    assert row["judge_run"] == run and row["n"] == 12
    assert row["coefficients"]["spearman"]["value"] == pytest.approx(spearman(newest, items))
    # One campaign: its ratings only.
    only_a = api.get(f"/api/v1/judge-runs/{run}/agreement?campaign=a").json
    assert only_a["ratings_used"]["scopes"] == ["a"] and only_a["weighted_absent"] == ""
    (row,) = only_a["rubrics"]["ICS"]["judges"]
    assert row["n"] == 8
    assert row["coefficients"]["spearman"]["value"] == pytest.approx(spearman(r1_a, a_items))
    both = api.get(f"/api/v1/judge-runs/{run}/agreement?campaign=a&campaign=b").json
    assert both["ratings_used"]["scopes"] == ["a", "b"] and both["ratings_used"]["named"]
    report = api.get(f"/api/v1/judge-runs/{run}/report.json?campaign=b")
    assert report.status_code == 200
    bad = api.get(f"/api/v1/judge-runs/{run}/agreement?campaign=nope")
    assert bad.status_code == 400 and "nope" in bad.json["error"]["message"]
