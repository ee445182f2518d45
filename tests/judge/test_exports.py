"""Exporting a judge run: one row per judgment and per answer, in CSV and JSON Lines, that read
back exactly (newlines, commas and quotes included) and match the stored rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from judge import paths
from judge.data.datasets import import_items
from judge.errors import ConfigError, NotFoundError
from judge.exports import ANSWER_COLUMNS, JUDGMENT_COLUMNS, export_judge_run
from judge.grading.rubrics import load_rubrics
from judge.hashing import messages_hash
from judge.prompts import PromptBook
from judge.store.engine import session_scope
from judge.store.tables import Item, Judgment, Response
from server import usecases
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer, grade_for

# A raw judge reply no CSV writer could get right by joining strings: a newline, a CRLF, a
# comma, quotes (doubled in CSV), a trailing quote and a non-ASCII character.
TRICKY = 'first line\nsecond, "quoted" part\r\nthird line ends with a quote"; café'

# The judgments columns holding each answer part's text (docs of judge.exports).
COLUMN_OF_PART = {"answer": "answer", "A": "answer_A", "B": "answer_B"}


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
    gen = usecases.generate(engine, settings, "small")
    run = usecases.judge(engine, settings, gen.run_id).run_id
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


def test_judgments_and_answers_match_the_stored_rows(
    tmp_path: Path, engine: Engine, judged: int
) -> None:
    with Session(engine) as session:
        result = export_judge_run(session, judged, tmp_path / "out")
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
    with Session(engine) as s:
        n_judgments = s.exec(select(func.count()).where(Judgment.judge_run_id == judged)).one()
        n_answers = s.exec(select(func.count()).select_from(Response)).one()
        # 4 S1 items x ICS + 2 S2 items x (TCS, PCS, ETCS) = 10 judgments; 4 + 2 x 2 answers.
        assert (n_judgments, n_answers) == (10, 8)
        assert result.judgments == len(judgments_csv) == len(judgments_jsonl) == n_judgments
        assert result.answers == len(answers_csv) == len(answers_jsonl) == n_answers
        # A second reader (pandas) agrees on the row count despite the embedded newlines.
        assert len(pd.read_csv(folder / "judgments.csv")) == n_judgments

        by_id = {j.id: (j, s.get(Item, j.item_id)) for j in s.exec(select(Judgment))}
        responses = {(r.item_id, r.part): r for r in s.exec(select(Response))}
        for from_csv, from_jsonl in zip(judgments_csv, judgments_jsonl, strict=True):
            assert list(from_csv) == list(from_jsonl) == JUDGMENT_COLUMNS
            j, item = by_id[from_jsonl["judgment_id"]]
            assert item is not None
            expected: dict[str, Any] = {
                **{k: getattr(j, k) for k in ("rubric", "sample_index", "status", "score")},
                **{k: getattr(j, k) for k in ("unscored_kind", "reason", "explanation")},
                **{k: getattr(j, k) for k in ("raw_output", "repair_output", "model", "params")},
                **{k: getattr(j, k) for k in ("template_version", "prompt_hash", "calls")},
                **{k: getattr(j, k) for k in ("prompt_tokens", "completion_tokens", "latency_s")},
                "item_key": item.key,
                "stage": item.stage,
                "factor": item.factor,
                "scenario": item.scenario,
                "judge_run": judged,
            }
            for part, column in COLUMN_OF_PART.items():
                r = responses.get((j.item_id, part))
                expected[column] = r.raw_text if r else None
                expected[f"{column}_flag"] = r.flag if r else None
            for key, value in expected.items():
                assert from_jsonl[key] == value, key
                assert from_csv[key] == as_csv(value), key

        by_response = {r.id: r for r in responses.values()}
        for from_csv, from_jsonl in zip(answers_csv, answers_jsonl, strict=True):
            assert list(from_csv) == list(from_jsonl) == ANSWER_COLUMNS
            r = by_response[from_jsonl["response_id"]]
            fields = ("part", "prompt", "flag", "error", "finish_reason", "latency_s")
            expected = {k: getattr(r, k) for k in fields}
            expected["answer"] = r.raw_text
            for key, value in expected.items():
                assert from_jsonl[key] == value, key
                assert from_csv[key] == as_csv(value), key


def test_text_with_newlines_commas_and_quotes_round_trips(
    tmp_path: Path, engine: Engine, judged: int
) -> None:
    with Session(engine) as session:
        export_judge_run(session, judged, tmp_path)
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
        export_judge_run(session, judged, tmp_path, formats="jsonl")
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
            export_judge_run(session, judged, tmp_path / "out", formats="csv,xlsx")
        with pytest.raises(NotFoundError, match="no judge run 99"):
            export_judge_run(session, 99, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written
