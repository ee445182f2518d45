"""Annotation campaigns against the real Label Studio server: create, rate as three simulated
annotators (each through the SDK with their own token), pull, pull again, edit, delete, stop
the server mid-pull, restart, and compare agreement with Label Studio's own export.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from annotation.errors import CampaignError, LabelStudioError
from annotation.labelstudio import interface
from annotation.labelstudio.annotators import add_annotator, list_annotators
from annotation.labelstudio.campaigns import create_campaign
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.listing import blind_check, export_campaign
from annotation.labelstudio.pull import pull_campaign
from annotation.labelstudio.reviews import create_review
from annotation.labelstudio.service import LabelStudioService
from annotation.labelstudio.status import campaign_status
from annotation.reliability import run_reliability
from judge import paths
from judge.grading.rubrics import RubricSet, load_rubrics
from judge.stats.coefficient import BootstrapOptions
from judge.store.engine import session_scope
from judge.store.tables import (
    Campaign,
    CampaignTask,
    HumanRating,
    Item,
    Judgment,
    RatingChange,
    Response,
)
from server import usecases
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer

PEOPLE = ("ann.one@example.org", "ann.two@example.org", "ann.three@example.org")


@pytest.fixture(scope="module")
def rubrics() -> RubricSet:
    return load_rubrics(paths.prompts_dir())


@pytest.fixture(scope="module")
def admin(labelstudio: LabelStudioService) -> LabelStudioClient:
    found = labelstudio.connection()
    return LabelStudioClient(found.url, found.token)


@pytest.fixture(scope="module")
def raters(
    labelstudio: LabelStudioService, admin: LabelStudioClient, store: tuple[Engine, int, int]
) -> dict[str, LabelStudioClient]:
    """Three annotators created as `annotators add` creates them, each with their own client."""
    engine = store[0]
    out = {}
    for email in PEOPLE:
        with session_scope(engine) as session:
            person = add_annotator(session, admin, email, "Ann Example", service=labelstudio)
        assert person.password and labelstudio.can_log_in(email, person.password)
        # Signed in as the person with that password: no `label-studio user` command.
        out[email] = LabelStudioClient(admin.url, labelstudio.login_token(email, person.password))
    return out


def targets(config: str) -> dict[str, str]:
    """Control name -> the object tag it labels, read from the project's XML."""
    root = ET.fromstring(config)
    return {e.get("name", ""): e.get("toName", "") for e in root.iter() if e.get("toName")}


def score_of(email: str, item_key: str, rubric: str) -> int:
    """A made-up but fixed rating: annotators mostly agree (a shared base per item) and
    differ by a rater-specific nudge, so the agreement coefficients are not degenerate."""
    base = hashlib.sha256(f"{item_key}{rubric}".encode()).digest()[0] % 5
    nudge = hashlib.sha256(f"{email}{item_key}".encode()).digest()[0] % 3 - 1
    return int(min(5, max(1, 1 + base + nudge)))


def result_for(task_data: dict, email: str, to: dict[str, str], bump: int = 0) -> list[dict]:
    """What Label Studio's editor submits for the task's rubrics (a choice per rubric, one
    rationale)."""
    out = []
    for rubric in task_data["fj_rubrics"]:
        name = interface.control_name(interface.SCORE, rubric)
        score = min(5, score_of(email, task_data["fj_item"], rubric) + bump)
        out.append(
            {
                "from_name": name,
                "to_name": to[name],
                "type": "choices",
                "value": {"choices": [str(score)]},
            }
        )
    first = task_data["fj_rubrics"][0]
    name = interface.control_name(interface.RATIONALE, first)
    out.append(
        {
            "from_name": name,
            "to_name": to[name],
            "type": "textarea",
            "value": {"text": [f"{email} read it closely"]},
        }
    )
    return out


def ratings_count(engine: Engine, campaign_id: int | None = None) -> int:
    with Session(engine) as s:
        query = select(func.count()).select_from(HumanRating)
        if campaign_id is not None:
            query = query.where(HumanRating.campaign_id == campaign_id)
        return s.exec(query).one()


