"""An item's review status, review and provenance in item files: written by ``export``, read
back by ``import``, refused when malformed, and never part of the item's content hash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.data.datasets import export_items, import_items
from judge.data.items import read_items
from judge.errors import DatasetError, InvalidInputError
from judge.store.engine import session_scope
from judge.store.tables import Dataset, Item
from tests.support.factories import SAMPLE

REVIEW = {
    "decision": "edit",
    "reason": "clearer wording",
    "edits": {"question": "A clearer question?"},
    "reviewer": "expert@example.org",
    "campaign": "review-a-draft",
}
# Set by hand on three sample items; the 69 others are never reviewed (None).
STATUSES = {"s1-gender-1": "accepted", "s1-gender-2": "edited", "s2-gender-1": "draft"}


def write_lines(path: Path, objects: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def snapshot(engine: Engine, dataset: str) -> dict[str, tuple[object, ...]]:
    """Everything an item is, by key, apart from its row and dataset ids."""
    with Session(engine) as s:
        rows = s.exec(
            select(Item)
            .join(Dataset, col(Dataset.id) == Item.dataset_id)
            .where(Dataset.name == dataset)
        ).all()
        return {
            i.key: (
                i.stage, i.factor, i.scenario, i.fields, i.content_hash, i.review_status, i.review,
                i.provenance,
            )
            for i in rows
        }  # fmt: skip


@pytest.fixture
def reviewed(engine: Engine) -> Engine:
    """The sample as dataset "a", with the statuses above and a review on the edited item."""
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "a")
        for item in session.exec(select(Item).where(col(Item.key).in_(STATUSES))):
            item.review_status = STATUSES[item.key]
            item.review = REVIEW if item.key == "s1-gender-2" else None
            session.add(item)
    return engine


def test_metadata_keys_are_read_but_stay_out_of_fields_and_hash(tmp_path: Path) -> None:
    plain = json.loads(SAMPLE.read_text().splitlines()[0])  # s1-gender-1
    marked = {**plain, "review_status": "edited", "review": REVIEW, "provenance": {"by": "x"}}
    (before,) = read_items(write_lines(tmp_path / "plain.jsonl", [plain])).items
    (after,) = read_items(write_lines(tmp_path / "marked.jsonl", [marked])).items
    assert after.content_hash == before.content_hash
    assert (
        after.fields
        == before.fields
        == {k: v for k, v in plain.items() if k not in ("id", "stage", "factor", "scenario")}
    )
    assert (after.review_status, after.review, after.provenance) == (
        "edited",
        REVIEW,
        {"by": "x"},
    )
    # null is the same as leaving a key out.
    nulls = {**plain, "review_status": None, "review": None, "provenance": None}
    (empty,) = read_items(write_lines(tmp_path / "nulls.jsonl", [nulls])).items
    assert empty == before


def test_malformed_metadata_is_refused_with_its_line(tmp_path: Path) -> None:
    plain = json.loads(SAMPLE.read_text().splitlines()[0])
    lines = [
        {**plain, "id": "x1", "review_status": "maybe"},
        {**plain, "id": "x2", "review": "looks fine"},
        {**plain, "id": "x3", "provenance": ["model"]},
    ]
    with pytest.raises(DatasetError) as caught:
        read_items(write_lines(tmp_path / "bad.jsonl", lines))
    assert caught.value.problems == [
        (1, "review_status 'maybe' is not one of draft, accepted, edited, rejected (or null)"),
        (2, "'review' must be a JSON object when given"),
        (3, "'provenance' must be a JSON object when given"),
    ]


def test_export_then_import_into_a_new_dataset_gives_the_same_items(
    tmp_path: Path, reviewed: Engine
) -> None:
    out = tmp_path / "a.jsonl"
    with session_scope(reviewed) as session:
        assert export_items(session, "a", out) == 72
        summary = import_items(session, out, "b")
    assert (summary.added, summary.total) == (72, 72)
    assert snapshot(reviewed, "b") == snapshot(reviewed, "a")
    lines = {o["id"]: o for o in map(json.loads, out.read_text().splitlines())}
    assert lines["s1-gender-2"]["review_status"] == "edited"
    assert lines["s1-gender-2"]["review"] == REVIEW
    # An item never reviewed is written exactly as the sample file has it: no metadata keys.
    original = {o["id"]: o for o in map(json.loads, SAMPLE.read_text().splitlines())}
    assert lines["s1-gender-1"] == {**original["s1-gender-1"], "review_status": "accepted"}
    assert lines["s3-gender-1"] == original["s3-gender-1"]


def test_export_keeps_only_the_statuses_asked_for(tmp_path: Path, reviewed: Engine) -> None:
    out = tmp_path / "benchmark.jsonl"
    with session_scope(reviewed) as session:
        n = export_items(session, "a", out, statuses=("accepted", "edited"))
        assert export_items(session, "a", tmp_path / "u.jsonl", statuses=["unreviewed"]) == 69
        with pytest.raises(InvalidInputError, match="statuses: unknown review status.*'final'"):
            export_items(session, "a", tmp_path / "x.jsonl", statuses=("final",))
    keys = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert n == 2 and keys == ["s1-gender-1", "s1-gender-2"]


def test_importing_again_leaves_the_stored_review_alone(tmp_path: Path, reviewed: Engine) -> None:
    """The same item with another review status is the same item (same hash): unchanged,
    and the store keeps its own review."""
    plain = json.loads(SAMPLE.read_text().splitlines()[0])
    path = write_lines(tmp_path / "again.jsonl", [{**plain, "review_status": "rejected"}])
    with session_scope(reviewed) as session:
        summary = import_items(session, path, "a")
    assert (summary.added, summary.unchanged) == (0, 1)
    assert snapshot(reviewed, "a")["s1-gender-1"][5] == "accepted"


def test_provenance_travels_with_the_item(tmp_path: Path, reviewed: Engine) -> None:
    provenance = {"generator": "stub-model", "template": "items-v1", "seed_item": "s1-gender-1"}
    with session_scope(reviewed) as session:
        item = session.exec(select(Item).where(Item.key == "s2-gender-1")).first()
        assert item is not None
        item.provenance = provenance
        session.add(item)
    out = tmp_path / "a.jsonl"
    with session_scope(reviewed) as session:
        export_items(session, "a", out)
        import_items(session, out, "c")
    lines = {o["id"]: o for o in map(json.loads, out.read_text().splitlines())}
    assert lines["s2-gender-1"]["provenance"] == provenance
    assert lines["s2-gender-1"]["review_status"] == "draft"
    assert snapshot(reviewed, "c") == snapshot(reviewed, "a")
