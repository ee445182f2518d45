"""Ratings belong to their campaign (issue 25, items 1 and 4), against the real Label Studio.

A random and a stratified campaign over one judge run share items; three annotators rate
both through their own tokens, one of them differently in the second campaign. Pulled in
either order the store holds the same ratings, no history for edits nobody made, complete
exports and annotator counts, and the same agreement, which equals scipy's on the ratings
written here by hand (the newest campaign's rating counts for an item rated in both). A
cross-edit (annotator B changing A's annotation with B's own token) is held out and reported
until A submits again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from annotation.labelstudio import interface
from annotation.labelstudio.annotators import add_annotator, list_annotators
from annotation.labelstudio.campaigns import create_campaign
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.listing import export_campaign
from annotation.labelstudio.pull import pull_campaign
from annotation.labelstudio.service import LabelStudioService
from annotation.labelstudio.status import campaign_status
from annotation.ratings import import_ratings
from annotation.reliability import run_reliability
from judge import paths
from judge.errors import InvalidInputError
from judge.grading.rubrics import RubricSet, load_rubrics
from judge.stats.coefficient import BootstrapOptions
from judge.store.engine import make_engine, session_scope
from judge.store.tables import CampaignTask, HumanRating, Item, Judgment, RatingChange
from server.cli import Context
from server.cli.agreement import agreement
from tests.support import stores

PEOPLE = ("scope.one@example.org", "scope.two@example.org", "scope.three@example.org")
RANDOM, STRATIFIED = "scope-random", "scope-stratified"
NO_BOOT = BootstrapOptions(n_bootstrap=0)


def base_score(email: str, key: str, rubric: str) -> int:
    """A fixed made-up rating: a shared base per item and rubric plus a rater's nudge."""
    base = hashlib.sha256(f"{key}{rubric}".encode()).digest()[0] % 5
    nudge = hashlib.sha256(f"{email}{key}".encode()).digest()[0] % 3 - 1
    return int(min(5, max(1, 1 + base + nudge)))


def score(campaign: str, email: str, key: str, rubric: str) -> int:
    """What each person gives in each campaign: the first person rates every item of the
    stratified campaign one level up (5 wraps to 1), so a shared item's two ratings differ."""
    s = base_score(email, key, rubric)
    return s % 5 + 1 if campaign == STRATIFIED and email == PEOPLE[0] else s


def result(data: dict[str, Any], scores: dict[str, int], to: dict[str, str]) -> list[dict]:
    """What Label Studio's editor submits: one choice per rubric and one rationale."""
    out: list[dict[str, Any]] = []
    for rubric in data["fj_rubrics"]:
        name = interface.control_name(interface.SCORE, rubric)
        out.append(
            {
                "from_name": name,
                "to_name": to[name],
                "type": "choices",
                "value": {"choices": [str(scores[rubric])]},
            }
        )
    name = interface.control_name(interface.RATIONALE, data["fj_rubrics"][0])
    out.append(
        {"from_name": name, "to_name": to[name], "type": "textarea", "value": {"text": ["ok"]}}
    )
    return out


def targets(admin: LabelStudioClient, project: int) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(admin._sdk.projects.get(project).label_config or "")
    return {e.get("name", ""): e.get("toName", "") for e in root.iter() if e.get("toName")}