def test_campaign_round_trip(
    labelstudio: LabelStudioService,
    admin: LabelStudioClient,
    raters: dict[str, LabelStudioClient],
    store: tuple[Engine, int, int],
    rubrics: RubricSet,
) -> None:
    engine, gen_run, judge_run = store
    with session_scope(engine) as session:
        made = create_campaign(
            session, admin, rubrics, judge_run_id=judge_run, size=8, annotators=3, seed=7
        )
        campaign = made.campaign
        project = campaign.ls_project_id
        campaign_id = campaign.id
        name = campaign.name
    assert project is not None and made.created and made.imported == 8
    # Label Studio holds exactly the 8 tasks, each with our id (read through its export).
    exported = admin.export_tasks(project)
    keys = sorted(t["data"][interface.TASK_KEY] for t in exported)
    assert len(keys) == 8 and len(set(keys)) == 8

    # Creating again, and again after forgetting the task ids we stored (as after a crash
    # between Label Studio's import and our commit), imports nothing more.
    with session_scope(engine) as session:
        again = create_campaign(
            session, admin, rubrics, judge_run_id=judge_run, size=8, annotators=3, seed=7
        )
    assert (again.created, again.imported, again.already_there) == (False, 0, 8)
    with session_scope(engine) as session:
        for task in session.exec(
            select(CampaignTask).where(CampaignTask.campaign_id == campaign_id)
        ):
            task.ls_task_id = None
            session.add(task)
    with session_scope(engine) as session:
        third = create_campaign(
            session, admin, rubrics, judge_run_id=judge_run, size=8, annotators=3, seed=7
        )
    assert third.imported == 0 and len(admin.export_tasks(project)) == 8

    # Blind: no judge explanation or raw reply of the run is anywhere in the tasks.
    with session_scope(engine) as session:
        assert blind_check(session, admin, name) == 8
    with Session(engine) as s:
        outputs = [
            j.raw_output
            for j in s.exec(select(Judgment).where(Judgment.judge_run_id == judge_run))
            if j.raw_output
        ]
    dump = json.dumps(admin.export_tasks(project))
    assert outputs and not any(o in dump for o in outputs)

    # Three annotators rate every task; the first skips nothing, the third leaves one task
    # to the others only (an overlap shortfall), and the second rates one task twice.
    config_xml = _project_config(admin, project)
    to = targets(config_xml)
    tasks = sorted(admin.export_tasks(project), key=lambda t: t["id"])
    short_task = tasks[-1]
    for email, client in raters.items():
        for task in tasks:
            if email == PEOPLE[2] and task is short_task:
                continue
            client.annotate(task["id"], result_for(task["data"], email, to), lead_time=12.5)
    with session_scope(engine) as session:
        first = pull_campaign(session, admin, name)
    expected = sum(len(t["data"]["fj_rubrics"]) for t in tasks) * 3 - len(
        short_task["data"]["fj_rubrics"]
    )
    assert (first.added, first.updated, first.withdrawn, first.problems) == (expected, 0, 0, [])
    assert ratings_count(engine, campaign_id) == expected

    # Pulling again adds nothing, and reads no export: nothing changed in Label Studio.
    real_export = admin.export_tasks

    def no_export(project_id: int) -> list[dict]:
        raise AssertionError("a pull with nothing new must not read the whole project")

    admin.export_tasks = no_export  # type: ignore[method-assign]
    try:
        with session_scope(engine) as session:
            second = pull_campaign(session, admin, name)
    finally:
        admin.export_tasks = real_export  # type: ignore[method-assign]
    assert (second.added, second.updated, second.unchanged) == (0, 0, expected)

    # Status: the short item is reported with 2 ratings; progress per annotator.
    with session_scope(engine) as session:
        state = campaign_status(session, admin, name)
    assert state.short == {short_task["data"]["fj_item"]: 2}
    done = {a.email: a.done for a in state.annotators}
    assert done == {PEOPLE[0]: 8, PEOPLE[1]: 8, PEOPLE[2]: 7}

    # Agreement from the pulled ratings equals scipy and krippendorff on the ratings read
    # straight from Label Studio's own export (parsed here, not through FairJudge).
    _agreement_matches_export(engine, admin, project, gen_run)

    # An edit and a deletion in Label Studio: the edit updates the rating and keeps the old
    # value; the deletion marks the rating withdrawn.
    edited_task, deleted_task = tasks[0], tasks[1]
    by_task = {t["id"]: t for t in admin.export_tasks(project)}
    mine = [
        a
        for a in by_task[edited_task["id"]]["annotations"]
        if a["completed_by"] == _uid(admin, PEOPLE[0])
    ]
    # Edited by its author, through their own token (an edit by anyone else is held out).
    raters[PEOPLE[0]].update_annotation(
        mine[0]["id"], result_for(edited_task["data"], PEOPLE[0], to, bump=1)
    )
    old = {
        r.rubric: r.score
        for r in _ratings(engine, edited_task["data"]["fj_item"], PEOPLE[0], gen_run)
    }
    # An edit alone leaves Label Studio's counts as they were: the pull must still see it.
    with session_scope(engine) as session:
        edit_pull = pull_campaign(session, admin, name)
    gone = [
        a
        for a in by_task[deleted_task["id"]]["annotations"]
        if a["completed_by"] == _uid(admin, PEOPLE[1])
    ]
    admin.delete_annotation(gone[0]["id"])
    with session_scope(engine) as session:
        third_pull = pull_campaign(session, admin, name)
    item = edited_task["data"]["fj_item"]
    # The edit raised each score by one (capped at 5): those that moved are updated, the
    # rest unchanged; the deletion withdraws one rating per rubric of its task.
    wanted = {
        r: min(5, score_of(PEOPLE[0], item, r) + 1) for r in edited_task["data"]["fj_rubrics"]
    }
    moved = [r for r in wanted if wanted[r] != old[r]]
    assert moved, "the edit must change at least one score for this test to mean anything"
    assert (edit_pull.updated, edit_pull.added, edit_pull.withdrawn) == (len(moved), 0, 0)
    assert third_pull.withdrawn == len(deleted_task["data"]["fj_rubrics"])
    assert (third_pull.updated, third_pull.added) == (0, 0)
    now = {r.rubric: r.score for r in _ratings(engine, item, PEOPLE[0], gen_run)}
    assert now == wanted
    with Session(engine) as s:
        history = s.exec(select(RatingChange)).all()
        withdrawn = s.exec(
            select(HumanRating).where(col(HumanRating.withdrawn_at).is_not(None))
        ).all()
    assert {h.change for h in history} == {"edited", "withdrawn"}
    assert {(w.rater, w.item_id) for w in withdrawn} == {
        (PEOPLE[1], _item_id(engine, deleted_task["data"]["fj_item"]))
    }
    edited_history = [h for h in history if h.change == "edited"]
    assert sorted(h.score for h in edited_history) == sorted(
        old[r] for r in edited_task["data"]["fj_rubrics"] if now[r] != old[r]
    )

    # Label Studio stopped mid-pull: a clear error, nothing written; restarted, the pull
    # completes. The export is read, then the server stops before the users are read.
    raters[PEOPLE[2]].annotate(short_task["id"], result_for(short_task["data"], PEOPLE[2], to))
    before = ratings_count(engine)
    real_users = admin.users

    def stop_then_users() -> dict[int, str]:
        labelstudio.stop()
        return real_users()

    admin.users = stop_then_users  # type: ignore[method-assign]
    try:
        with (
            pytest.raises(LabelStudioError, match="cannot be reached"),
            session_scope(engine) as session,
        ):
            pull_campaign(session, admin, name)
    finally:
        admin.users = real_users  # type: ignore[method-assign]
    assert ratings_count(engine) == before
    labelstudio.start()
    with session_scope(engine) as session:
        resumed = pull_campaign(session, admin, name)
    assert resumed.added == len(short_task["data"]["fj_rubrics"])

    # Export writes what `ratings import` reads: one row per live rating.
    out = Path(labelstudio.home) / "export.csv"
    with session_scope(engine) as session:
        rows = export_campaign(session, name, out)
    with Session(engine) as s:
        live = s.exec(
            select(func.count())
            .select_from(HumanRating)
            .where(HumanRating.campaign_id == campaign_id, col(HumanRating.withdrawn_at).is_(None))
        ).one()
    assert rows == live == len(out.read_text().splitlines()) - 1

    with Session(engine) as s:
        listed = {a["email"]: a for a in list_annotators(s)}
    assert set(PEOPLE) <= set(listed)
    assert listed[PEOPLE[0]]["campaigns"] == {name: "8/8"}


