"""Judge runs through the Batch API (``judge RUN --batch``) against a local stub of OpenAI's
files and batches routes (tests/support/stub_batch.py): the same judgments a live run makes,
failed, malformed, missing and expired lines listed and retried, never guessed, and the cost
at the batch price."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.config import Settings
from judge.data.datasets import import_items
from judge.errors import ConfigError, InvalidInputError
from judge.grading.rubrics import load_rubrics
from judge.models.batch_options import BatchOptions
from judge.models.transport import Repairs
from judge.prompts import PromptBook
from judge.store.engine import make_engine, session_scope
from judge.store.queries import responses_by_item
from judge.store.tables import BatchJob, Item, JudgeRun, Judgment
from server import usecases
from server.usecases.batch import batch_summary_lines, judge_batch
from server.usecases.requests import JudgeRequest
from tests.support import stores
from tests.support.batch_runs import batch_settings, judgments_by_key
from tests.support.factories import SAMPLE
from tests.support.stub_batch import MALFORMED, BatchScript, BatchStub, LineFate
from tests.support.stub_openai import grade_for

POLL_S = 0.02
LIMIT = 24
# The sample's first 24 items: 18 S1 items judged with ICS and 6 S2 items with TCS, PCS and
# ETCS, so 18 + 3 x 6 = 36 judgments a sample (as tests/judge/store/test_postgres.py counts).
JUDGMENTS = 36


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Engine, str]]:
    """A fresh store holding the sample: a copy of the session's SQLite template, or a new
    PostgreSQL database with the sample imported."""
    if request.param == "sqlite":
        yield from _sqlite_store(request, tmp_path / "batch.db")
        return
    url = str(request.getfixturevalue("pg_url"))
    engine = make_engine(url)
    with session_scope(engine) as session:
        import_items(session, SAMPLE, stores.SAMPLE_DATASET)
    yield engine, url
    engine.dispose()


@pytest.fixture
def sqlite_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Engine, str]]:
    yield from _sqlite_store(request, tmp_path / "batch.db")


def _sqlite_store(request: pytest.FixtureRequest, path: Path) -> Iterator[tuple[Engine, str]]:
    url = stores.copy_store(request.getfixturevalue("sample_template"), path)
    engine = make_engine(url)
    yield engine, url
    engine.dispose()


@pytest.fixture
def stub() -> Iterator[BatchStub]:
    with BatchStub(BatchScript(window_s=0.05)) as server:
        yield server


def _answered(engine: Engine, url: str, stub: BatchStub) -> int:
    """The first ``LIMIT`` sample items answered (live) through the stub: the run's id."""
    return usecases.generate(
        engine,
        batch_settings(stub.base_url, url),
        usecases.GenerateRequest(dataset="sample", limit=LIMIT),
    ).run_id


