"""Answers produced elsewhere: stored as the imported run of (dataset, model label), refused
whole with every bad row named, idempotent, and judged and reported like generated answers."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from judge import paths
from judge.data.datasets import import_items
from judge.data.response_files import read_response_file
from judge.data.responses import (
    MAX_BATCH_ROWS,
    MAX_TEXT_CHARS,
    ResponseRow,
    import_response_file,
    import_responses,
)
from judge.errors import InvalidInputError, NotFoundError
from judge.prompts import PromptBook
from judge.store.engine import make_engine, session_scope
from judge.store.tables import GenerationRun, Item, Judgment, Response
from server import usecases
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

DATA = Path(__file__).parents[2] / "support" / "data"
JSONL = DATA / "responses_sample.jsonl"
CSV = DATA / "responses_sample.csv"


def row(item_id: str, part: str, text: str = "An answer.", **more: Any) -> dict[str, Any]:
    return {"item_id": item_id, "part": part, "text": text, **more}


def with_sample(engine: Engine) -> Engine:
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    return engine


@pytest.fixture
def store(engine: Engine) -> Engine:
    return with_sample(engine)


def count(engine: Engine, table: type[Any]) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(table)).one()


def check_import_and_resend(engine: Engine) -> None:
    """The core behaviour, run against SQLite and PostgreSQL alike."""
    book = PromptBook(paths.prompts_dir())
    rows = read_response_file(JSONL)
    first = import_responses(engine, "sample", rows, book=book)
    # The file holds 6 rows: s1-gender-1 (1 part), s2-gender-1 (A, B), s3-gender-1 (A, B) and
    # s4-gender-1 (1 part, blank): 6 answers of 4 items, all new, in a new run.
    assert (first.added, first.unchanged, first.items, first.created_run) == (6, 0, 4, True)
    assert first.model == "external"  # no label in the rows or the call
    with Session(engine) as session:
        run = session.get(GenerationRun, first.generation_run_id)
        assert run is not None
        assert (run.source, run.model, run.status) == ("imported", "external", "finished")
        stored = {
            (key, r.part): r
            for r, key in session.exec(
                select(Response, Item.key).join(Item).where(Response.run_id == run.id)
            )
        }
        s1 = session.exec(select(Item).where(Item.key == "s1-gender-1")).one()
    assert len(stored) == 6
    # Only s4-gender-1's answer is blank ("   " in the file).
    assert {k for k, r in stored.items() if r.flag == "empty"} == {("s4-gender-1", "answer")}
    assert {r.flag for k, r in stored.items() if k[0] != "s4-gender-1"} == {"ok"}
    answer = stored[("s1-gender-1", "answer")]
    assert answer.extra == {"source": "classroom pilot", "latency_ms": 812}
    assert answer.raw_text is not None and answer.raw_text.startswith("The adviser should")
    # prompts/generation.toml's S1 prompt is the question and a paragraph asking for at most
    # 60 words: what FairJudge would have sent for this item.
    assert answer.prompt == f"{s1.fields['question']}\n\nAnswer in at most 60 words."
    assert len({r.cache_key for r in stored.values()}) == 6  # one hash per answer

    again = import_responses(engine, "sample", rows, book=book)
    assert (again.added, again.unchanged, again.items) == (0, 6, 4)
    assert (again.generation_run_id, again.created_run) == (first.generation_run_id, False)
    assert count(engine, Response) == 6

    # A later batch for the same dataset and label adds to the same run; another label gets
    # a run of its own.
    more = import_responses(engine, "sample", [row("s1-gender-2", "answer")])
    assert (more.generation_run_id, more.added, more.created_run) == (
        first.generation_run_id,
        1,
        False,
    )
    other = import_responses(engine, "sample", [row("s1-gender-2", "answer")], model="tutor-2")
    assert other.generation_run_id != first.generation_run_id and other.created_run
    assert count(engine, GenerationRun) == 2


def test_import_then_resend_adds_nothing(store: Engine) -> None:
    check_import_and_resend(store)


@pytest.mark.postgres
def test_import_then_resend_adds_nothing_on_postgresql(pg_url: str) -> None:
    engine = make_engine(pg_url)
    try:
        check_import_and_resend(with_sample(engine))
    finally:
        engine.dispose()


def test_a_bad_batch_is_refused_whole_with_every_bad_row(store: Engine) -> None:
    stored = import_responses(store, "sample", [row("s1-gender-1", "answer", "First.")])
    assert stored.added == 1
    batch: list[Any] = [
        row("s1-gender-2", "answer"),  # 1: fine
        row("s1-nobody-9", "answer"),  # 2: no such item
        row("s1-gender-1", "answer", "Second."),  # 3: stored with the text "First."
        row("s1-race_culture-1", "A"),  # 4: an S1 item has only 'answer'
        row("s2-gender-1", "A"),  # 5: B neither here nor stored
        row("s1-gender-2", "answer"),  # 6: repeats row 1
        row("s4-gender-1", "answer", "x" * (MAX_TEXT_CHARS + 1)),  # 7: too long
        row("s4-gender-2", "answer", colour="red"),  # 8: unknown field
        {"part": "answer", "text": "No id."},  # 9: item_id missing
        row("s1-subject-1", "answer", None),  # 10: text is not a string
        row("s1-subject-2", "answer", metadata=["not", "an", "object"]),  # 11
    ]
    with pytest.raises(InvalidInputError) as caught:
        import_responses(store, "sample", batch)
    problems = caught.value.problems
    assert sorted({n for n, _ in problems}) == list(range(2, 12))
    reasons = {n: why for n, why in problems}
    assert "no such item" in reasons[2]
    assert "different text" in reasons[3]
    assert "'answer'" in reasons[4] and "not 'A'" in reasons[4]
    assert "'B' is neither in this batch nor stored" in reasons[5]
    assert "repeats row 1" in reasons[6]
    assert f"at most {MAX_TEXT_CHARS}" in reasons[7]
    assert "unknown field 'colour'" in reasons[8]
    assert reasons[9] == "item_id is missing"
    assert reasons[10].startswith("item 's1-subject-1' part 'answer': text:")
    assert reasons[11].startswith("item 's1-subject-2' part 'answer': metadata:")
    # Every row that names its item says which: the item id starts its reason.
    assert all(why.startswith("item '") for n, why in problems if n != 9)
    assert "row 2: item 's1-nobody-9'" in str(caught.value)
    assert count(store, Response) == 1  # nothing of the batch was stored
    assert count(store, GenerationRun) == 1


def test_the_parts_of_an_item_may_come_from_the_store(store: Engine) -> None:
    both = [row("s2-gender-1", "A", "Left."), row("s2-gender-1", "B", "Right.")]
    assert import_responses(store, "sample", both).added == 2
    # B is stored, so A alone is a complete item: sent again unchanged, it adds nothing.
    again = import_responses(store, "sample", both[:1])
    assert (again.added, again.unchanged, again.items) == (0, 1, 1)


def test_metadata_changed_on_a_stored_answer_is_refused(store: Engine) -> None:
    import_responses(store, "sample", [row("s1-gender-1", "answer", metadata={"v": 1})])
    with pytest.raises(InvalidInputError) as caught:
        import_responses(store, "sample", [row("s1-gender-1", "answer", metadata={"v": 2})])
    assert "different metadata" in caught.value.problems[0][1]


def test_text_limit_is_inclusive(store: Engine) -> None:
    longest = row("s1-gender-1", "answer", "y" * MAX_TEXT_CHARS)
    assert import_responses(store, "sample", [longest]).added == 1


def test_model_label_comes_from_the_call_or_the_rows(store: Engine) -> None:
    labelled = [row("s1-gender-1", "answer", model="tutor-1")]
    assert import_responses(store, "sample", labelled).model == "tutor-1"
    assert import_responses(store, "sample", labelled, model="tutor-1").unchanged == 1
    with pytest.raises(InvalidInputError) as caught:
        import_responses(store, "sample", labelled, model="tutor-2")
    assert caught.value.problems == [
        (
            1,
            "item 's1-gender-1' part 'answer': model 'tutor-1' is not the batch's 'tutor-2' "
            "(given for the batch); one batch holds one model's answers",
        )
    ]
    mixed = [row("s1-gender-2", "answer", model="a"), row("s1-gender-1", "answer", model="b")]
    with pytest.raises(InvalidInputError) as caught:
        import_responses(store, "sample", mixed)
    assert [n for n, _ in caught.value.problems] == [2]  # row 1 set the label
    for bad in ("", "   ", "m" * 201):
        with pytest.raises(InvalidInputError, match="model label"):
            import_responses(store, "sample", labelled, model=bad)


def test_batch_size_and_empty_batch_and_unknown_dataset(store: Engine) -> None:
    rows = [row("s1-gender-1", "answer")] * (MAX_BATCH_ROWS + 1)
    with pytest.raises(InvalidInputError, match=f"at most {MAX_BATCH_ROWS:,} are accepted"):
        import_responses(store, "sample", rows)
    with pytest.raises(InvalidInputError, match="no answers"):
        import_responses(store, "sample", [])
    with pytest.raises(NotFoundError, match="no dataset named 'missing'"):
        import_responses(store, "missing", [row("s1-gender-1", "answer")])
    assert count(store, GenerationRun) == 0


def test_validated_rows_are_accepted_as_they_are(store: Engine) -> None:
    rows = [ResponseRow(item_id="s1-gender-1", part="answer", text="Typed.")]
    assert import_responses(store, "sample", rows).added == 1
    # Without a prompt book the answer keeps no prompt (documented in docs/datasets.md).
    with Session(store) as session:
        assert session.exec(select(Response.prompt)).one() == ""


def test_two_batches_at_once_make_one_run(store: Engine) -> None:
    rows = read_response_file(JSONL)
    results: list[Any] = []

    def send() -> None:
        results.append(import_responses(store, "sample", rows))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The import lock serialises them: the first adds the 6 answers, the second finds them.
    assert sorted((r.added, r.unchanged, r.created_run) for r in results) == [
        (0, 6, False),
        (6, 0, True),
    ]
    assert count(store, GenerationRun) == 1 and count(store, Response) == 6


def test_csv_and_jsonl_files_read_the_same(tmp_path: Path) -> None:
    assert read_response_file(CSV) == read_response_file(JSONL)
    assert len(read_response_file(JSONL)) == 6  # the blank line in the file is skipped


def test_unreadable_lines_are_named(tmp_path: Path) -> None:
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text(
        json.dumps(row("s1-gender-1", "answer")) + "\n{oops\n\n[1, 2]\n", encoding="utf-8"
    )
    with pytest.raises(InvalidInputError) as caught:
        read_response_file(jsonl)
    # Line 2 is not JSON, line 3 blank (skipped), line 4 a list.
    assert [n for n, _ in caught.value.problems] == [2, 4]
    assert "line 2: not valid JSON" in str(caught.value)
    csv_file = tmp_path / "bad.csv"
    csv_file.write_text(
        'item_id,part,text,metadata\ns1-gender-1,answer,"two\nlines",\n'
        "s1-gender-2,answer,x,{nope\ns1-gender-2,answer,x,[1]\ns1-gender-2,answer\n",
        encoding="utf-8",
    )
    with pytest.raises(InvalidInputError) as caught:
        read_response_file(csv_file)
    # Line 1 is the header and the first record spans lines 2-3, so the bad ones are 4-6.
    assert [n for n, _ in caught.value.problems] == [4, 5, 6]
    with pytest.raises(InvalidInputError, match="header must name"):
        (tmp_path / "cols.csv").write_text("item_id,text\na,b\n", encoding="utf-8")
        read_response_file(tmp_path / "cols.csv")
    with pytest.raises(InvalidInputError, match=r"\.jsonl .* or \.csv"):
        (tmp_path / "answers.txt").write_text("x\n", encoding="utf-8")
        read_response_file(tmp_path / "answers.txt")


def test_a_file_is_one_batch_numbered_by_its_lines(store: Engine, tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    lines = [row("s1-gender-1", "answer"), row("s1-nobody", "answer")]
    path.write_text("\n" + "\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    with pytest.raises(InvalidInputError) as caught:
        import_response_file(store, path, "sample")
    assert [n for n, _ in caught.value.problems] == [3]  # line 1 is blank
    assert "line 3: item 's1-nobody'" in str(caught.value)


def test_an_imported_run_is_judged_and_reported(
    store: Engine, db_url: str, stub: StubServer
) -> None:
    run_id = import_responses(store, "sample", read_response_file(JSONL)).generation_run_id
    settings = make_settings(stub.base_url, db_url)
    summary = usecases.judge(store, settings, usecases.JudgeRequest(generation_run_id=run_id))
    # prompts/rubrics.toml: ICS judges S1 and S4, TCS, PCS and ETCS judge S2, SBAS judges S3;
    # one sample each. 1 (s1) + 3 (s2) + 1 (s3) + 1 (s4) = 6 judgments; s4-gender-1's answer
    # is blank, so its ICS judgment is unscored as a missing answer without a call.
    assert summary.tasks == 6
    with Session(store) as session:
        judged = session.exec(
            select(Item.key, Judgment.rubric, Judgment.status, Judgment.unscored_kind)
            .join(Item)
            .where(Judgment.judge_run_id == summary.run_id)
        ).all()
        report = usecases.full_report(session, summary.run_id, with_reliability=False)
    assert sorted(judged) == [
        ("s1-gender-1", "ICS", "scored", None),
        ("s2-gender-1", "ETCS", "scored", None),
        ("s2-gender-1", "PCS", "scored", None),
        ("s2-gender-1", "TCS", "scored", None),
        ("s3-gender-1", "SBAS", "scored", None),
        ("s4-gender-1", "ICS", "unscored", "missing_answer"),
    ]
    # Every call the stub saw was a judge call (system message) and the imported texts
    # reached the judge.
    bodies = stub.state.bodies
    assert len(bodies) == 5 and all(b["messages"][0]["role"] == "system" for b in bodies)
    assert any("Lukas sketches the wiring" in b["messages"][-1]["content"] for b in bodies)
    answers = report.sections[1].payload["answers"]  # after the judge's standing
    assert {(a["stage"], a["flag"]): a["count"] for a in answers} == {
        ("S1", "ok"): 1,
        ("S2", "ok"): 2,
        ("S3", "ok"): 2,
        ("S4", "empty"): 1,
    }