def _project_config(admin: LabelStudioClient, project: int) -> str:
    return admin._sdk.projects.get(project).label_config or ""


def _uid(admin: LabelStudioClient, email: str) -> int:
    return next(uid for uid, mail in admin.users().items() if mail == email)


def _item_id(engine: Engine, key: str) -> int:
    with Session(engine) as s:
        item = s.exec(select(Item).where(Item.key == key)).one()
        assert item.id is not None
        return item.id


def _ratings(engine: Engine, key: str, rater: str, gen_run: int) -> list[HumanRating]:
    with Session(engine) as s:
        return list(
            s.exec(
                select(HumanRating).where(
                    HumanRating.item_id == _item_id(engine, key),
                    HumanRating.rater == rater,
                    HumanRating.generation_run_id == gen_run,
                )
            )
        )


def _agreement_matches_export(
    engine: Engine, admin: LabelStudioClient, project: int, gen_run: int
) -> None:
    users = admin.users()
    per_rubric: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for task in admin.export_tasks(project):
        for ann in task["annotations"]:
            for entry in ann["result"]:
                if entry["type"] != "choices":
                    continue
                rubric = entry["from_name"].split("_", 1)[1]
                per_rubric[rubric][task["data"]["fj_item"]][users[ann["completed_by"]]] = float(
                    entry["value"]["choices"][0]
                )
    with Session(engine) as s:
        judge = defaultdict(dict)
        for j, key in s.exec(select(Judgment, Item.key).join(Item)):
            judge[j.rubric][key] = float(j.score) if j.score is not None else None
    with Session(engine) as s:
        found = run_reliability(s, gen_run, options=BootstrapOptions(n_bootstrap=0))
    for rubric, items in per_rubric.items():
        keys = sorted(k for k in items if judge[rubric].get(k) is not None)
        human = [np.mean(list(items[k].values())) for k in keys]
        judged = [judge[rubric][k] for k in keys]
        entry = found.rubrics[rubric].judges[0]
        if entry.agreement is None or len(keys) < 3:
            continue
        coefs = entry.agreement.coefficients
        if not np.isnan(coefs["spearman"].value):
            assert coefs["spearman"].value == pytest.approx(
                stats.spearmanr(judged, human).statistic
            )
        if not np.isnan(coefs["pearson"].value):
            assert coefs["pearson"].value == pytest.approx(stats.pearsonr(judged, human).statistic)
        matrix = np.array(
            [[items[k].get(p, np.nan) for k in sorted(items)] for p in PEOPLE], dtype=float
        )
        alpha = krippendorff.alpha(
            reliability_data=matrix, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]
        )
        ceiling = found.rubrics[rubric].human_vs_human.alphas
        assert ceiling["alpha_ordinal"].value == pytest.approx(alpha)