def test_a_batch_run_stores_what_a_live_run_stores(
    request: pytest.FixtureRequest, tmp_path: Path, store: tuple[Engine, str], stub: BatchStub
) -> None:
    # Two stores at the same stub: one judged live (SQLite), one through the Batch API (SQLite
    # or PostgreSQL), two samples each. The live run is the independent path: its calls never
    # touch the batch routes, and its store's cache is not the batch run's.
    batch_engine, batch_url = store
    samples = {"samples": 2}
    live_url = stores.copy_store(request.getfixturevalue("sample_template"), tmp_path / "l.db")
    live_engine = make_engine(live_url)
    request.addfinalizer(live_engine.dispose)
    live_gen = _answered(live_engine, live_url, stub)
    live = usecases.judge(
        live_engine,
        batch_settings(stub.base_url, live_url),
        JudgeRequest.build(generation_run_id=live_gen, **samples),
    )
    gen = _answered(batch_engine, batch_url, stub)
    live_calls = stub.state.live_chat
    seen: list[tuple[int, int]] = []
    result = judge_batch(
        batch_engine,
        batch_settings(stub.base_url, batch_url),
        JudgeRequest.build(generation_run_id=gen, **samples),
        options=BatchOptions(poll_s=POLL_S),
        progress=lambda done, total: seen.append((done, total)),
    )
    assert stub.state.live_chat == live_calls  # no judge call went out live
    # Each line's body is exactly what the live client sent for the same call (the stub kept
    # every live judge request's body; judge requests are those with a system message).
    with stub.state.lock:
        live_bodies = [b for b in stub.state.bodies[:live_calls] if _is_judge(b)]
    (upload,) = [f for f in stub.state.files.values() if f.purpose == "batch"]
    lines = [json.loads(line) for line in upload.content.decode().splitlines()]
    assert _sorted_json(line["body"] for line in lines) == _sorted_json(live_bodies)
    assert {line["url"] for line in lines} == {"/v1/chat/completions"}
    assert (stub.state.uploads, stub.state.creations) == (1, 1)
    assert result.summary.flags == {"scored": 2 * JUDGMENTS} and result.missing == []
    assert result.status == "finished" and result.pending == 0
    # Two samples differ by their seed, so every judgment is its own line of the batch.
    assert [(b.calls, b.answered, b.failed) for b in result.batches] == [(72, 72, 0)]
    assert seen and seen[-1] == (72, 72)
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:], strict=False))

    def compared(engine: Engine, run_id: int) -> dict[object, tuple[object, ...]]:
        return {
            key: (j.status, j.score, j.cache_key, j.prompt_hash, j.calls, j.raw_output)
            for key, j in judgments_by_key(engine, run_id).items()
        }

    batched = compared(batch_engine, result.run_id)
    assert len(batched) == 2 * JUDGMENTS  # one per item x rubric x sample
    assert batched == compared(live_engine, live.run_id)
    # The stub's grade (1 + sha256(messages)[0] mod 5) is each judgment's score: the reply
    # read back from the output file is the one for this judgment's own prompt.
    _assert_scores_are_the_stubs_grades(batch_engine, batch_settings(stub.base_url, batch_url), gen)

    # Cost by hand: the stub reports 10 prompt and 5 completion tokens per call; 72 calls at
    # 2.0 and 8.0 per million, half off: 72 x (10 x 2.0 + 5 x 8.0) / 1e6 x 0.5 = 0.00216.
    assert result.cost == pytest.approx(72 * (10 * 2.0 + 5 * 8.0) / 1_000_000 * 0.5, rel=1e-12)
    assert (result.batch_prompt_tokens, result.batch_completion_tokens) == (720, 360)
    assert result.live_calls == 0

    # Asked again: nothing to send, no new batch.
    again = judge_batch(
        batch_engine,
        batch_settings(stub.base_url, batch_url),
        JudgeRequest.build(generation_run_id=gen, **samples),
        options=BatchOptions(poll_s=POLL_S),
    )
    assert again.summary.tasks == 0 and again.batches == [] and stub.state.creations == 1


def _is_judge(body: dict[str, Any]) -> bool:
    return any(m.get("role") == "system" for m in body.get("messages", []))


def _sorted_json(bodies: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(b, sort_keys=True) for b in bodies)


def _assert_scores_are_the_stubs_grades(engine: Engine, settings: Settings, gen: int) -> None:
    """Rebuild each judgment's prompt from the stored item and answers: its hash is the
    stored one and its score the stub's grade for it (1 + sha256(messages)[0] mod 5,
    computed here independently of the run), as tests/judge/store/test_postgres.py checks
    live runs. So each reply read back from the batch's output reached its own judgment."""
    book = PromptBook(settings.prompts_path())
    rubrics = load_rubrics(settings.prompts_path())
    with Session(engine) as s:
        answers = responses_by_item(s, gen)
        rows = s.exec(select(Judgment, Item).join(Item)).all()
        for judgment, item in rows:
            assert item.id is not None
            texts = {p: r.raw_text or "" for p, r in answers[item.id].items()}
            rubric = rubrics[judgment.rubric]
            texts_judged = rubric.render_texts(item.fields, texts)
            prompt = book.judge_prompt(rubric, texts_judged, variant="plain")
            assert judgment.prompt_hash == prompt.prompt_hash
            assert judgment.score == grade_for(prompt.messages)
    assert len(rows) == 2 * JUDGMENTS


def _fate(lines: dict[int, str]) -> LineFate:
    """The stub's script: what happens to the lines at these indexes of the input file."""
    return lambda index, line: lines.get(index)


