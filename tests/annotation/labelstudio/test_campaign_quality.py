"""`campaign status` on the real Label Studio: three annotators rate through its API with their
own tokens (two fair, one harsh by 1-2 levels), one leaves a rubric unscored, and the
campaign carries gold items. Expected values are computed here from the scores the test
submitted, with scipy."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from annotation.labelstudio import interface
from annotation.labelstudio.annotators import add_annotator
from annotation.labelstudio.campaigns import add_gold, create_campaign
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.gold import read_gold
from annotation.labelstudio.pull import pull_campaign
from annotation.labelstudio.service import LabelStudioService
from annotation.labelstudio.status import campaign_status
from annotation.reliability import run_reliability
from judge import paths
from judge.grading.rubrics import RubricSet, load_rubrics
from judge.stats.coefficient import BootstrapOptions
from judge.store.engine import session_scope
from judge.store.tables import CampaignTask, HumanRating, Item

FAIR1, FAIR2, HARSH = "q.fair1@example.org", "q.fair2@example.org", "q.harsh@example.org"


def _hash(*parts: str) -> int:
    return hashlib.sha256("|".join(parts).encode()).digest()[0]


def base(item: str, rubric: str) -> int:
    """The fair score of an item x rubric: 2-5, fixed by a hash."""
    return 2 + _hash(item, rubric) % 4


def planted(email: str, item: str, rubric: str) -> int:
    """FAIR1 gives the fair score, FAIR2 one more on about a fifth of ratings (below 5), HARSH
    one less, or two less on about a third of them (where that stays on the scale)."""
    b, h = base(item, rubric), _hash(email, item, rubric)
    if email == FAIR2:
        return b + (1 if h % 5 == 0 and b < 5 else 0)
    if email == HARSH:
        return b - (2 if h % 3 == 0 and b >= 3 else 1)
    return b


def test_status_flags_the_harsh_annotator_counts_incomplete_and_measures_gold(
    labelstudio: LabelStudioService, store: tuple[Engine, int, int], tmp_path: Path
) -> None:
    engine, gen_run, judge_run = store
    rubrics: RubricSet = load_rubrics(paths.prompts_dir())
    connection = labelstudio.connection()
    admin = LabelStudioClient(connection.url, connection.token)
    raters = {}
    for email in (FAIR1, FAIR2, HARSH):
        with session_scope(engine) as session:
            person = add_annotator(session, admin, email, "Q", service=labelstudio)
        assert person.password is not None
        raters[email] = LabelStudioClient(
            admin.url, labelstudio.login_token(email, person.password)
        )

    # Gold: three S1 items with ICS known (their fair score).
    with Session(engine) as s:
        s1 = [i.key for i in s.exec(select(Item).where(Item.stage == "S1").order_by(col(Item.id)))]
    gold_keys = s1[:3]
    gold_file = tmp_path / "gold.csv"
    gold_file.write_text(
        "item_id,rubric,score\n" + "".join(f"{k},ICS,{base(k, 'ICS')}\n" for k in gold_keys)
    )
    with session_scope(engine) as session:
        made = create_campaign(
            session, admin, rubrics, judge_run_id=judge_run, size=20, annotators=3, seed=4,
            name="quality", gold=read_gold(gold_file),
        )  # fmt: skip
        project, campaign_id = made.campaign.ls_project_id, made.campaign.id
    assert project is not None and made.imported == 23  # 20 drawn + 3 gold
    with Session(engine) as s:
        tasks_db = s.exec(select(CampaignTask).where(CampaignTask.campaign_id == campaign_id)).all()
        keys = dict(s.exec(select(Item.id, Item.key)).all())
    gold_tasks = {keys[t.item_id] for t in tasks_db if t.stratum == "gold"}
    assert gold_tasks == set(gold_keys)
    assert made.campaign.population == 72 - 3  # gold kept out of the draw

    # A gold item already drawn cannot be added as gold; a bad file is one clear line.
    drawn = next(keys[t.item_id] for t in tasks_db if t.stratum != "gold")
    clash = tmp_path / "clash.csv"
    clash.write_text(f"item_id,rubric,score\n{drawn},{_rubric_of(engine, drawn, rubrics)},3\n")
    with session_scope(engine) as session, pytest.raises(CampaignError, match="in campaign"):
        add_gold(session, admin, rubrics, "quality", read_gold(clash))
    unknown = tmp_path / "unknown.csv"
    unknown.write_text("item_id,rubric,score\nno-such-item,ICS,3\n")
    with session_scope(engine) as session, pytest.raises(CampaignError, match="line 2: the data"):
        add_gold(session, admin, rubrics, "quality", read_gold(unknown))
    with session_scope(engine) as session:  # the same file again adds nothing
        assert add_gold(session, admin, rubrics, "quality", read_gold(gold_file)) == (0, 0)

    # Everyone rates every task through their own token; FAIR2 leaves the last rubric of one
    # multi-rubric task unscored.
    to = _targets(admin, project)
    tasks = sorted(admin.export_tasks(project), key=lambda t: t["id"])
    partial = next(t for t in tasks if len(t["data"]["fj_rubrics"]) > 1)
    left_out = partial["data"]["fj_rubrics"][-1]
    submitted: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for email, client in raters.items():
        for task in tasks:
            item = task["data"]["fj_item"]
            result = []
            for rubric in task["data"]["fj_rubrics"]:
                if email == FAIR2 and task is partial and rubric == left_out:
                    continue
                score = planted(email, item, rubric)
                submitted[email][(item, rubric)] = float(score)
                name = interface.control_name(interface.SCORE, rubric)
                result.append(
                    {"from_name": name, "to_name": to[name], "type": "choices",
                     "value": {"choices": [str(score)]}}
                )  # fmt: skip
            client.annotate(task["id"], result, lead_time=20.0)

    with session_scope(engine) as session:
        state = campaign_status(session, admin, "quality")
    people = {a.email: a for a in state.annotators}
    # The incomplete annotation is not done; its item is short of three complete ratings.
    assert (people[FAIR2].done, people[FAIR2].incomplete) == (22, 1)
    assert (people[FAIR1].done, people[HARSH].done) == (23, 23)
    assert state.incomplete == {partial["data"]["fj_item"]: [f"{FAIR2}: {left_out} unscored"]}
    assert state.short == {partial["data"]["fj_item"]: 2}

    # Offsets, computed here: per item the mean over its shared rubrics of HARSH - other,
    # then scipy's one-sample t interval over items.
    for other in (FAIR1, FAIR2):
        per_item: dict[str, list[float]] = defaultdict(list)
        for key, value in submitted[HARSH].items():
            if key in submitted[other]:
                per_item[key[0]].append(value - submitted[other][key])
        d = np.array([np.mean(v) for v in per_item.values()])
        ci = stats.ttest_1samp(d, 0).confidence_interval(0.95)
        assert -1.4 <= d.mean() <= -0.75 and ci.high < -0.5  # the case, flaggable
        assert people[HARSH].offset is not None
        (pair,) = [p for p in people[HARSH].offset.pairs if p.other == other]
        assert (pair.mean, pair.ci_low, pair.ci_high, pair.n_items) == (
            pytest.approx(d.mean()), pytest.approx(ci.low), pytest.approx(ci.high), 23,
        )  # fmt: skip
    assert any("harsher than each of the 2" in f for f in people[HARSH].flags)
    for fair in (FAIR1, FAIR2):
        assert not [f for f in people[fair].flags if "lenient" in f or "agreement" in f], people[
            fair
        ].flags

    # Gold accuracy, by hand: FAIR1 gives the known score; the others as planted.
    for email in (FAIR1, FAIR2, HARSH):
        errors = [abs(planted(email, k, "ICS") - base(k, "ICS")) for k in gold_keys]
        found = people[email].gold
        assert found is not None and found.n == 3
        assert found.exact == pytest.approx(errors.count(0) / 3)
        assert found.mae == pytest.approx(sum(errors) / 3)
    assert state.gold_items == 3

    # The pull stores the rubrics the incomplete annotation has and reports the missing one.
    with session_scope(engine) as session:
        pulled = pull_campaign(session, admin, "quality")
    assert pulled.problems == []
    assert len(pulled.incomplete) == 1 and left_out in pulled.incomplete[0][1]
    total = sum(len(v) for v in submitted.values())
    assert pulled.added == total
    with Session(engine) as s:
        stored = s.exec(
            select(HumanRating.rubric).where(
                HumanRating.campaign_id == campaign_id,
                HumanRating.rater == FAIR2,
                HumanRating.item_id == _item_id(engine, partial["data"]["fj_item"]),
            )
        ).all()
    assert sorted(stored) == sorted(r for r in partial["data"]["fj_rubrics"] if r != left_out)

    # Agreement with the judge leaves the gold items out: ICS counts only drawn items.
    with Session(engine) as s:
        found = run_reliability(s, gen_run, options=BootstrapOptions(n_bootstrap=0))
    drawn_ics = {i for i, rubric in submitted[FAIR1] if rubric == "ICS" and i not in gold_keys}
    assert found.rubrics["ICS"].n_rated_items == len(drawn_ics)


def _targets(admin: LabelStudioClient, project: int) -> dict[str, str]:
    """Control name -> the object tag it labels, read from the project's XML."""
    root = ET.fromstring(admin._sdk.projects.get(project).label_config or "")
    return {e.get("name", ""): e.get("toName", "") for e in root.iter() if e.get("toName")}


def _item_id(engine: Engine, key: str) -> int:
    with Session(engine) as s:
        item = s.exec(select(Item).where(Item.key == key)).one()
    assert item.id is not None
    return item.id


def _rubric_of(engine: Engine, key: str, rubrics: RubricSet) -> str:
    with Session(engine) as s:
        item = s.exec(select(Item).where(Item.key == key)).one()
    return rubrics.for_stage(item.stage)[0]
