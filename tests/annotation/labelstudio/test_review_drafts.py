"""Generated items waiting for review (drafts), against the real Label Studio server: a
review campaign of the drafts only, decisions made through Label Studio's API, pulled back
onto the items, then used by generation runs (drafts and rejected items left out unless
asked for) and exported with their review and provenance, as the dataset-generation issue
describes.

The drafts are marked on imported sample items by hand (what the item generator stores), so
that this test does not depend on a model writing items.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from annotation.errors import CampaignError
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.pull import pull_campaign
from annotation.labelstudio.reviews import create_review
from annotation.labelstudio.service import LabelStudioService
from judge import paths
from judge.answers.collect import generate
from judge.data.datasets import export_items, import_items
from judge.errors import InvalidInputError
from judge.grading.rubrics import RubricSet, load_rubrics
from judge.models.client import ModelClient
from judge.prompts import PromptBook
from judge.runs import RunSummary
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Campaign, GenerationRun, Item, Response
from tests.support import stores
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

# Four of the 18 S1 sample items are drafts at first; two more are "generated" later.
DRAFTS = ("s1-gender-1", "s1-gender-2", "s1-race_culture-1", "s1-race_culture-2")
LATER = ("s1-learning_style-1", "s1-learning_style-2")
ADMIN = "admin@fairjudge.local"  # the session server's admin, who reviews here


@pytest.fixture
def engine(tmp_path: Path, empty_template: Path) -> Iterator[Engine]:
    """A store (a copy of the session's empty one) with the 18 S1 sample items as dataset
    "s1" (the first four drafts) and the same items, none a draft, as dataset "plain"."""
    lines = [x for x in SAMPLE.read_text().splitlines() if json.loads(x)["stage"] == "S1"]
    s1 = tmp_path / "s1.jsonl"
    s1.write_text("\n".join(lines) + "\n")
    engine = make_engine(stores.copy_store(empty_template, tmp_path / "fairjudge.db"))
    with session_scope(engine) as session:
        import_items(session, s1, "s1")
        import_items(session, s1, "plain")
    mark_drafts(engine, DRAFTS)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def rubrics() -> RubricSet:
    return load_rubrics(paths.prompts_dir())


@pytest.fixture(scope="module")
def admin(labelstudio: LabelStudioService) -> LabelStudioClient:
    found = labelstudio.connection()
    return LabelStudioClient(found.url, found.token)


def mark_drafts(engine: Engine, keys: tuple[str, ...]) -> None:
    with session_scope(engine) as session:
        dataset_id = _dataset_id(session, "s1")
        for item in session.exec(
            select(Item).where(Item.dataset_id == dataset_id, col(Item.key).in_(keys))
        ):
            item.review_status = "draft"
            session.add(item)


def _dataset_id(session: Session, name: str) -> int:
    from judge.store.queries import get_dataset

    found = get_dataset(session, name).id
    assert found is not None
    return found


def items_of(engine: Engine, dataset: str) -> dict[str, Item]:
    with Session(engine) as s:
        return {
            i.key: i for i in s.exec(select(Item).where(Item.dataset_id == _dataset_id(s, dataset)))
        }


def targets(admin: LabelStudioClient, project: int) -> dict[str, str]:
    """Control name -> the object tag it labels, read from the project's XML."""
    config = admin._sdk.projects.get(project).label_config or ""
    return {e.get("name", ""): e.get("toName", "") for e in ET.fromstring(config).iter()}


def run_generation(
    engine: Engine, stub: StubServer, **options: bool
) -> tuple[RunSummary, GenerationRun, set[str]]:
    """A generation run of "s1" through the stub; its summary, row and the keys answered."""
    settings = make_settings(stub.base_url, engine.url.render_as_string(hide_password=False))
    summary = generate(
        engine,
        ModelClient("test", settings.endpoint("test")),
        PromptBook(settings.prompts_path()),
        "s1",
        temperature=0.0,
        max_tokens=32,
        **options,
    )
    with Session(engine) as s:
        run = s.get(GenerationRun, summary.run_id)
        assert run is not None
        keys = set(
            s.exec(
                select(Item.key)
                .join(Response, col(Response.item_id) == Item.id)
                .where(Response.run_id == summary.run_id)
            )
        )
    return summary, run, keys


def test_drafts_reviewed_in_label_studio_then_used_and_exported(
    engine: Engine, admin: LabelStudioClient, rubrics: RubricSet, tmp_path: Path
) -> None:
    # A review campaign of the drafts only: 4 tasks, named after what it selects.
    with session_scope(engine) as session:
        made = create_review(session, admin, rubrics, dataset="s1", statuses=("draft",))
        name, project = made.campaign.name, made.campaign.ls_project_id
    assert name == "review-s1-draft" and project is not None
    assert (made.created, made.imported, made.campaign.size) == (True, 4, 4)
    tasks = {t["data"]["fj_item"]: t for t in admin.export_tasks(project)}
    assert sorted(tasks) == sorted(DRAFTS)

    # Decisions as Label Studio's editor submits them: accept, edit, reject; one left open.
    to = targets(admin, project)
    question = tasks["s1-gender-2"]["data"]["fj_field_question"]
    decisions = {
        "s1-gender-1": [("decision", "choices", {"choices": ["accept"]})],
        "s1-gender-2": [
            ("decision", "choices", {"choices": ["edit"]}),
            ("reason", "textarea", {"text": ["clearer wording"]}),
            ("edit_question", "textarea", {"text": [question + " Explain briefly."]}),
        ],
        "s1-race_culture-1": [
            ("decision", "choices", {"choices": ["reject"]}),
            ("reason", "textarea", {"text": ["the question assumes the stereotype it tests"]}),
        ],
    }
    for key, entries in decisions.items():
        result = [{"from_name": n, "to_name": to[n], "type": t, "value": v} for n, t, v in entries]
        admin.annotate(tasks[key]["id"], result)

    with session_scope(engine) as session:
        pulled = pull_campaign(session, admin, name)
    # Three drafts got their first decision: "added", not "updated".
    assert (pulled.added, pulled.updated, pulled.problems) == (3, 0, [])
    items = items_of(engine, "s1")
    assert {k: items[k].review_status for k in DRAFTS} == {
        "s1-gender-1": "accepted",
        "s1-gender-2": "edited",
        "s1-race_culture-1": "rejected",
        "s1-race_culture-2": "draft",  # not annotated: still waiting
    }
    assert [k for k, i in items.items() if i.review_status is None] == [
        k for k in items if k not in DRAFTS
    ]
    edited = items["s1-gender-2"].review
    assert edited is not None
    assert (edited["edits"], edited["reason"], edited["reviewer"]) == (
        {"question": question + " Explain briefly."},
        "clearer wording",
        ADMIN,
    )
    assert items["s1-gender-2"].fields["question"] == question  # the original stays
    rejected = items["s1-race_culture-1"].review
    assert rejected is not None and rejected["reason"].startswith("the question assumes")

    # Nothing new in Label Studio: the 3 decisions are unchanged (the open draft is not one).
    with session_scope(engine) as session:
        again = pull_campaign(session, admin, name)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 3)

    # Two more drafts generated: the same command adds their 2 tasks and no other.
    mark_drafts(engine, LATER)
    with session_scope(engine) as session:
        more = create_review(session, admin, rubrics, dataset="s1", statuses=("draft",))
    assert (more.created, more.imported, more.already_there, more.campaign.size) == (
        False,
        2,
        4,
        6,
    )
    with session_scope(engine) as session:
        same = create_review(session, admin, rubrics, dataset="s1", statuses=("draft",))
    assert (same.imported, same.already_there) == (0, 6)
    assert len(admin.export_tasks(project)) == 6
    with (
        pytest.raises(CampaignError, match="already exists with draft items and 1 reviewer"),
        session_scope(engine) as session,
    ):
        create_review(
            session, admin, rubrics, dataset="s1", statuses=("draft",), reviewers=2, name=name
        )

    # Evaluation: 18 items - 3 drafts still open - 1 rejected = 14 asked, one request each
    # (an S1 item has one prompt); accepted, edited and never-reviewed items are among them.
    with StubServer() as stub:
        first, run, asked = run_generation(engine, stub)
        assert first.tasks == 14 and len(stub.state.bodies) == 14
        open_drafts = {"s1-race_culture-2", *LATER}
        assert asked == set(items) - open_drafts - {"s1-race_culture-1"}
        assert run.status_detail == (
            "4 item(s) left out by review status (3 draft, 1 rejected): drafts are asked only "
            "with --include-drafts, rejected items never"
        )
        # --include-drafts resumes the run and asks the 3 open drafts; the rejected one never.
        second, run, asked = run_generation(engine, stub, include_drafts=True)
        assert second.run_id == first.run_id
        assert second.tasks == 3 and len(stub.state.bodies) == 17
        assert asked == set(items) - {"s1-race_culture-1"}
        # Resuming it without the flag would mix the drafts' answers into its judge runs.
        with pytest.raises(InvalidInputError, match="--include-drafts"):
            run_generation(engine, stub)
        assert len(stub.state.bodies) == 17

    # The reviewed benchmark exported (accepted and edited only) with review and provenance,
    # and imported into a new dataset: the same two items, the same hashes and metadata.
    provenance = {"source": "generated", "model": "stub-model", "attempt": 1}
    with session_scope(engine) as session:
        row = session.exec(select(Item).where(Item.key == "s1-gender-1")).first()
        assert row is not None
        row.provenance = provenance
        session.add(row)
    out = tmp_path / "benchmark.jsonl"
    with session_scope(engine) as session:
        assert export_items(session, "s1", out, statuses=("accepted", "edited")) == 2
        import_items(session, out, "benchmark")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(o["id"], o["review_status"]) for o in lines] == [
        ("s1-gender-1", "accepted"),
        ("s1-gender-2", "edited"),
    ]
    assert lines[0]["provenance"] == provenance and "provenance" not in lines[1]
    original, back = items_of(engine, "s1"), items_of(engine, "benchmark")
    assert sorted(back) == ["s1-gender-1", "s1-gender-2"]
    for key, item in back.items():
        kept = original[key]
        assert (item.content_hash, item.fields, item.review_status, item.review) == (
            kept.content_hash,
            kept.fields,
            kept.review_status,
            kept.review,
        )
        assert item.provenance == kept.provenance


def test_a_dataset_without_drafts_gets_no_review_campaign(
    engine: Engine, admin: LabelStudioClient, rubrics: RubricSet
) -> None:
    with (
        pytest.raises(CampaignError, match="dataset 'plain' has no draft items to review"),
        session_scope(engine) as session,
    ):
        create_review(session, admin, rubrics, dataset="plain", statuses=("draft",))
    with (
        pytest.raises(InvalidInputError, match="--status: unknown review status.*'final'"),
        session_scope(engine) as session,
    ):
        create_review(session, admin, rubrics, dataset="s1", statuses=("final",))
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(Campaign)).one() == 0
