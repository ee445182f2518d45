"""Exporting a judge run: one row per judgment and per answer, in CSV and JSON Lines, that read
back exactly (newlines, commas and quotes included) and match the stored rows."""

from __future__ import annotations

import csv
import json
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge import paths
from judge.data.datasets import import_items
from judge.errors import ConfigError, NotFoundError
from judge.exports import export_judge_run
from judge.grading.rubrics import load_rubrics
from judge.hashing import messages_hash
from judge.prompts import PromptBook
from judge.store.engine import session_scope
from judge.store.tables import Item, Judgment
from server import usecases
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer, grade_for

# A raw judge reply no CSV writer could get right by joining strings: a newline, a CRLF, a
# comma, quotes (doubled in CSV), a trailing quote and a non-ASCII character.
TRICKY = 'first line\nsecond, "quoted" part\r\nthird line ends with a quote"; café'

# The judgments columns holding each answer part's text (docs of judge.exports).
COLUMN_OF_PART = {"answer": "answer", "A": "answer_A", "B": "answer_B"}

# The files' columns, in order, written out by hand from what docs/judging.md ("Exporting a
# run") and the docstring of judge.exports promise: the row's id and runs, the item, the
# judgment (or answer) with its provenance, then each answer part's text and flag. They are
# the files' format: a column added, moved or renamed must be changed here as well.
ITEM_COLUMNS = ["item_key", "stage", "factor", "scenario"]
JUDGMENT_COLUMNS = [
    *("judgment_id", "judge_run", "generation_run", *ITEM_COLUMNS, "rubric", "judge_standing"),
    "sample_index",
    *("position", "repeat", "status", "score", "unscored_kind", "reason", "explanation"),
    *("raw_output", "repair_output", "template_version", "prompt_hash", "rubric_version"),
    *("rubric_hash", "model", "params", "prompt_tokens", "cached_prompt_tokens"),
    *("completion_tokens", "latency_s", "calls", "cache_key", "created_at"),
    *("answer", "answer_flag", "answer_A", "answer_A_flag", "answer_B", "answer_B_flag"),
]
# The run's standing per rubric, as server.usecases.exports gives it from the qualification
# records; ETCS left out, to see the column say "not validated" for a rubric it lacks.
STANDING = {"ICS": "validated", "TCS": "stale", "PCS": "failed validation"}
ANSWER_COLUMNS = [
    *("response_id", "generation_run", *ITEM_COLUMNS, "part", "prompt", "answer", "flag"),
    *("error", "finish_reason", "prompt_tokens", "cached_prompt_tokens", "completion_tokens"),
    *("latency_s", "cache_key", "created_at"),
]


def small_dataset(path: Path) -> Path:
    """The sample's first four S1 and first two S2 items; one S1 question carries the stub's
    marker that makes the judge answer in prose, so its judgment ends unscored."""
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line]
    s1 = [r for r in rows if r["stage"] == "S1"][:4]
    s2 = [r for r in rows if r["stage"] == "S2"][:2]
    s1[3]["question"] += " #fault:prose_always"
    path.write_text("".join(json.dumps(r) + "\n" for r in s1 + s2), encoding="utf-8")
    return path


@pytest.fixture
def judged(tmp_path: Path, engine: Engine, db_url: str, stub: StubServer) -> int:
    settings = make_settings(stub.base_url, db_url)
    with session_scope(engine) as session:
        import_items(session, small_dataset(tmp_path / "small.jsonl"), "small")
    gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset="small"))
    run = usecases.judge(
        engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id)
    ).run_id
    with session_scope(engine) as session:
        first = session.exec(select(Judgment).order_by(col(Judgment.id))).first()
        assert first is not None
        first.raw_output = TRICKY
        first.explanation = 'two\nlines, with "quotes"'
    return run


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def as_csv(value: Any) -> str:
    """How a stored value is written to a CSV cell (documented in judge.exports)."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def store_rows(db_url: str, table: str) -> dict[int, dict[str, Any]]:
    """The raw rows of ``table`` by id, read with the standard library's sqlite3 (not the
    store's own models): the values the export must carry over."""
    with closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as conn:
        conn.row_factory = sqlite3.Row
        return {row["id"]: dict(row) for row in conn.execute(f'SELECT * FROM "{table}"')}


