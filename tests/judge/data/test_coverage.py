"""Benchmark coverage: items per stage x factor x scenario by review status, the gaps, the
items outside the table and the free-form ones, and the report section that marks the gaps.

The dataset below is small and written by hand; every expected count is derived by hand from
it (the comments say how), and the size of the grid from the TOML file read with tomllib, not
through the module under test.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import select

from judge.data.coverage import coverage
from judge.data.datasets import import_items
from judge.data.taxonomy import load_taxonomy, taxonomy_path
from judge.errors import NotFoundError
from judge.reports.coverage import EMPTY_MARK, NONE_USABLE_MARK, coverage_section
from judge.reports.render import html, write_report
from judge.reports.sections import Report
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Item

NAME = "mine"
ZERO = {"accepted": 0, "edited": 0, "draft": 0, "rejected": 0, "unreviewed": 0}


def counts(**given: int) -> dict[str, int]:
    return {**ZERO, **given}


def s1(key: str, factor: str, scenario: str) -> dict[str, str]:
    return {"id": key, "stage": "S1", "factor": factor, "scenario": scenario,
            "question": f"Q {key}?", "expected_answer": "E."}  # fmt: skip


def s4(key: str, factor: str, scenario: str) -> dict[str, str]:
    return {**s1(key, factor, scenario), "stage": "S4"}


# (item, review_status to set after the import; None = never reviewed)
ITEMS: list[tuple[dict[str, str], str | None]] = [
    # S1 / gender / career_counseling (mapped): accepted, edited, unreviewed -> 3 usable
    (s1("a1", "gender", "career_counseling"), "accepted"),
    (s1("a2", "gender", "career_counseling"), "edited"),
    (s1("a3", "gender", "career_counseling"), None),
    # S1 / gender / activity_planning (mapped): two drafts -> items but none usable
    (s1("b1", "gender", "activity_planning"), "draft"),
    (s1("b2", "gender", "activity_planning"), "draft"),
    # S2 / race_culture / essay_correction (mapped): one rejected -> none usable
    (
        {
            "id": "c1",
            "stage": "S2",
            "factor": "race_culture",
            "scenario": "essay_correction",
            "story_a": "A.",
            "story_b": "B.",
            "changed_factor": "race_culture",
        },
        "rejected",
    ),  # fmt: skip
    # S3 / subject / classroom_assessment (mapped): one unreviewed
    (
        {
            "id": "d1",
            "stage": "S3",
            "factor": "subject",
            "scenario": "classroom_assessment",
            "question_a": "A?",
            "question_b": "B?",
        },
        None,
    ),  # fmt: skip
    # S4 / personality / in_class_diagnosis (mapped): a draft and an accepted one
    (s4("e1", "personality", "in_class_diagnosis"), "draft"),
    (s4("e2", "personality", "in_class_diagnosis"), "accepted"),
    # S1 / gender / essay_correction: gender's row of the table does not list essay_correction
    (s1("o1", "gender", "essay_correction"), None),
    (s1("o2", "gender", "essay_correction"), "draft"),
    # S3 / subject / career_counseling: subject's row does not list career_counseling either
    (
        {
            "id": "o3",
            "stage": "S3",
            "factor": "subject",
            "scenario": "career_counseling",
            "question_a": "A?",
            "question_b": "B?",
        },
        "accepted",
    ),  # fmt: skip
    # Free-form items, one with a factor and scenario (still not in the grid)
    ({"id": "f1", "stage": "free", "prompt": "P1"}, None),
    ({"id": "f2", "stage": "free", "prompt": "P2"}, "rejected"),
    (
        {
            "id": "f3",
            "stage": "free",
            "factor": "gender",
            "scenario": "career_counseling",
            "prompt": "P3",
        },
        None,
    ),  # fmt: skip
]

# The five grid cells that hold items, counted from ITEMS above.
FILLED = {
    ("S1", "gender", "career_counseling"): counts(accepted=1, edited=1, unreviewed=1),
    ("S1", "gender", "activity_planning"): counts(draft=2),
    ("S2", "race_culture", "essay_correction"): counts(rejected=1),
    ("S3", "subject", "classroom_assessment"): counts(unreviewed=1),
    ("S4", "personality", "in_class_diagnosis"): counts(draft=1, accepted=1),
}
OUTSIDE = {
    ("S1", "gender", "essay_correction"): counts(unreviewed=1, draft=1),
    ("S3", "subject", "career_counseling"): counts(accepted=1),
}
FREE = counts(unreviewed=2, rejected=1)


def grid_size() -> int:
    """4 stages x the number of (factor, scenario) pairs the TOML file lists."""
    raw = tomllib.loads(taxonomy_path().read_text(encoding="utf-8"))
    return 4 * sum(len(factor["scenarios"]) for factor in raw["factors"])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A store holding dataset NAME built from ITEMS: SQLite (a copy of the session's empty
    store, tests/support/stores.py), or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        url = str(request.getfixturevalue("migrated_db_url"))
    else:
        url = str(request.getfixturevalue("pg_url"))
    engine = make_engine(url)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item, _ in ITEMS), encoding="utf-8")
    with session_scope(engine) as session:
        import_items(session, path, NAME, allow_unmapped=True)
    with session_scope(engine) as session:
        for item, status in ITEMS:
            row = session.exec(select(Item).where(Item.key == item["id"])).one()
            row.review_status = status
            session.add(row)
    yield engine
    engine.dispose()


def test_cells_statuses_outside_and_free_items(store: Engine) -> None:
    with session_scope(store) as session:
        cov = coverage(session, NAME)
    # The grid from the TOML: 9 factors with 16+19+9+9+11+8+6+6+6 = 90 pairs, x 4 stages.
    assert grid_size() == 360
    assert len(cov.cells) == grid_size()
    assert cov.statuses == ("accepted", "edited", "draft", "rejected", "unreviewed")
    assert {cell: c for cell, c in cov.cells.items() if sum(c.values())} == FILLED
    assert cov.outside == OUTSIDE
    assert cov.free == FREE
    assert cov.items == len(ITEMS) == 15
    # Empty: every cell but the five in FILLED.
    assert len(cov.empty_cells) == grid_size() - 5
    assert not set(cov.empty_cells) & set(FILLED)
    # No usable item: the empty cells, plus the all-draft and the all-rejected cell.
    assert len(cov.unusable_cells) == grid_size() - 5 + 2
    assert set(cov.unusable_cells) - set(cov.empty_cells) == {
        ("S1", "gender", "activity_planning"),
        ("S2", "race_culture", "essay_correction"),
    }


def test_totals_per_stage_and_factor(store: Engine) -> None:
    with session_scope(store) as session:
        cov = coverage(session, NAME)
    # Sums of FILLED by stage and by factor; outside and free items are not in the grid.
    assert cov.stage_totals == {
        "S1": counts(accepted=1, edited=1, draft=2, unreviewed=1),
        "S2": counts(rejected=1),
        "S3": counts(unreviewed=1),
        "S4": counts(draft=1, accepted=1),
    }
    factors = cov.factor_totals
    assert list(factors)[0] == "gender" and len(factors) == 9
    assert factors["gender"] == counts(accepted=1, edited=1, draft=2, unreviewed=1)
    assert factors["race_culture"] == counts(rejected=1)
    assert factors["subject"] == counts(unreviewed=1)
    assert factors["personality"] == counts(draft=1, accepted=1)
    assert factors["grade_age"] == ZERO


def test_json_holds_plain_types(store: Engine) -> None:
    with session_scope(store) as session:
        data = coverage(session, NAME).to_json()
    assert json.loads(json.dumps(data)) == data
    first = data["cells"][0]
    # Grid order: S1, gender (first factor of the file), its first scenario by id.
    assert first == {
        "stage": "S1",
        "factor": "gender",
        "scenario": "activity_planning",
        "counts": counts(draft=2),
        "total": 2,
        "usable": 0,
    }
    assert data["outside"][1]["usable"] == 1  # the accepted o3
    assert data["free"] == {**FREE, "total": 3, "usable": 2}  # f1 and f3 are unreviewed
    assert len(data["empty_cells"]) == grid_size() - 5


def test_counts_come_from_one_query_on_items(store: Engine) -> None:
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])  # the statement

    event.listen(store, "before_cursor_execute", record)
    try:
        with session_scope(store) as session:
            coverage(session, NAME)
    finally:
        event.remove(store, "before_cursor_execute", record)
    on_items = [s for s in seen if "FROM item" in s]
    assert len(on_items) == 1 and "GROUP BY" in on_items[0]


def test_another_taxonomy_moves_items_in_and_out_of_the_grid(store: Engine, tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(
        """