def test_a_size_larger_than_the_run_is_refused_and_nothing_is_stored(
    admin: LabelStudioClient, store: tuple[Engine, int, int], rubrics: RubricSet
) -> None:
    engine, _, judge_run = store
    with Session(engine) as s:
        before = s.exec(select(func.count()).select_from(CampaignTask)).one()
    with pytest.raises(CampaignError, match="72"), session_scope(engine) as session:
        create_campaign(
            session, admin, rubrics, judge_run_id=judge_run, size=500, seed=1, name="big"
        )
    with pytest.raises(CampaignError, match="unknown rubric"), session_scope(engine) as session:
        create_campaign(session, admin, rubrics, judge_run_id=judge_run, rubrics=["XYZ"], name="x")
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(CampaignTask)).one() == before


class _LockedAfterCreating(LabelStudioClient):
    """Label Studio makes the project, then answers 500 "database is locked" (what a busy
    Label Studio on SQLite did in issue 41); the real project stays."""

    def create_project(self, **options: Any) -> int:
        super().create_project(**options)
        raise LabelStudioError(
            f"Label Studio at {self.url} answered HTTP 500 while creating project "
            f"{options['title']!r}: database is locked"
        )


def _projects_titled(admin: LabelStudioClient, title: str) -> list[int]:
    """Label Studio's projects of this title, read straight through the SDK (one page of
    1,000: the session's server holds far fewer)."""
    page = admin._sdk.projects.list(page=1, page_size=1000)
    return sorted(int(p.id) for p in page.items or [] if p.id is not None and p.title == title)