def test_failed_malformed_and_missing_lines_are_listed_then_only_they_are_retried(
    sqlite_store: tuple[Engine, str], stub: BatchStub
) -> None:
    engine, url = sqlite_store
    settings = batch_settings(stub.base_url, url)
    gen = _answered(engine, url, stub)
    stub.script.line_fate = _fate({1: "fail", 5: "fail", 3: "malformed", 7: "missing"})
    result = judge_batch(
        engine, settings, JudgeRequest(generation_run_id=gen), options=BatchOptions(poll_s=POLL_S)
    )
    assert result.summary.flags == {"scored": JUDGMENTS - 4, "unscored": 4}
    assert len(result.missing) == 4 and result.status == "incomplete"
    assert result.status_detail == (
        f"4 of {JUDGMENTS} judgments missing (call_failed: 4); "
        "run the same judge command again to retry them"
    )
    rows = judgments_by_key(engine, result.run_id)
    failed = {k: j for k, j in rows.items() if j.status == "unscored"}
    assert {j.unscored_kind for j in failed.values()} == {"call_failed"}
    assert all(j.score is None for j in failed.values())  # never a guessed number
    reasons = sorted(j.reason or "" for j in failed.values())
    assert sum("HTTP 500: scripted line failure" in r for r in reasons) == 2
    assert sum("ended completed with no line for this call" in r for r in reasons) == 1
    malformed = [j for j in failed.values() if "unreadable" in (j.reason or "")]
    assert len(malformed) == 1
    # The unreadable line is kept whole with the judgment it fails.
    assert malformed[0].raw_output == MALFORMED.format(key=malformed[0].cache_key)
    lines = batch_summary_lines(result)
    assert sum(line.startswith("  no answer:") for line in lines) == 4

    # Rerun with a healthy batch: one new batch holding exactly the 4 calls.
    stub.script.line_fate = None
    again = judge_batch(
        engine, settings, JudgeRequest(generation_run_id=gen), options=BatchOptions(poll_s=POLL_S)
    )
    assert stub.state.creations == 2
    inputs = [f for f in stub.state.files.values() if f.purpose == "batch"]
    resent = sorted(json.loads(x)["custom_id"] for x in inputs[-1].content.decode().splitlines())
    assert len(inputs) == 2 and resent == sorted(j.cache_key for j in failed.values())
    assert again.summary.tasks == 4 and again.summary.flags == {"scored": 4}
    assert again.status == "finished" and again.missing == []
    assert len(judgments_by_key(engine, result.run_id)) == JUDGMENTS


@pytest.mark.parametrize("expired_lines", ["error", "missing"])
def test_an_expired_batch_keeps_what_it_answered_and_a_rerun_sends_the_rest(
    sqlite_store: tuple[Engine, str], stub: BatchStub, expired_lines: str
) -> None:
    engine, url = sqlite_store
    settings = batch_settings(stub.base_url, url)
    gen = _answered(engine, url, stub)
    stub.script.expire_after, stub.script.expired_lines = 10, expired_lines
    result = judge_batch(
        engine, settings, JudgeRequest(generation_run_id=gen), options=BatchOptions(poll_s=POLL_S)
    )
    assert [b.status for b in result.batches] == ["expired"]
    assert result.summary.flags == {"scored": 10, "unscored": JUDGMENTS - 10}
    assert len(result.missing) == JUDGMENTS - 10
    why = "batch_expired" if expired_lines == "error" else "ended expired with no line"
    assert all(why in m.reason for m in result.missing)
    stub.script.expire_after = None
    again = judge_batch(
        engine, settings, JudgeRequest(generation_run_id=gen), options=BatchOptions(poll_s=POLL_S)
    )
    assert [b.calls for b in again.batches] == [JUDGMENTS - 10]
    assert again.status == "finished" and again.summary.flags == {"scored": JUDGMENTS - 10}