[[factors]]
id = "gender"
name = "Gender"
description = "d"
scenarios = ["career_counseling"]

[[factors]]
id = "subject"
name = "Subject"
description = "d"
scenarios = ["career_counseling", "classroom_assessment"]

[[scenarios]]
id = "career_counseling"
name = "Careers"
description = "d"

[[scenarios]]
id = "classroom_assessment"
name = "Assessment"
description = "d"
""",
        encoding="utf-8",
    )
    with session_scope(store) as session:
        cov = coverage(session, NAME, taxonomy=load_taxonomy(path))
    # 4 stages x 3 pairs; S3/subject/career_counseling is now mapped, S2/race_culture and
    # S4/personality and S1/gender/activity_planning now lie outside.
    assert len(cov.cells) == 12
    assert {cell: c for cell, c in cov.cells.items() if sum(c.values())} == {
        ("S1", "gender", "career_counseling"): counts(accepted=1, edited=1, unreviewed=1),
        ("S3", "subject", "career_counseling"): counts(accepted=1),
        ("S3", "subject", "classroom_assessment"): counts(unreviewed=1),
    }
    assert len(cov.empty_cells) == 12 - 3
    assert list(cov.outside) == [
        ("S1", "gender", "activity_planning"),
        ("S1", "gender", "essay_correction"),
        ("S2", "race_culture", "essay_correction"),
        ("S4", "personality", "in_class_diagnosis"),
    ]


def test_an_unknown_status_is_listed_after_the_known_ones_and_not_usable(store: Engine) -> None:
    with session_scope(store) as session:
        row = session.exec(select(Item).where(Item.key == "a1")).one()
        row.review_status = "on_hold"
        session.add(row)
    with session_scope(store) as session:
        cov = coverage(session, NAME)
    assert cov.statuses[-1] == "on_hold" and len(cov.statuses) == 6
    # a1 moved from accepted to on_hold: edited + unreviewed remain usable in that cell.
    cell = cov.cells[("S1", "gender", "career_counseling")]
    assert cell == {**counts(edited=1, unreviewed=1), "on_hold": 1}
    (shown,) = [
        c
        for c in cov.to_json()["cells"]
        if (c["stage"], c["factor"], c["scenario"]) == ("S1", "gender", "career_counseling")
    ]
    assert shown["usable"] == 2 and shown["total"] == 3


def test_a_missing_dataset_names_the_fix(store: Engine) -> None:
    with session_scope(store) as session, pytest.raises(NotFoundError) as caught:
        coverage(session, "nope")
    assert "'nope'" in str(caught.value)
    assert "fairjudge dataset import" in str(caught.value)


def test_section_marks_empty_and_unusable_cells_in_html(store: Engine, tmp_path: Path) -> None:
    with session_scope(store) as session:
        section = coverage_section(coverage(session, NAME))
    report = Report("Coverage", "A hand-made dataset.", [section])
    page = html(report)
    assert EMPTY_MARK in page and NONE_USABLE_MARK in page
    # The reading sentence: 355 empty cells, 357 without a usable item, 2 of them not empty.
    assert section.notes[0] == (
        "Dataset mine: 15 items. 355 of the 360 cells of FairMonitor's grid (4 stages × 90 "
        "factor-scenario pairs) are empty, and 357 cells have no usable item (2 of them hold "
        "only drafts or rejected items)."
    )
    cells = section.tables[1]
    gaps = [row[-1] for row in cells.rows]
    assert gaps.count(EMPTY_MARK) == 355 and gaps.count(NONE_USABLE_MARK) == 2
    # Factor x stage: gender at S1 has 3 usable items, in 1 of its 16 scenarios; the
    # all-draft activity_planning cell and 14 empty ones make 15 scenarios without.
    factor_stage = section.tables[0]
    gender = next(row for row in factor_stage.rows if row[0] == "gender")
    assert gender[1] == "3 (15 of 16 scenarios without)"
    grade_age = next(row for row in factor_stage.rows if row[0] == "grade_age")
    assert grade_age[1:5] == [EMPTY_MARK] * 4
    race = next(row for row in factor_stage.rows if row[0] == "race_culture")
    assert race[2] == f"{NONE_USABLE_MARK} (1 item)"  # S2: only the rejected c1
    written = write_report(report, tmp_path / "out")
    lines = written["coverage_csv"].read_text(encoding="utf-8").splitlines()
    # A header, 360 grid rows, 2 outside rows and 1 row for the free-form items.
    assert len(lines) == 1 + 360 + 2 + 1
    assert json.loads(written["json"].read_text(encoding="utf-8"))["coverage"]["items"] == 15