def test_create_finds_its_project_again_and_never_makes_it_twice(
    labelstudio: LabelStudioService,
    admin: LabelStudioClient,
    store: tuple[Engine, int, int],
    rubrics: RubricSet,
) -> None:
    engine, _, judge_run = store
    options = {"judge_run_id": judge_run, "rubrics": ["ICS"], "size": 4, "seed": 21}
    # The fault: the create answered an error after Label Studio had made the project.
    locked = _LockedAfterCreating(admin.url, labelstudio.connection().token)
    with session_scope(engine) as session:
        made = create_campaign(session, locked, rubrics, name="locked", **options)
    (project,) = _projects_titled(admin, "FairJudge locked")
    assert made.campaign.ls_project_id == project and made.imported == 4
    # Run again (as a user retries after an error): the same project, nothing imported twice.
    with session_scope(engine) as session:
        again = create_campaign(session, admin, rubrics, name="locked", **options)
    assert _projects_titled(admin, "FairJudge locked") == [project]
    assert (again.imported, again.already_there) == (0, 4)
    # A create whose project id was never stored (the answer lost): found by its key.
    with session_scope(engine) as session:
        lost = session.exec(select(Campaign).where(Campaign.name == "locked")).one()
        lost.ls_project_id = None
        session.add(lost)
        session.commit()
    with session_scope(engine) as session:
        found = create_campaign(session, admin, rubrics, name="locked", **options)
    assert found.campaign.ls_project_id == project
    assert _projects_titled(admin, "FairJudge locked") == [project]
    # Without a fault: one create, one project.
    with session_scope(engine) as session:
        plain = create_campaign(session, admin, rubrics, name="plain", **options)
    assert _projects_titled(admin, "FairJudge plain") == [plain.campaign.ls_project_id]


def test_review_round_trip(
    labelstudio: LabelStudioService,
    admin: LabelStudioClient,
    raters: dict[str, LabelStudioClient],
    store: tuple[Engine, int, int],
    rubrics: RubricSet,
) -> None:
    engine = store[0]
    keys = ["s1-gender-1", "s1-gender-2", "s1-subject-1"]
    with session_scope(engine) as session:
        made = create_review(session, admin, rubrics, dataset="sample", item_keys=keys)
        project = made.campaign.ls_project_id
        name = made.campaign.name
    assert project is not None and made.imported == 3
    config_xml = _project_config(admin, project)
    to = targets(config_xml)
    reviewer = raters[PEOPLE[0]]
    tasks = {t["data"]["fj_item"]: t for t in admin.export_tasks(project)}
    question = tasks["s1-gender-2"]["data"]["fj_field_question"]
    decisions = {
        "s1-gender-1": [("decision", "choices", {"choices": ["accept"]})],
        "s1-gender-2": [
            ("decision", "choices", {"choices": ["edit"]}),
            ("reason", "textarea", {"text": ["clearer wording"]}),
            ("edit_question", "textarea", {"text": [question + " Explain briefly."]}),
        ],
        "s1-subject-1": [
            ("decision", "choices", {"choices": ["reject"]}),
            ("reason", "textarea", {"text": ["the expected answer is biased itself"]}),
        ],
    }
    for key, entries in decisions.items():
        result = [{"from_name": n, "to_name": to[n], "type": t, "value": v} for n, t, v in entries]
        reviewer.annotate(tasks[key]["id"], result)
    with session_scope(engine) as session:
        pulled = pull_campaign(session, admin, name)
    assert pulled.problems == []
    with Session(engine) as s:
        items = {i.key: i for i in s.exec(select(Item).where(col(Item.key).in_(keys)))}
    assert {k: items[k].review_status for k in keys} == {
        "s1-gender-1": "accepted",
        "s1-gender-2": "edited",
        "s1-subject-1": "rejected",
    }
    edited = items["s1-gender-2"]
    assert edited.review["edits"] == {"question": question + " Explain briefly."}
    assert edited.fields["question"] == question  # the original stays beside the edit
    assert items["s1-subject-1"].review["reason"] == "the expected answer is biased itself"

    # Evaluation restricted to accepted items: only s1-gender-1 (one S1 question) is asked.
    with StubServer() as stub:
        settings = make_settings(stub.base_url, engine.url.render_as_string(hide_password=False))
        summary = usecases.generate(
            engine,
            settings,
            usecases.GenerateRequest(dataset="sample", accepted_only=True, new=True),
        )
    assert summary.tasks == 1
    with Session(engine) as s:
        asked = s.exec(
            select(Item.key)
            .join(Response, col(Response.item_id) == Item.id)
            .where(Response.run_id == summary.run_id)
        ).all()
    assert asked == ["s1-gender-1"]