def test_a_failed_batch_lists_every_call_and_stores_nothing_made_up(
    sqlite_store: tuple[Engine, str], stub: BatchStub
) -> None:
    engine, url = sqlite_store
    gen = _answered(engine, url, stub)
    stub.script.fail_batch = "line 1: model not found"
    result = judge_batch(
        engine,
        batch_settings(stub.base_url, url),
        JudgeRequest(generation_run_id=gen),
        options=BatchOptions(poll_s=POLL_S),
    )
    assert [b.status for b in result.batches] == ["failed"]
    assert result.summary.flags == {"unscored": JUDGMENTS} and len(result.missing) == JUDGMENTS
    assert all("line 1: model not found" in m.reason for m in result.missing)


def test_failed_calls_can_be_retried_live_in_the_same_command(
    sqlite_store: tuple[Engine, str], stub: BatchStub
) -> None:
    engine, url = sqlite_store
    gen = _answered(engine, url, stub)
    before = stub.state.live_chat
    stub.script.line_fate = _fate({0: "fail", 2: "missing"})
    result = judge_batch(
        engine,
        batch_settings(stub.base_url, url),
        JudgeRequest(generation_run_id=gen),
        options=BatchOptions(poll_s=POLL_S, retry_live=True),
    )
    assert result.summary.flags == {"scored": JUDGMENTS} and result.status == "finished"
    assert stub.state.live_chat - before == result.live_calls == 2
    # Cost by hand: 34 calls at half price, 2 live at the full price, 60 per million each
    # (10 prompt tokens x 2.0 + 5 completion tokens x 8.0).
    assert result.cost == pytest.approx((34 * 0.5 + 2) * 60 / 1_000_000, rel=1e-12)


FAULTS = ["prose_always", "prose_then_fixed", "out_of_range", "by_seed"]


