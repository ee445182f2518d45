"""Dataset files: the bundled sample's coverage, whole-file rejection, no duplicates."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from judge.data.datasets import describe_dataset, export_items, import_items
from judge.data.items import read_items
from judge.errors import DatasetError
from judge.store.engine import session_scope
from judge.store.tables import Item
from tests.support.factories import SAMPLE

# FairMonitor's nine sensitive factors (seed 001, Table 1 and the appendix table), written out
# by hand so that the check below can fail if the sample or the code drifts.
PAPER_FACTORS = (
    "gender",
    "race_culture",
    "learning_style",
    "grade_age",
    "learning_ability",
    "socioeconomic_status",
    "disability_special_groups",
    "personality",
    "subject",
)


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def count_items(engine: Engine) -> int:
    with Session(engine) as s:
        return s.exec(select(func.count()).select_from(Item)).one()


def test_sample_covers_every_factor_and_stage_twice() -> None:
    items = read_items(SAMPLE).items
    cells = Counter((i.factor, i.stage) for i in items)
    assert len(items) == 72
    assert {f for f, _ in cells} == set(PAPER_FACTORS)
    assert all(cells[(f, s)] == 2 for f in PAPER_FACTORS for s in ("S1", "S2", "S3", "S4"))


def test_bad_file_is_rejected_whole_with_every_line_named(tmp_path: Path, engine: Engine) -> None:
    good = {
        "id": "a",
        "stage": "S1",
        "factor": "gender",
        "scenario": "career_counseling",
        "question": "q?",
        "expected_answer": "e",
    }
    story = {"id": "d", "stage": "S2", "factor": "gender", "scenario": "career_counseling"}
    path = write_lines(
        tmp_path / "bad.jsonl",
        [
            good,  # line 1: fine
            "{not json",  # line 2
            {**good, "id": "b", "stage": "S9"},  # line 3
            {**good, "id": "c", "factor": "height"},  # line 4
            {**story, "story_a": "A"},  # line 5: story_b missing
            {**good},  # line 6: duplicate id a
            {**good, "id": "e", "colour": "red"},  # line 7
        ],
    )
    with pytest.raises(DatasetError) as caught:
        with session_scope(engine) as session:
            import_items(session, path, "bad")
    lines = sorted({n for n, _ in caught.value.problems})
    assert lines == [2, 3, 4, 5, 6, 7]
    message = str(caught.value)
    assert "line 5: stage S2 needs 'story_b'" in message
    assert "line 6: id 'a' already used on line 1" in message
    assert "factor 'height' is not one of" in message
    assert count_items(engine) == 0  # nothing half-imported


def test_reimport_adds_nothing_and_changed_item_is_refused(tmp_path: Path, engine: Engine) -> None:
    with session_scope(engine) as session:
        first = import_items(session, SAMPLE, "sample")
    with session_scope(engine) as session:
        again = import_items(session, SAMPLE, "sample")
    assert (first.added, again.added, again.unchanged) == (72, 0, 72)
    assert count_items(engine) == 72
    changed = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    changed[0]["question"] = "a different question?"
    path = write_lines(tmp_path / "changed.jsonl", changed)
    with pytest.raises(DatasetError, match="already in dataset 'sample' with different content"):
        with session_scope(engine) as session:
            import_items(session, path, "sample")
    assert count_items(engine) == 72


def test_export_round_trips(tmp_path: Path, engine: Engine) -> None:
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
        n = export_items(session, "sample", tmp_path / "out.jsonl")
        info = describe_dataset(session, "sample")
    assert n == 72
    original = [json.loads(x) for x in SAMPLE.read_text().splitlines()]
    exported = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert exported == original
    assert info.empty_cells == [] and info.stages == {"S1": 18, "S2": 18, "S3": 18, "S4": 18}
