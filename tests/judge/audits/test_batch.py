"""Audit runs through the Batch API (``audit SUITE run --batch``) against the stub of
OpenAI's files and batches routes: the answers, readings and figures a live run stores, row
for row; the award audit's follow-ups in a second batch once the first answers are in; an
endpoint not set up for batches refused in one line.

The stub answers with a test-given responder (as tests/judge/audits/test_runner.py does):
numbers that differ from prompt to prompt, so that an answer stored against the wrong prompt
would show."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.audits.award_data import load_name_groups
from judge.audits.runner import stored_answers
from judge.audits.suites import SUITES
from judge.errors import ConfigError
from judge.models.batch_options import BatchOptions
from judge.store.engine import make_engine
from judge.store.tables import AuditAnswer, BatchJob
from server.usecases import audits
from server.usecases.batch import audit_batch
from server.usecases.requests import AuditRequest
from tests.support import stores
from tests.support.batch_runs import batch_inputs, batch_settings, url_of
from tests.support.stub_batch import BatchScript, BatchStub

POLL_S = 0.02
GROUPS = load_name_groups()
QUESTION = re.compile(r"Which student should get the award, (\w+) or (\w+)\?")


def offer(messages: list[dict[str, str]]) -> str:
    """A figure for the name audit that depends on the prompt: 1,000 + 10 x the first byte
    of its sha256."""
    digest = hashlib.sha256(messages[-1]["content"].encode()).digest()
    return f"I would offer ${1000 + 10 * digest[0]:,} for it."


def group_a(messages: list[dict[str, str]]) -> str:
    """The award audit: whichever name is in group A; the follow-up turn explains."""
    found = QUESTION.search(messages[0]["content"])
    assert found, "not an award prompt"
    first, second = found.groups()
    chosen = first if first in GROUPS.names_a else second
    if len(messages) > 1:
        return f"{chosen} showed steadier work across the questions."
    return f"{chosen}."


def _empty_store(request: pytest.FixtureRequest, path: Path, kind: str) -> Engine:
    if kind == "sqlite":
        engine = make_engine(stores.copy_store(request.getfixturevalue("empty_template"), path))
    else:
        engine = make_engine(str(request.getfixturevalue("pg_url")))
    request.addfinalizer(engine.dispose)
    return engine


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    return _empty_store(request, tmp_path / "batch.db", request.param)


Stored = tuple[object, ...]


def _as_stored(engine: Engine, run_id: int) -> dict[tuple[str, str], Stored]:
    """Every column an audit answer takes from its call and its reading, by (key, turn)
    (``latency_s`` aside: a batch has no latency per call)."""
    with Session(engine) as session:
        rows = session.exec(select(AuditAnswer).where(AuditAnswer.run_id == run_id)).all()
    found: dict[tuple[str, str], Stored] = {
        (a.key, a.turn): (
            json.dumps(a.meta, sort_keys=True),
            a.prompt,
            a.raw_text,
            a.value,
            a.status,
            a.reason,
            a.error,
            a.finish_reason,
            a.prompt_tokens,
            a.completion_tokens,
            a.cache_key,
        )  # fmt: skip
        for a in rows
    }
    assert len(found) == len(rows)
    return found


def _figures(engine: Engine, run_id: int, suite: str) -> str:
    with Session(engine) as session:
        answers = stored_answers(session, run_id)
    return json.dumps(SUITES[suite].analyze(answers).to_dict(), sort_keys=True, default=str)


def _live_and_batch(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    batch_engine: Engine,
    stub: BatchStub,
    audit: AuditRequest,
) -> tuple[Engine, int, Any]:
    """The audit live in a SQLite store of its own (the independent path: chat route only,
    its own call cache), then through batches in ``batch_engine``: the live store, the live
    run's id and the batch command's result. No batch call goes out live."""
    live_engine = _empty_store(request, tmp_path / "live.db", "sqlite")
    live = audits.audit(live_engine, batch_settings(stub.base_url, url_of(live_engine)), audit)
    live_calls = stub.state.live_chat
    result = audit_batch(
        batch_engine,
        batch_settings(stub.base_url, url_of(batch_engine)),
        audit,
        options=BatchOptions(poll_s=POLL_S),
    )
    assert stub.state.live_chat == live_calls
    return live_engine, live.run_id, result


def test_a_batch_name_audit_stores_what_a_live_one_stores(
    request: pytest.FixtureRequest, tmp_path: Path, store: Engine
) -> None:
    # The design's first 40 prompts with two repeats each: 20 names x 2 draws, each draw its
    # own call (its sample index is its seed).
    audit = AuditRequest.build(suite="names", options={"repeats": 2}, limit=40, max_tokens=50)
    with BatchStub(BatchScript(window_s=0.05), responder=offer) as stub:
        live_engine, live_id, result = _live_and_batch(request, tmp_path, store, stub, audit)
        (lines,) = batch_inputs(stub)
        assert len(lines) == 40 and (stub.state.uploads, stub.state.creations) == (1, 1)
    got = _as_stored(store, result.run_id)
    assert len(got) == 40 and got == _as_stored(live_engine, live_id)
    # Each stored value is the responder's figure for its own prompt, worked out here again.
    for row in got.values():
        prompt, value = row[1], row[3]
        assert value == 1000 + 10 * hashlib.sha256(str(prompt).encode()).digest()[0]
    assert _figures(store, result.run_id, "names") == _figures(live_engine, live_id, "names")
    assert result.flags == {"parsed": 40} and result.status == "finished"
    # Cost by hand: 40 calls of 10 prompt and 5 completion tokens at 2.00 and 8.00 per
    # million, half off.
    assert result.cost == pytest.approx(40 * (10 * 2.0 + 5 * 8.0) / 1e6 * 0.5, rel=1e-12)


def test_award_follow_ups_go_in_a_second_batch_once_the_first_answers_are_in(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    engine = _empty_store(request, tmp_path / "batch.db", "sqlite")
    # 1 level x 2 pairs x 4 variants = 8 first prompts; each answer chooses, so 8 "why?"s.
    audit = AuditRequest.build(
        suite="award", options={"levels": [5], "pairs_per_level": 2, "followup": True},
        max_tokens=80,
    )  # fmt: skip
    with BatchStub(BatchScript(window_s=0.05), responder=group_a) as stub:
        live_engine, live_id, result = _live_and_batch(request, tmp_path, engine, stub, audit)
        inputs = batch_inputs(stub)
        assert stub.state.creations == 2
    assert [len(lines) for lines in inputs] == [8, 8]
    # The second batch's conversations carry the first batch's answers.
    assert {len(line["body"]["messages"]) for line in inputs[1]} == {3}
    got = _as_stored(engine, result.run_id)
    assert len(got) == 16 and got == _as_stored(live_engine, live_id)
    assert result.flags == {"parsed": 8, "answered": 8} and result.status == "finished"
    with Session(engine) as session:
        purposes = [(j.run_kind, j.purpose, j.calls) for j in session.exec(select(BatchJob))]
    assert purposes == [("audit", "first", 8), ("audit", "followup", 8)]


def test_an_endpoint_not_marked_for_batches_gets_one_line(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    engine = _empty_store(request, tmp_path / "batch.db", "sqlite")
    audit = AuditRequest.build(suite="names", limit=4)
    with BatchStub() as stub:
        settings = batch_settings(stub.base_url, url_of(engine), batch=False)
        with pytest.raises(ConfigError) as refused:
            audit_batch(engine, settings, audit, options=BatchOptions(poll_s=POLL_S))
        assert (stub.state.uploads, stub.state.live_chat) == (0, 0)
    message = str(refused.value)
    assert "\n" not in message and "`batch = true` under [endpoints.test]" in message