def copy_db(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite store (SQLite's backup, WAL included)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
    labelstudio: LabelStudioService,
    judged_sample_template: stores.Judged,
) -> Iterator[dict[str, Any]]:
    """Two campaigns created and rated in Label Studio; nothing pulled yet. ``db`` is the
    store file, copied by each test that pulls (so each starts from the same state). The
    store starts as a copy of the session's judged sample (tests/support/stores.py)."""
    folder = tmp_path_factory.mktemp("scope")
    url = stores.copy_store(judged_sample_template.path, folder / "fairjudge.db")
    engine = make_engine(url)
    found = labelstudio.connection()
    admin = LabelStudioClient(found.url, found.token)
    rubrics: RubricSet = load_rubrics(paths.prompts_dir())
    jud = judged_sample_template
    raters = {}
    for email in PEOPLE:
        with session_scope(engine) as session:
            person = add_annotator(session, admin, email, "Scope Tester", service=labelstudio)
        assert person.password is not None
        token = labelstudio.login_token(email, person.password)
        raters[email] = LabelStudioClient(admin.url, token)
    projects, tasks = {}, {}
    for name, strategy in ((RANDOM, "random"), (STRATIFIED, "stratified")):
        with session_scope(engine) as session:
            made = create_campaign(
                session, admin, rubrics, judge_run_id=jud.judge_run_id, size=24, annotators=3,
                seed=5, strategy=strategy, name=name,
            )  # fmt: skip
            projects[name] = made.campaign.ls_project_id
        to = targets(admin, projects[name])
        tasks[name] = admin.export_tasks(projects[name])
        for email, client in raters.items():
            for task in tasks[name]:
                data = task["data"]
                scores = {r: score(name, email, data["fj_item"], r) for r in data["fj_rubrics"]}
                client.annotate(task["id"], result(data, scores, to), lead_time=9.0)
    shared = {t["data"]["fj_item"] for t in tasks[RANDOM]} & {
        t["data"]["fj_item"] for t in tasks[STRATIFIED]
    }
    assert shared, "the two campaigns must share items for these tests to mean anything"
    engine.dispose()
    yield {
        "db": folder / "fairjudge.db",
        "admin": admin,
        "raters": raters,
        "projects": projects,
        "tasks": tasks,
        "shared": shared,
        "gen_run": jud.generation_run_id,
        "judge_run": jud.judge_run_id,
    }


def pulled(world: dict[str, Any], tmp_path: Path, order: tuple[str, ...]) -> Engine:
    """A copy of the store with the campaigns pulled in ``order``."""
    db = tmp_path / f"{'-'.join(order)}.db"
    copy_db(world["db"], db)
    engine = make_engine(f"sqlite:///{db}")
    for name in order:
        with session_scope(engine) as session:
            got = pull_campaign(session, world["admin"], name)
        assert got.problems == []
    return engine


def stored(engine: Engine) -> set[tuple[str, str, str, float, str | None, str]]:
    with Session(engine) as s:
        return {
            (key, r.rubric, r.rater, r.score, r.rationale, r.scope)
            for r, key in s.exec(select(HumanRating, Item.key).join(Item))
        }


def expected_ratings(world: dict[str, Any], names: tuple[str, ...]) -> dict[str, dict]:
    """rubric -> item key -> rater -> score, written from ``score`` (not read back): the
    stratified campaign is created second, so it wins where both rated an item."""
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for name in (RANDOM, STRATIFIED):  # oldest first: a later one overwrites
        if name not in names:
            continue
        for task in world["tasks"][name]:
            data = task["data"]
            for rubric in data["fj_rubrics"]:
                for email in PEOPLE:
                    out[rubric][data["fj_item"]][email] = score(
                        name, email, data["fj_item"], rubric
                    )
    return out


def check_agreement(engine: Engine, world: dict[str, Any], names: tuple[str, ...]) -> None:
    """Spearman and Pearson per rubric equal scipy's on the hand-written ratings' means."""
    with Session(engine) as s:
        judge = {
            (key, j.rubric): float(j.score)
            for j, key in s.exec(select(Judgment, Item.key).join(Item))
            if j.judge_run_id == world["judge_run"] and j.score is not None
        }
        found = run_reliability(
            s, world["gen_run"], options=NO_BOOT, campaigns=names if len(names) == 1 else ()
        )
    checked = 0
    for rubric, items in expected_ratings(world, names).items():
        keys = sorted(k for k in items if (k, rubric) in judge)
        human = [float(np.mean(list(items[k].values()))) for k in keys]
        judged = [judge[(k, rubric)] for k in keys]
        entry = found.rubrics[rubric].judges[0]
        assert entry.n == len(keys)
        if len(keys) < 3 or entry.agreement is None:
            continue
        coefs = entry.agreement.coefficients
        want = stats.spearmanr(judged, human).statistic
        if np.isfinite(want):
            assert coefs["spearman"].value == pytest.approx(want)
            checked += 1
    assert checked, "no rubric had enough items to compare"


def test_overlapping_campaigns_pulled_in_either_order_agree(
    world: dict[str, Any], tmp_path: Path
) -> None:
    one = pulled(world, tmp_path, (RANDOM, STRATIFIED))
    two = pulled(world, tmp_path, (STRATIFIED, RANDOM))
    # Same ratings, each in its own campaign's scope: every task x rubric x person of both.
    expected_rows = sum(
        len(t["data"]["fj_rubrics"]) * len(PEOPLE)
        for n in world["tasks"]
        for t in world["tasks"][n]
    )
    assert stored(one) == stored(two) and len(stored(one)) == expected_rows
    # Pulled again, alternately: nothing changes and no history row appears (no one edited).
    for name in (RANDOM, STRATIFIED, RANDOM, STRATIFIED):
        with session_scope(one) as session:
            again = pull_campaign(session, world["admin"], name)
        assert (again.added, again.updated, again.withdrawn) == (0, 0, 0)
    with Session(one) as s:
        assert s.exec(select(RatingChange)).all() == []
    assert stored(one) == stored(two)
    # Agreement: the same in both stores, and equal to scipy's on the hand-written ratings,
    # all campaigns (the newer wins on shared items) or one campaign alone.
    for engine in (one, two):
        check_agreement(engine, world, (RANDOM, STRATIFIED))
        check_agreement(engine, world, (RANDOM,))
        check_agreement(engine, world, (STRATIFIED,))
    with Session(one) as s:
        a = run_reliability(s, world["gen_run"], options=NO_BOOT).to_dict()
    with Session(two) as s:
        b = run_reliability(s, world["gen_run"], options=NO_BOOT).to_dict()
    assert a == b
    # It says what it used: both campaigns, oldest first, the shared items' older ratings
    # superseded (shared items x their rubrics x 3 people), and why no weighted estimate.
    shared_rows = sum(
        len(t["data"]["fj_rubrics"]) * len(PEOPLE)
        for t in world["tasks"][RANDOM]
        if t["data"]["fj_item"] in world["shared"]
    )
    assert a["ratings_used"]["scopes"] == [RANDOM, STRATIFIED]
    assert a["ratings_used"]["superseded"] == shared_rows
    assert "several campaigns" in a["weighted_absent"]
    # Exports and annotator counts are per campaign and complete.
    for name in (RANDOM, STRATIFIED):
        rows = sum(len(t["data"]["fj_rubrics"]) * len(PEOPLE) for t in world["tasks"][name])
        with session_scope(one) as session:
            written = export_campaign(session, name, tmp_path / f"{name}.csv")
        assert written == rows == len((tmp_path / f"{name}.csv").read_text().splitlines()) - 1
    with Session(one) as s:
        listed = {a["email"]: a["campaigns"] for a in list_annotators(s)}
    for email in PEOPLE:
        assert listed[email] == {RANDOM: "24/24", STRATIFIED: "24/24"}


def test_cli_agreement_takes_campaigns_and_says_which(
    world: dict[str, Any], tmp_path: Path
) -> None:
    engine = pulled(world, tmp_path, (STRATIFIED, RANDOM))
    url = str(engine.url)
    run = CliRunner().invoke(
        agreement,
        ["--run", str(world["gen_run"]), "--campaign", STRATIFIED, "--bootstrap", "0", "--json"],
        obj=Context(None, url),
    )
    assert run.exit_code == 0, run.output
    data = json.loads(run.output)
    assert data["ratings_used"]["scopes"] == [STRATIFIED]
    assert data["ratings_used"]["superseded"] == 0
    # One stratified campaign: its unequal inclusion probabilities give weighted estimates.
    with Session(engine) as s:
        probabilities = {
            t.inclusion_probability
            for t in s.exec(select(CampaignTask))
            if t.campaign_id is not None
        }
    assert len(probabilities) > 1
    assert data["weighted_absent"] == ""
    # Plain output names the campaigns used; an unknown one is one clear line.
    text = CliRunner().invoke(
        agreement, ["--run", str(world["gen_run"]), "--bootstrap", "0"], obj=Context(None, url)
    )
    assert text.exit_code == 0 and f"ratings from {RANDOM}, {STRATIFIED}" in text.output
    bad = CliRunner().invoke(
        agreement, ["--run", str(world["gen_run"]), "--campaign", "nope"], obj=Context(None, url)
    )
    assert bad.exit_code != 0
    assert isinstance(bad.exception, InvalidInputError) and "nope" in str(bad.exception)


def test_an_import_batch_beside_a_campaign_keeps_both(
    world: dict[str, Any], tmp_path: Path
) -> None:
    engine = pulled(world, tmp_path, (RANDOM,))
    task = world["tasks"][RANDOM][0]["data"]
    rubric = task["fj_rubrics"][0]
    pulled_score = score(RANDOM, PEOPLE[0], task["fj_item"], rubric)
    other = pulled_score % 5 + 1
    csv = tmp_path / "extra.csv"
    csv.write_text(f"item_id,rubric,rater,score\n{task['fj_item']},{rubric},{PEOPLE[0]},{other}\n")
    rubrics = load_rubrics(paths.prompts_dir())
    for _ in range(2):  # the second import is idempotent
        with session_scope(engine) as session:
            import_ratings(session, csv, world["gen_run"], rubrics, batch="extra")
    with Session(engine) as s:
        rows = s.exec(
            select(HumanRating).where(HumanRating.rater == PEOPLE[0], HumanRating.rubric == rubric)
        ).all()
    mine = sorted((r.scope, r.score) for r in rows if r.item_id == task_item(engine, task))
    assert mine == sorted([(f"campaign:{campaign_id(engine, RANDOM)}", pulled_score),
                           ("import:extra", other)])  # fmt: skip
    with Session(engine) as s:
        found = run_reliability(s, world["gen_run"], options=NO_BOOT)
    assert found.ratings_used["scopes"] == [RANDOM, "import:extra"]
    assert "imported" in found.weighted_absent


def task_item(engine: Engine, data: dict[str, Any]) -> int:
    with Session(engine) as s:
        item = s.exec(select(Item).where(Item.key == data["fj_item"])).one()
        assert item.id is not None
        return item.id


def campaign_id(engine: Engine, name: str) -> int:
    from judge.store.tables import Campaign

    with Session(engine) as s:
        found = s.exec(select(Campaign).where(Campaign.name == name)).one()
        assert found.id is not None
        return found.id


def test_a_cross_edit_is_held_out_until_its_author_submits_again(
    world: dict[str, Any], tmp_path: Path
) -> None:
    engine = pulled(world, tmp_path, (RANDOM,))
    admin, raters = world["admin"], world["raters"]
    project = world["projects"][RANDOM]
    users = {mail: uid for uid, mail in admin.users().items()}
    task = sorted(admin.export_tasks(project), key=lambda t: t["id"])[-1]
    data = task["data"]
    author, editor = PEOPLE[0], PEOPLE[1]
    own = next(a for a in task["annotations"] if a["completed_by"] == users[author])
    before = stored(engine)
    # B changes A's annotation through B's own token (Community edition lets any member).
    to = targets(admin, project)
    changed = {r: score(RANDOM, author, data["fj_item"], r) % 5 + 1 for r in data["fj_rubrics"]}
    raters[editor].update_annotation(own["id"], result(data, changed, to))
    exported = {t["id"]: t for t in admin.export_tasks(project)}[task["id"]]
    edited = next(a for a in exported["annotations"] if a["id"] == own["id"])
    assert edited["completed_by"] == users[author] and edited["updated_by"] == users[editor]
    with session_scope(engine) as session:
        held = pull_campaign(session, admin, RANDOM)
    assert held.cross_edited == [(author, editor, data["fj_item"])]
    assert len(held.problems) == 1 and "held out" in held.problems[0][1]
    assert (held.added, held.updated, held.withdrawn) == (0, 0, 0)
    assert stored(engine) == before  # neither A's nor B's rating took B's values

    # `campaign status` counts what the pull counts (issue 41): A's offset from B is that of
    # the stored ratings, written here from `score` by hand, not of B's edit.
    def by_hand(edited: dict[str, int]) -> float:
        diffs = []
        for t in world["tasks"][RANDOM]:
            key, names = t["data"]["fj_item"], t["data"]["fj_rubrics"]
            mine = {r: score(RANDOM, author, key, r) for r in names}
            if key == data["fj_item"]:
                mine = edited
            diffs.append(np.mean([mine[r] - score(RANDOM, editor, key, r) for r in names]))
        return float(np.mean(diffs))

    with Session(engine) as session:
        shown = campaign_status(session, admin, RANDOM)
    progress = {p.email: p for p in shown.annotators}
    assert progress[author].held_out == 1
    assert progress[author].offset is not None
    pair = next(o for o in progress[author].offset.pairs if o.other == editor)
    kept = {r: score(RANDOM, author, data["fj_item"], r) for r in data["fj_rubrics"]}
    assert pair.mean == pytest.approx(by_hand(kept))
    assert by_hand(changed) != pytest.approx(by_hand(kept))  # the edit would have moved it
    # A submits again (A's own values): A is the last editor, the pull takes the values.
    mine = {r: score(RANDOM, author, data["fj_item"], r) for r in data["fj_rubrics"]}
    raters[author].update_annotation(own["id"], result(data, mine, to))
    with session_scope(engine) as session:
        back = pull_campaign(session, admin, RANDOM)
    assert back.problems == [] and back.cross_edited == []
    assert (back.added, back.updated, back.withdrawn) == (0, 0, 0)
    assert stored(engine) == before
