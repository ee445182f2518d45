"""Generation runs through the Batch API (``generate DATASET --batch``) against the stub of
OpenAI's files and batches routes (tests/support/stub_batch.py): the answers a live run
stores, row for row; expired, failed and unreadable lines stored as failed answers, listed,
and sent again (only they) by the next command; an endpoint not set up for batches refused
in one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.errors import ConfigError, InvalidInputError
from judge.models.batch_options import BatchOptions
from judge.store.tables import BatchJob, GenerationRun
from server import usecases
from server.usecases.batch import generate_batch, run_batch_summary_lines
from server.usecases.requests import GenerateRequest
from tests.support.batch_runs import (
    answers_by_key,
    batch_inputs,
    batch_settings,
    sample_store,
    url_of,
)
from tests.support.stub_batch import MALFORMED, BatchScript, BatchStub

POLL_S = 0.02
LIMIT = 24
# The sample's first 24 items are 18 S1 items (one part each: answer) and 6 S2 items (two
# parts each: A and B), so 18 + 2 x 6 = 30 answers.
ANSWERS = 30
PER_CALL = (10 * 2.0 + 5 * 8.0) / 1_000_000
"""One call's cost at the full price: the stub reports 10 prompt and 5 completion tokens,
priced 2.00 and 8.00 per million (tests/support/batch_runs.PRICES)."""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    return sample_store(request, tmp_path / "batch.db", request.param)


@pytest.fixture
def sqlite_store(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    return sample_store(request, tmp_path / "batch.db")


@pytest.fixture
def stub() -> Iterator[BatchStub]:
    with BatchStub(BatchScript(window_s=0.05)) as server:
        yield server


def _request() -> GenerateRequest:
    return GenerateRequest.build(dataset="sample", limit=LIMIT)


Stored = tuple[object, ...]


def _as_stored(engine: Engine, run_id: int) -> dict[object, Stored]:
    """Every column a generation run's answer takes from its call (``latency_s`` aside: a
    batch has no latency per call, stored as 0)."""
    return {
        key: (
            r.prompt,
            r.cache_key,
            r.raw_text,
            r.flag,
            r.error,
            r.finish_reason,
            r.prompt_tokens,
            r.completion_tokens,
        )  # fmt: skip
        for key, r in answers_by_key(engine, run_id).items()
    }


def test_a_batch_generation_run_stores_what_a_live_run_stores(
    request: pytest.FixtureRequest, tmp_path: Path, store: Engine, stub: BatchStub
) -> None:
    # The live run is the independent path: its own SQLite store (its call cache is not the
    # batch run's), at the same stub, through the chat route only.
    live_engine = sample_store(request, tmp_path / "live.db")
    live = usecases.generate(
        live_engine, batch_settings(stub.base_url, url_of(live_engine)), _request()
    )
    live_calls = stub.state.live_chat
    with stub.state.lock:
        live_bodies = list(stub.state.bodies[:live_calls])
    seen: list[tuple[int, int]] = []
    settings = batch_settings(stub.base_url, url_of(store))
    result = generate_batch(
        store,
        settings,
        _request(),
        options=BatchOptions(poll_s=POLL_S),
        progress=lambda d, t: seen.append((d, t)),
    )
    assert stub.state.live_chat == live_calls  # no call went out live
    assert (stub.state.uploads, stub.state.creations) == (1, 1)
    (lines,) = batch_inputs(stub)
    # Each line's body is what the live client sent for the same call.
    assert sorted(map(repr, (line["body"] for line in lines))) == sorted(map(repr, live_bodies))
    assert len(lines) == ANSWERS and live.tasks == ANSWERS

    got = _as_stored(store, result.run_id)
    assert len(got) == ANSWERS
    assert got == _as_stored(live_engine, live.run_id)
    assert result.flags == live.flags == {"ok": ANSWERS}
    assert result.status == "finished" and result.missing == [] and result.pending == 0
    assert [(b.calls, b.answered, b.failed) for b in result.batches] == [(ANSWERS, ANSWERS, 0)]
    assert seen and seen[-1] == (ANSWERS, ANSWERS)
    # Cost by hand: 30 calls at half the full price, none live.
    assert result.cost == pytest.approx(ANSWERS * PER_CALL * 0.5, rel=1e-12)
    assert (result.batch_prompt_tokens, result.live_calls) == (ANSWERS * 10, 0)
    with Session(store) as session:
        runs = session.exec(select(GenerationRun)).all()
    assert [(r.id, r.status) for r in runs] == [(result.run_id, "finished")]

    # Asked again: nothing to send, no new batch, the same run.
    again = generate_batch(store, settings, _request(), options=BatchOptions(poll_s=POLL_S))
    assert again.tasks == 0 and again.batches == [] and stub.state.creations == 1
    assert again.run_id == result.run_id


def test_an_expired_batch_lists_the_missing_answers_and_a_rerun_sends_only_them(
    sqlite_store: Engine, stub: BatchStub
) -> None:
    engine = sqlite_store
    settings = batch_settings(stub.base_url, url_of(engine))
    stub.script.expire_after = 10
    first = generate_batch(engine, settings, _request(), options=BatchOptions(poll_s=POLL_S))
    assert [b.status for b in first.batches] == ["expired"]
    assert first.flags == {"ok": 10, "error": ANSWERS - 10}
    # 20 of the 30 answers failed: more than [runs] max_unusable_share's default half, so
    # the run ends unusable (issue 41: a run mostly failed is not "incomplete"), and its line
    # still says how many are missing and that a rerun retries them.
    assert first.status == "unusable" and len(first.missing) == ANSWERS - 10
    assert all("batch_expired" in m.reason for m in first.missing)
    assert first.status_detail == (
        f"{ANSWERS - 10} of {ANSWERS} answers failed (failed calls: {ANSWERS - 10}), more "
        "than the 50 % [runs] max_unusable_share allows; "
        f"{ANSWERS - 10} of {ANSWERS} answers missing (failed calls: {ANSWERS - 10}); "
        "run the same generate command again to retry them"
    )
    rows = answers_by_key(engine, first.run_id)
    failed = {k: r for k, r in rows.items() if r.flag == "error"}
    assert {(m.where["item"], m.where["part"]) for m in first.missing} == set(failed)
    assert all(r.raw_text is None for r in failed.values())  # nothing made up
    lines = run_batch_summary_lines(first)
    assert sum(line.startswith("  no answer: item ") for line in lines) == 10  # the first 10
    assert f"  ... and {ANSWERS - 20:,} more" in lines
    # Cost by hand: the 10 answered calls at half price.
    assert first.cost == pytest.approx(10 * PER_CALL * 0.5, rel=1e-12)

    stub.script.expire_after = None
    again = generate_batch(engine, settings, _request(), options=BatchOptions(poll_s=POLL_S))
    assert stub.state.creations == 2
    resent = sorted(line["custom_id"] for line in batch_inputs(stub)[-1])
    assert resent == sorted(r.cache_key for r in failed.values())
    assert again.tasks == ANSWERS - 10 and again.flags == {"ok": ANSWERS - 10}
    assert again.status == "finished" and again.missing == []
    assert {r.flag for r in answers_by_key(engine, first.run_id).values()} == {"ok"}


def test_failed_and_unreadable_lines_are_stored_as_failed_answers_with_the_line_kept(
    sqlite_store: Engine, stub: BatchStub
) -> None:
    engine = sqlite_store
    settings = batch_settings(stub.base_url, url_of(engine))
    fates = {1: "fail", 3: "malformed", 7: "missing"}
    stub.script.line_fate = lambda index, line: fates.get(index)
    result = generate_batch(engine, settings, _request(), options=BatchOptions(poll_s=POLL_S))
    assert result.flags == {"ok": ANSWERS - 3, "error": 3} and len(result.missing) == 3
    failed = [r for r in answers_by_key(engine, result.run_id).values() if r.flag == "error"]
    errors = sorted(r.error or "" for r in failed)
    assert sum("HTTP 500: scripted line failure" in e for e in errors) == 1
    assert sum("ended completed with no line for this call" in e for e in errors) == 1
    (unreadable,) = [r for r in failed if "unreadable" in (r.error or "")]
    # The unreadable line is kept whole with the answer it fails, not as its text.
    assert (unreadable.error or "").endswith(
        "; the line as it came: " + MALFORMED.format(key=unreadable.cache_key)
    )
    assert unreadable.raw_text is None


def test_without_waiting_the_batch_is_collected_by_the_next_command(
    sqlite_store: Engine, stub: BatchStub
) -> None:
    engine = sqlite_store
    settings = batch_settings(stub.base_url, url_of(engine))
    stub.script.window_s = 0.3
    first = generate_batch(
        engine, settings, _request(), options=BatchOptions(poll_s=POLL_S, wait=False)
    )
    assert first.pending == ANSWERS and first.flags == {"not_made": ANSWERS}
    assert first.status == "incomplete" and first.missing == []
    assert (first.status_detail or "").startswith(f"{ANSWERS} answers wait for batch(es)")
    assert answers_by_key(engine, first.run_id) == {}
    second = generate_batch(engine, settings, _request(), options=BatchOptions(poll_s=POLL_S))
    assert second.flags == {"ok": ANSWERS} and second.status == "finished"
    assert stub.state.creations == 1
    with Session(engine) as session:
        jobs = session.exec(select(BatchJob)).all()
    assert [(j.run_kind, j.state, j.answered) for j in jobs] == [
        ("generation", "collected", ANSWERS)
    ]


def test_an_endpoint_not_marked_for_batches_gets_one_line(
    sqlite_store: Engine, stub: BatchStub
) -> None:
    engine = sqlite_store
    settings = batch_settings(stub.base_url, url_of(engine), batch=False)
    with pytest.raises(ConfigError) as refused:
        generate_batch(engine, settings, _request(), options=BatchOptions(poll_s=POLL_S))
    message = str(refused.value)
    assert "\n" not in message and "`batch = true` under [endpoints.test]" in message
    with pytest.raises(InvalidInputError, match="--max-cost cannot be used with --batch"):
        generate_batch(
            engine,
            batch_settings(stub.base_url, url_of(engine)),
            GenerateRequest.build(dataset="sample", max_cost=1.0),
        )
    assert (stub.state.uploads, stub.state.live_chat) == (0, 0)
    with Session(engine) as session:
        assert session.exec(select(GenerationRun)).all() == []  # nothing was made
