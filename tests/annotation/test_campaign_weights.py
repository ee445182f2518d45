"""Campaign data in the store without Label Studio: inclusion-weighted agreement in the
reliability report, withdrawn ratings left out, and the annotators `campaign status` flags."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from annotation.labelstudio.status import AnnotatorProgress, _flag
from annotation.reliability import run_reliability
from annotation.sections import readings
from judge.stats.coefficient import BootstrapOptions
from judge.store.engine import session_scope
from judge.store.tables import Campaign, CampaignTask, HumanRating, Item, Judgment, utcnow


def test_unequal_inclusion_probabilities_give_weighted_estimates(
    engine: Engine, judged: tuple[int, int]
) -> None:
    gen_run, judge_run = judged
    with Session(engine) as s:
        judge = {
            j.item_id: float(j.score)
            for j in s.exec(select(Judgment).where(Judgment.judge_run_id == judge_run))
            if j.score is not None
        }
        dataset_id = s.exec(select(Item.dataset_id)).first()
    items = sorted(judge)[:10]
    # A design as a stratified campaign records it: the first 4 items drawn with
    # probability 1/4 (weight 4), the other 6 with probability 1/2 (weight 2).
    probability = {i: (0.25 if n < 4 else 0.5) for n, i in enumerate(items)}
    human = {i: float(1 + (i * 7) % 5) for i in items}  # one rater, scores made up
    with session_scope(engine) as session:
        campaign = Campaign(
            name="weighted", kind="rating", dataset_id=dataset_id or 0,
            generation_run_id=gen_run, judge_run_id=judge_run, rubrics=["ICS"],
            strategy="stratified", population=18, size=10, annotators=1, ls_url="http://x",
        )  # fmt: skip
        session.add(campaign)
        session.flush()
        for i in items:
            session.add(
                CampaignTask(
                    campaign_id=campaign.id, item_id=i, task_key=f"weighted:{i}",
                    stratum="a" if probability[i] == 0.25 else "b",
                    inclusion_probability=probability[i],
                )
            )  # fmt: skip
            session.add(
                HumanRating(
                    generation_run_id=gen_run, item_id=i, rubric="ICS", rater="r1",
                    score=human[i], source="labelstudio", campaign_id=campaign.id,
                )
            )  # fmt: skip
        # A withdrawn rating on an 11th item: it must not count anywhere.
        extra = sorted(judge)[10]
        session.add(
            HumanRating(
                generation_run_id=gen_run, item_id=extra, rubric="ICS", rater="r1", score=5,
                source="labelstudio", campaign_id=campaign.id, withdrawn_at=utcnow(),
            )
        )  # fmt: skip
    with Session(engine) as s:
        found = run_reliability(s, gen_run, options=BootstrapOptions(n_bootstrap=0))
    entry = found.rubrics["ICS"].judges[0]
    assert entry.n == 10 and found.rubrics["ICS"].n_rated_items == 10
    # Independent check: with whole-number weights, the weighted coefficients equal scipy's
    # on the pairs repeated weight-many times (4 copies of the first 4, 2 of the rest).
    reps = [round(1 / probability[i]) for i in items]
    jx = np.repeat([judge[i] for i in items], reps)
    hy = np.repeat([human[i] for i in items], reps)
    assert entry.weighted["pearson"].value == pytest.approx(stats.pearsonr(jx, hy).statistic)
    assert entry.weighted["spearman"].value == pytest.approx(stats.spearmanr(jx, hy).statistic)
    assert entry.weighted["mean_difference"].value == pytest.approx(float(np.mean(jx - hy)))
    # The unweighted values are the plain ones on the 10 pairs.
    plain = entry.agreement.coefficients if entry.agreement else {}
    assert plain["spearman"].value == pytest.approx(
        stats.spearmanr([judge[i] for i in items], [human[i] for i in items]).statistic
    )
    # Effective sample size (Kish): (sum w)^2 / sum w^2 = (4*4 + 6*2)^2 / (4*16 + 6*4) = 8.9
    lines = [line for line in readings(found) if "weighted (the whole run)" in line]
    assert len(lines) == 1 and "effective sample size 9 of 10" in lines[0]


def test_a_simple_random_campaign_reports_no_weighted_estimate(
    engine: Engine, judged: tuple[int, int]
) -> None:
    gen_run, judge_run = judged
    with Session(engine) as s:
        items = sorted(
            j.item_id for j in s.exec(select(Judgment).where(Judgment.judge_run_id == judge_run))
        )[:6]
    with session_scope(engine) as session:
        campaign = Campaign(
            name="plain", kind="rating", dataset_id=1, generation_run_id=gen_run,
            judge_run_id=judge_run, rubrics=["ICS"], strategy="random", population=18, size=6,
            annotators=1, ls_url="http://x",
        )  # fmt: skip
        session.add(campaign)
        session.flush()
        for n, i in enumerate(items):
            session.add(
                CampaignTask(
                    campaign_id=campaign.id, item_id=i, task_key=f"plain:{i}",
                    inclusion_probability=6 / 18,
                )
            )  # fmt: skip
            session.add(
                HumanRating(
                    generation_run_id=gen_run, item_id=i, rubric="ICS", rater="r1",
                    score=float(1 + n % 5), campaign_id=campaign.id,
                )
            )  # fmt: skip
    with Session(engine) as s:
        found = run_reliability(s, gen_run, options=BootstrapOptions(n_bootstrap=0))
    assert found.rubrics["ICS"].judges[0].weighted == {}
    assert not [line for line in readings(found) if "weighted" in line]


def test_annotators_worth_a_look() -> None:
    # Five annotators on the same 6 item x rubric pairs; by construction:
    # - c gives 3 to everything (a single score),
    # - a, b, d and e rank the items alike, except e, who ranks them in reverse,
    # - d takes 2 s per task against about 30 s for the others.
    keys = [(f"i{n}", "ICS") for n in range(6)]
    scores = {
        "a": dict(zip(keys, [1, 2, 3, 4, 5, 5], strict=True)),
        "b": dict(zip(keys, [1, 2, 3, 4, 4, 5], strict=True)),
        "c": dict(zip(keys, [3, 3, 3, 3, 3, 3], strict=True)),
        "d": dict(zip(keys, [1, 1, 3, 4, 5, 5], strict=True)),
        "e": dict(zip(keys, [5, 5, 4, 3, 2, 1], strict=True)),
    }
    times = {"a": 30.0, "b": 28.0, "c": 31.0, "d": 2.0, "e": 33.0}
    people = [AnnotatorProgress(p, 6, 0, times[p]) for p in scores]
    _flag(people, scores)
    flags = {p.email: " | ".join(p.flags) for p in people}
    assert "same score (3)" in flags["c"]
    assert "much faster" in flags["d"] and "same score" not in flags["d"]
    assert "agrees with the others less" in flags["e"]
    assert flags["a"] == flags["b"] == ""


def test_the_weighted_estimate_names_the_strata_it_cannot_stand_for(
    engine: Engine, judged: tuple[int, int]
) -> None:
    gen_run, judge_run = judged
    with Session(engine) as s:
        items = sorted(
            {j.item_id for j in s.exec(select(Judgment).where(Judgment.judge_run_id == judge_run))}
        )
        dataset_id = s.exec(select(Item.dataset_id)).first()
    # A stratified design as `campaign create` stores it (stratum -> [population, drawn]):
    # s1 16 items, 4 drawn (p 1/4); s2 12 items, 6 drawn (p 1/2); s3 5 items, none drawn;
    # s4 2 items, 1 drawn but not rated yet. By hand: s3 and s4 have no rated item and hold
    # 5 + 2 = 7 of the 35 items, 20 % of the run.
    strata = {"s1": [16, 4], "s2": [12, 6], "s3": [5, 0], "s4": [2, 1]}
    stratum = {i: ("s1" if n < 4 else "s2" if n < 10 else "s4") for n, i in enumerate(items[:11])}
    probability = {"s1": 0.25, "s2": 0.5, "s4": 0.5}
    with session_scope(engine) as session:
        campaign = Campaign(
            name="gaps", kind="rating", dataset_id=dataset_id or 0, generation_run_id=gen_run,
            judge_run_id=judge_run, rubrics=["ICS"], strategy="stratified", population=35,
            size=11, annotators=1, ls_url="http://x", design={"strata": strata},
        )  # fmt: skip
        session.add(campaign)
        session.flush()
        for n, (i, k) in enumerate(stratum.items()):
            session.add(
                CampaignTask(
                    campaign_id=campaign.id, item_id=i, task_key=f"gaps:{i}", stratum=k,
                    inclusion_probability=probability[k],
                )
            )  # fmt: skip
            if k != "s4":
                session.add(
                    HumanRating(
                        generation_run_id=gen_run, item_id=i, rubric="ICS", rater="r1",
                        score=float(1 + (n * 3) % 5), source="labelstudio",
                        campaign_id=campaign.id,
                    )
                )  # fmt: skip
    with Session(engine) as s:
        found = run_reliability(s, gen_run, options=BootstrapOptions(n_bootstrap=0))
    entry = found.rubrics["ICS"].judges[0]
    assert entry.n == 10 and entry.weighted
    assert entry.weighted_note.endswith(
        "; in campaign gaps, 2 of 4 strata have no rated item: s3 (5 items), s4 (2 items); "
        "they hold 7 of 35 items (20 %) of the run"
    )
    (line,) = [line for line in readings(found) if "weighted (the whole run)" in line]
    assert "s3 (5 items), s4 (2 items)" in line


def _stage_design(
    engine: Engine, judged: tuple[int, int], name: str, rated: tuple[str, ...]
) -> str:
    """A stratified campaign over the 18 S1 items judged with ICS, with strata named as
    `campaign create` names them, and an S2 stratum ICS cannot rate (this run judged no S2
    item with ICS, as a run judges S2 with ETCS only). One rating per item of the ``rated``
    strata; the weighted note of ICS."""
    gen_run, judge_run = judged
    with Session(engine) as s:
        items = sorted(
            {j.item_id for j in s.exec(select(Judgment).where(Judgment.judge_run_id == judge_run))}
        )
        dataset_id = s.exec(select(Item.dataset_id)).first()
    a, b, c = "score 2 / S1 / gender", "score 3 / S1 / age", "score 4 / S1 / race"
    s2 = "score 3 / S2 / gender"
    strata = {a: [16, 4], b: [12, 6], c: [5, 1], s2: [40, 3]}
    stratum = {i: (a if n < 4 else b if n < 10 else c) for n, i in enumerate(items[:11])}
    probability = {a: 0.25, b: 0.5, c: 0.2}
    with session_scope(engine) as session:
        campaign = Campaign(
            name=name, kind="rating", dataset_id=dataset_id or 0, generation_run_id=gen_run,
            judge_run_id=judge_run, rubrics=["ICS"], strategy="stratified", population=73,
            size=14, annotators=1, ls_url="http://x", design={"strata": strata},
        )  # fmt: skip
        session.add(campaign)
        session.flush()
        for n, (i, k) in enumerate(stratum.items()):
            session.add(
                CampaignTask(
                    campaign_id=campaign.id, item_id=i, task_key=f"{name}:{i}", stratum=k,
                    inclusion_probability=probability[k],
                )
            )  # fmt: skip
            if k in rated:
                session.add(
                    HumanRating(
                        generation_run_id=gen_run, item_id=i, rubric="ICS", rater="r1",
                        score=float(1 + (n * 3) % 5), source="labelstudio",
                        campaign_id=campaign.id,
                    )
                )  # fmt: skip
    with Session(engine) as s:
        found = run_reliability(s, gen_run, options=BootstrapOptions(n_bootstrap=0))
    note: str = found.rubrics["ICS"].judges[0].weighted_note
    return note


def test_the_weighted_note_counts_only_strata_the_rubric_can_rate(
    engine: Engine, judged: tuple[int, int]
) -> None:
    # The S1 stratum "race" (5 items) has no rated item; the S2 stratum (40 items) has none
    # either, but ICS rates no S2 item in this run. By hand: 1 of the 3 S1 strata, 5 of their
    # 16 + 12 + 5 = 33 items (15 %). Before the fix: 2 of 4 strata, 45 of 73 items (62 %).
    note = _stage_design(engine, judged, "stages", ("score 2 / S1 / gender", "score 3 / S1 / age"))
    assert note.endswith(
        "; in campaign stages, 1 of 3 strata have no rated item: score 4 / S1 / race (5 items); "
        "they hold 5 of 33 items (15 %) of the items ICS rates (1 other strata hold stages "
        "ICS does not rate)"
    )
    assert "S2" not in note


def test_no_note_when_every_stratum_the_rubric_can_rate_has_a_rated_item(
    engine: Engine, judged: tuple[int, int]
) -> None:
    # Every S1 stratum is rated; only the S2 stratum, which ICS cannot rate, is empty: the
    # weighted estimate stands for every item ICS rates, so the note names no stratum.
    rated = ("score 2 / S1 / gender", "score 3 / S1 / age", "score 4 / S1 / race")
    note = _stage_design(engine, judged, "covered", rated)
    assert note.startswith("weighted by 1 / inclusion probability")
    assert "strata" not in note