def _fault_items(path: Path) -> Path:
    lines = [
        {
            "id": f"f-{name}",
            "stage": "S1",
            "factor": "gender",
            "scenario": "classroom_management",
            "question": f"Question with #fault:{name} inside?",
            "expected_answer": "No.",
        }
        for name in FAULTS
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def _fault_store(path: Path, empty: Path, stub: BatchStub) -> tuple[Engine, int]:
    """A store of its own holding the fault items, answered through the stub."""
    url = stores.copy_store(empty, path)
    engine = make_engine(url)
    with session_scope(engine) as session:
        import_items(session, _fault_items(path.with_suffix(".jsonl")), "faults")
    return engine, usecases.generate(
        engine, batch_settings(stub.base_url, url), usecases.GenerateRequest(dataset="faults")
    ).run_id


Row = tuple[object, ...]


def _as_stored(engine: Engine, run_id: int) -> dict[object, Row]:
    return {
        k: (j.status, j.score, j.unscored_kind, j.reason, j.raw_output, j.repair_output, j.calls)
        for k, j in judgments_by_key(engine, run_id).items()
    }


@pytest.mark.parametrize("repairs", ["live", "batch"])
def test_unreadable_replies_are_repaired_and_unscored_as_live(
    tmp_path: Path, empty_template: Path, stub: BatchStub, repairs: Repairs
) -> None:
    # The live run in a store of its own (a shared cache would answer the batch's calls).
    live_engine, live_gen = _fault_store(tmp_path / "live.db", empty_template, stub)
    engine, gen = _fault_store(tmp_path / "batch.db", empty_template, stub)
    try:
        settings = batch_settings(stub.base_url, str(live_engine.url))
        live = usecases.judge(
            live_engine, settings, usecases.JudgeRequest(generation_run_id=live_gen)
        )
        expected = _as_stored(live_engine, live.run_id)
        before = stub.state.live_chat
        settings = batch_settings(stub.base_url, str(engine.url))
        result = judge_batch(
            engine,
            settings,
            JudgeRequest(generation_run_id=gen),
            options=BatchOptions(poll_s=POLL_S),
            repairs=repairs,
        )
        got = _as_stored(engine, result.run_id)
    finally:
        live_engine.dispose()
        engine.dispose()
    assert got == expected
    # prose_always and out_of_range stay unparsable after their repair, prose_then_fixed is
    # fixed by it (score 2), by_seed scores 2 at seed 0 (stub_openai.SEEDED_SCORES).
    assert got[("f-prose_then_fixed", "ICS", 0)][:2] == ("scored", 2)
    assert got[("f-prose_always", "ICS", 0)][2] == "unparsable"
    assert got[("f-out_of_range", "ICS", 0)][2] == "unparsable"
    assert got[("f-by_seed", "ICS", 0)][:2] == ("scored", 2)
    repaired = 3
    if repairs == "live":
        assert stub.state.live_chat - before == result.live_calls == repaired
        assert stub.state.creations == 1
    else:
        assert stub.state.live_chat == before and result.live_calls == 0
        assert [b.calls for b in result.batches] == [len(FAULTS), repaired]


def test_without_waiting_the_batch_is_collected_by_the_next_command(
    sqlite_store: tuple[Engine, str], stub: BatchStub
) -> None:
    engine, url = sqlite_store
    settings = batch_settings(stub.base_url, url)
    gen = _answered(engine, url, stub)
    stub.script.window_s = 0.3
    first = judge_batch(
        engine,
        settings,
        JudgeRequest(generation_run_id=gen),
        options=BatchOptions(poll_s=POLL_S, wait=False),
    )
    assert first.pending == JUDGMENTS and first.summary.flags == {"not_made": JUDGMENTS}
    assert first.status == "incomplete"
    assert (first.status_detail or "").startswith(f"{JUDGMENTS} judgments wait for batch(es)")
    second = judge_batch(
        engine, settings, JudgeRequest(generation_run_id=gen), options=BatchOptions(poll_s=POLL_S)
    )
    assert second.summary.flags == {"scored": JUDGMENTS} and second.status == "finished"
    assert stub.state.creations == 1
    with Session(engine) as session:
        jobs = session.exec(select(BatchJob)).all()
        run = session.get(JudgeRun, second.run_id)
    assert [(j.state, j.answered, j.batch_status) for j in jobs] == [
        ("collected", JUDGMENTS, "completed")
    ]
    assert run is not None and run.status == "finished"


def test_an_endpoint_not_marked_for_batches_gets_one_line_naming_the_setting(
    sqlite_store: tuple[Engine, str], stub: BatchStub
) -> None:
    engine, url = sqlite_store
    settings = batch_settings(stub.base_url, url, batch=False)
    gen = _answered(engine, url, stub)
    with pytest.raises(ConfigError) as refused:
        judge_batch(
            engine,
            settings,
            JudgeRequest(generation_run_id=gen),
            options=BatchOptions(poll_s=POLL_S),
        )
    message = str(refused.value)
    assert "\n" not in message and "`batch = true` under [endpoints.test]" in message
    assert stub.state.uploads == 0 and stub.state.creations == 0
    with pytest.raises(InvalidInputError, match="--max-cost cannot be used with --batch"):
        judge_batch(
            engine,
            batch_settings(stub.base_url, url),
            JudgeRequest.build(generation_run_id=gen, max_cost=1.0),
        )


@pytest.mark.parametrize(
    ("share", "status"),
    # The fault run holds 4 judgments (4 S1 items x ICS x 1 sample), 2 of them unparsable
    # (prose_always, out_of_range: the test above). 2 > 0.25 x 4 = 1: unusable; 2 is not more
    # than 0.5 x 4 = 2, exactly at the threshold: finished.
    [(0.25, "unusable"), (0.5, "finished")],
)
def test_a_batch_run_ends_by_the_configured_unusable_share(
    tmp_path: Path, empty_template: Path, stub: BatchStub, share: float, status: str
) -> None:
    engine, gen = _fault_store(tmp_path / "batch.db", empty_template, stub)
    try:
        settings = batch_settings(stub.base_url, str(engine.url))
        settings = settings.model_copy(
            update={"runs": settings.runs.model_copy(update={"max_unusable_share": share})}
        )
        result = judge_batch(
            engine,
            settings,
            JudgeRequest(generation_run_id=gen),
            options=BatchOptions(poll_s=POLL_S),
        )
        with Session(engine) as session:
            run = session.get(JudgeRun, result.run_id)
            assert run is not None
            stored = (run.status, run.status_detail)
    finally:
        engine.dispose()
    assert result.status == stored[0] == status
    if status == "unusable":
        assert stored[1] is not None and stored[1].startswith("2 of 4 judgments unscored")
        assert "more than the 25 %" in stored[1]
