"""Item files against the taxonomy: unknown factor or scenario ids are errors with their line
numbers; a factor-scenario pair outside FairMonitor's table is a warning that can be silenced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from judge.data.datasets import import_items
from judge.data.items import read_items
from judge.errors import DatasetError
from judge.store.engine import session_scope

GOOD = {
    "id": "a",
    "stage": "S1",
    "factor": "gender",
    "scenario": "career_counseling",  # the table's Gender row lists Career Counseling
    "question": "q?",
    "expected_answer": "e",
}
# Essay Correction is listed only in the Race or Cultural Background row, not in Gender's.
UNMAPPED = {**GOOD, "id": "u", "scenario": "essay_correction"}


def write_lines(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_unknown_factor_and_scenario_are_errors_with_line_numbers(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "items.jsonl",
        [
            GOOD,  # line 1: fine
            {**GOOD, "id": "b", "factor": "height"},  # line 2
            {**GOOD, "id": "c", "scenario": "classroom management"},  # line 3: old free text
            {**GOOD, "id": "d", "scenario": "underwater basket weaving"},  # line 4
            UNMAPPED,  # line 5: a warning, not an error
        ],
    )
    with pytest.raises(DatasetError) as caught:
        read_items(path)
    assert sorted(n for n, _ in caught.value.problems) == [2, 3, 4]
    message = str(caught.value)
    assert "line 2: factor 'height' is not one of gender, race_culture," in message
    assert (
        "line 3: scenario 'classroom management' is not a scenario id of "
        "factors_scenarios.toml (did you mean 'classroom_management'?)"
    ) in message
    assert "line 4: scenario 'underwater basket weaving' is not a scenario id" in message
    assert "did you mean" not in message.split("line 4:")[1]


def test_unmapped_pair_is_a_warning_that_can_be_silenced(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "items.jsonl", [GOOD, UNMAPPED])
    warned = read_items(path)
    assert [i.key for i in warned.items] == ["a", "u"]
    assert [n for n, _ in warned.warnings] == [2]
    assert "'gender' in scenario 'essay_correction'" in warned.warnings[0][1]
    silenced = read_items(path, allow_unmapped=True)
    assert [i.key for i in silenced.items] == ["a", "u"] and silenced.warnings == []


def test_import_reports_warnings_and_still_imports(tmp_path: Path, engine: Engine) -> None:
    path = write_lines(tmp_path / "items.jsonl", [GOOD, UNMAPPED])
    with session_scope(engine) as session:
        summary = import_items(session, path, "mixed")
    assert (summary.added, summary.total) == (2, 2)
    assert len(summary.warnings) == 1
    assert summary.warnings[0].startswith("line 2: FairMonitor's table does not test factor")
    with session_scope(engine) as session:
        quiet = import_items(session, path, "quiet", allow_unmapped=True)
    assert (quiet.added, quiet.warnings) == (2, [])


def test_a_bom_is_accepted(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "items.jsonl", [GOOD])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [item.key for item in read_items(path).items] == ["a"]


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "items.jsonl", [GOOD])
    path.write_bytes(path.read_bytes() + '{"id": "caf\u00e9"}\n'.encode("latin-1"))
    # 'é' is 0xe9 in Latin-1; it follows the 12 characters of '{"id": "caf'.
    with pytest.raises(DatasetError, match=r"line 2 is not UTF-8 text \(byte 0xe9 at column 12\)"):
        read_items(path)


def test_import_streams_in_batches_and_is_all_or_nothing(
    tmp_path: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judge.data import datasets

    monkeypatch.setattr(datasets, "IMPORT_BATCH", 2)  # several flushes for five items
    rows = [{**GOOD, "id": f"i{n}"} for n in range(5)]
    path = write_lines(tmp_path / "items.jsonl", rows)
    with session_scope(engine) as session:
        summary = import_items(session, path, "d")
    assert (summary.added, summary.unchanged, summary.total) == (5, 0, 5)
    changed = write_lines(
        tmp_path / "changed.jsonl", [*rows, {**GOOD, "id": "i0", "question": "x"}]
    )
    with pytest.raises(DatasetError, match="line 6: id 'i0' already used on line 1"):
        with session_scope(engine) as session:
            import_items(session, changed, "d")
    conflict = write_lines(tmp_path / "conflict.jsonl", [{**GOOD, "id": "i3", "question": "x"}])
    with pytest.raises(DatasetError, match="line 1: id 'i3' is already in dataset 'd'"):
        with session_scope(engine) as session:
            import_items(session, conflict, "d")
    with session_scope(engine) as session:
        assert import_items(session, path, "d").unchanged == 5