def utc_iso(stored: str) -> str:
    """A stored timestamp (naive UTC text, as SQLite holds it) as ISO 8601 with its offset."""
    return datetime.fromisoformat(stored).replace(tzinfo=UTC).isoformat()


def test_judgments_and_answers_match_the_stored_rows(
    tmp_path: Path, db_url: str, judged: int, engine: Engine
) -> None:
    with Session(engine) as session:
        result = export_judge_run(session, judged, tmp_path / "out", standing=STANDING)
    folder = tmp_path / "out"
    assert sorted(result.files) == [
        "answers.csv",
        "answers.jsonl",
        "judgments.csv",
        "judgments.jsonl",
    ]
    judgments_csv = read_csv(folder / "judgments.csv")
    judgments_jsonl = read_jsonl(folder / "judgments.jsonl")
    answers_csv = read_csv(folder / "answers.csv")
    answers_jsonl = read_jsonl(folder / "answers.jsonl")
    judgments = store_rows(db_url, "judgment")
    responses = store_rows(db_url, "response")
    items = store_rows(db_url, "item")
    # By hand from small_dataset: 4 S1 items x ICS + 2 S2 items x (TCS, PCS, ETCS) = 10
    # judgments; 4 S1 answers + 2 S2 items x (A, B) = 8 answers.
    assert (len(judgments), len(responses)) == (10, 8)
    assert result.judgments == len(judgments_csv) == len(judgments_jsonl) == 10
    assert result.answers == len(answers_csv) == len(answers_jsonl) == 8
    # A second reader (pandas) agrees on the row count despite the embedded newlines.
    assert len(pd.read_csv(folder / "judgments.csv")) == 10
    # The item columns come from the dataset file itself, read with json.
    written = {
        row["id"]: row
        for row in read_jsonl(tmp_path / "small.jsonl")  # written by the `judged` fixture
    }
    by_part = {(r["item_id"], r["part"]): r for r in responses.values()}

    def item_columns(item_id: int) -> dict[str, Any]:
        key = items[item_id]["key"]
        row = written[key]
        return {"item_key": key, **{k: row[k] for k in ("stage", "factor", "scenario")}}

    # A fresh store: the first generation run and the first judge run (ids 1).
    assert judged == 1
    for from_csv, from_jsonl in zip(judgments_csv, judgments_jsonl, strict=True):
        assert list(from_csv) == list(from_jsonl) == JUDGMENT_COLUMNS
        j = judgments[from_jsonl["judgment_id"]]
        same = [
            *("rubric", "sample_index", "position", "status", "score", "unscored_kind"),
            *("reason", "explanation", "raw_output", "repair_output", "model"),
            *("template_version", "prompt_hash", "rubric_version", "rubric_hash", "calls"),
            *("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "latency_s"),
            "cache_key",
        ]
        expected: dict[str, Any] = {
            **{k: j[k] for k in same},
            **item_columns(j["item_id"]),
            "judgment_id": j["id"],
            "judge_run": 1,
            "generation_run": 1,
            # One order only (no --swap-order): the repeat is the sample index (docs of
            # judge.store.queries.sample_slot).
            "repeat": j["sample_index"],
            "judge_standing": STANDING.get(j["rubric"], "not validated"),
            "params": json.loads(j["params"]),  # a JSON object, stored as JSON text
            "created_at": utc_iso(j["created_at"]),
        }
        for part, column in COLUMN_OF_PART.items():
            r = by_part.get((j["item_id"], part))
            expected[column] = r["raw_text"] if r else None
            expected[f"{column}_flag"] = r["flag"] if r else None  # the stub injects nothing
        assert set(expected) == set(JUDGMENT_COLUMNS)  # every column checked
        for key, value in expected.items():
            assert from_jsonl[key] == value, key
            assert from_csv[key] == as_csv(value), key

    for from_csv, from_jsonl in zip(answers_csv, answers_jsonl, strict=True):
        assert list(from_csv) == list(from_jsonl) == ANSWER_COLUMNS
        r = responses[from_jsonl["response_id"]]
        same = [
            *("part", "prompt", "flag", "error", "finish_reason", "prompt_tokens"),
            *("cached_prompt_tokens", "completion_tokens", "latency_s", "cache_key"),
        ]
        expected = {
            **{k: r[k] for k in same},
            **item_columns(r["item_id"]),
            "response_id": r["id"],
            "generation_run": 1,
            "answer": r["raw_text"],
            "created_at": utc_iso(r["created_at"]),
        }
        assert set(expected) == set(ANSWER_COLUMNS)
        for key, value in expected.items():
            assert from_jsonl[key] == value, key
            assert from_csv[key] == as_csv(value), key


def test_text_with_newlines_commas_and_quotes_round_trips(
    tmp_path: Path, engine: Engine, judged: int
) -> None:
    with Session(engine) as session:
        export_judge_run(session, judged, tmp_path, standing=STANDING)
        tricky_id = session.exec(select(Judgment.id).where(Judgment.raw_output == TRICKY)).one()
    rows_csv = read_csv(tmp_path / "judgments.csv")
    (from_csv,) = [r for r in rows_csv if r["judgment_id"] == str(tricky_id)]
    (from_jsonl,) = [
        r for r in read_jsonl(tmp_path / "judgments.jsonl") if r["judgment_id"] == tricky_id
    ]
    assert from_csv["raw_output"] == from_jsonl["raw_output"] == TRICKY
    assert from_csv["explanation"] == from_jsonl["explanation"] == 'two\nlines, with "quotes"'
    # JSON Lines: one physical line per row, whatever the text holds.
    lines = (tmp_path / "judgments.jsonl").read_text(encoding="utf-8").split("\n")
    assert len(lines) == len(rows_csv) + 1  # the last is ""


def test_scores_are_the_stub_grades_of_the_re_rendered_prompts(
    tmp_path: Path, engine: Engine, judged: int
) -> None:
    # The stub scores a judge prompt 1 + sha256(messages)[0] % 5: re-render every exported
    # judgment's prompt from its item and answers and check the exported score against it.
    book = PromptBook(paths.prompts_dir())
    rubrics = load_rubrics(paths.prompts_dir())
    with Session(engine) as session:
        export_judge_run(session, judged, tmp_path, standing=STANDING, formats="jsonl")
        items = {i.key: i for i in session.exec(select(Item))}
    assert not (tmp_path / "judgments.csv").exists()
    rows = read_jsonl(tmp_path / "judgments.jsonl")
    scored = [r for r in rows if r["status"] == "scored"]
    unscored = [r for r in rows if r["status"] == "unscored"]
    assert len(scored) == 9 and len(unscored) == 1
    for row in scored:
        answers = {p: row[c] for p, c in COLUMN_OF_PART.items() if row[c] is not None}
        rubric = rubrics[row["rubric"]]
        texts = rubric.render_texts(items[row["item_key"]].fields, answers)
        prompt = book.judge_prompt(rubric, texts, variant=row["params"]["prompt_variant"])
        assert row["prompt_hash"] == messages_hash(prompt.messages)
        assert row["score"] == grade_for(prompt.messages)
    # The prose reply: no score, its kind and reason, both raw replies kept.
    (prose,) = unscored
    assert prose["score"] is None and prose["unscored_kind"] == "unparsable"
    assert prose["raw_output"] and prose["repair_output"] and prose["reason"]


def test_bad_format_and_missing_run(tmp_path: Path, engine: Engine, judged: int) -> None:
    with Session(engine) as session:
        with pytest.raises(ConfigError, match="format 'xlsx' is not one of csv, jsonl"):
            export_judge_run(
                session, judged, tmp_path / "out", standing=STANDING, formats="csv,xlsx"
            )
        with pytest.raises(NotFoundError, match="no judge run 99"):
            export_judge_run(session, 99, tmp_path / "out", standing=STANDING)
    assert not (tmp_path / "out").exists()  # nothing written