def test_bad_annotations_are_reported_and_the_rest_stored(
    admin: LabelStudioClient,
    raters: dict[str, LabelStudioClient],
    store: tuple[Engine, int, int],
    rubrics: RubricSet,
) -> None:
    engine, _, judge_run = store
    with session_scope(engine) as session:
        made = create_campaign(
            session, admin, rubrics, judge_run_id=judge_run, rubrics=["ICS"], size=3,
            annotators=1, seed=11, name="bad-input",
        )  # fmt: skip
        project, campaign_id = made.campaign.ls_project_id, made.campaign.id
    assert project is not None
    to = targets(_project_config(admin, project))
    tasks = sorted(admin.export_tasks(project), key=lambda t: t["id"])
    # A task someone added by hand in Label Studio (not ours), annotated.
    foreign = {**tasks[0]["data"], interface.TASK_KEY: "someone-else:1"}
    (foreign_id,) = admin.import_tasks(project, [foreign])
    rater = raters[PEOPLE[0]]
    rater.annotate(foreign_id, result_for(foreign, PEOPLE[0], to))
    # A score off the 1-5 scale (the editor cannot produce it; the API can).
    off_scale = result_for(tasks[0]["data"], PEOPLE[0], to)
    off_scale[0]["value"] = {"choices": ["7"]}
    rater.annotate(tasks[0]["id"], off_scale)
    # Two good annotations.
    for task in tasks[1:]:
        rater.annotate(task["id"], result_for(task["data"], PEOPLE[0], to))
    with session_scope(engine) as session:
        pulled = pull_campaign(session, admin, "bad-input")
    reasons = {task: why for task, why in pulled.problems}
    assert set(reasons) == {foreign_id, tasks[0]["id"]}
    assert "not a task of this campaign" in reasons[foreign_id]
    assert "7" in reasons[tasks[0]["id"]]
    assert pulled.added == 2 and ratings_count(engine, campaign_id) == 2

    # Nothing new in Label Studio: the next pull reads no export although two problems are
    # stored (issue 41: it read the whole project every time), and says the same problems.
    exports: list[int] = []
    real_export = admin.export_tasks

    def counted_export(project_id: int, **options: Any) -> list[dict]:
        exports.append(project_id)
        return real_export(project_id, **options)

    admin.export_tasks = counted_export  # type: ignore[method-assign]
    try:
        with session_scope(engine) as session:
            again = pull_campaign(session, admin, "bad-input")
        assert exports == []
        assert sorted(again.problems) == sorted(pulled.problems)
        assert (again.added, again.updated, again.unchanged, again.withdrawn) == (0, 0, 2, 0)
        # A change (the off-scale annotation corrected) is read: one export, no problem left.
        (bad,) = {t["id"]: t for t in real_export(project)}[tasks[0]["id"]]["annotations"]
        rater.update_annotation(bad["id"], result_for(tasks[0]["data"], PEOPLE[0], to))
        with session_scope(engine) as session:
            fixed = pull_campaign(session, admin, "bad-input")
        assert exports == [project]
        assert [t for t, _ in fixed.problems] == [foreign_id] and fixed.added == 1
    finally:
        admin.export_tasks = real_export  # type: ignore[method-assign]

    # A wrong token and a server that is not there: one clear error each.
    with pytest.raises(LabelStudioError, match="refused the token"):
        LabelStudioClient(admin.url, "0" * 40).whoami()
    with pytest.raises(LabelStudioError, match="cannot be reached"):
        LabelStudioClient("http://127.0.0.1:9", "0" * 40, timeout_s=2).whoami()
