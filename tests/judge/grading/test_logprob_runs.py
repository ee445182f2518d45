"""``--aggregation logprob`` end to end on a real SQLite store: against the stub sending fixed
log-probabilities (the expected score and entropy worked out by hand), and refused against an
endpoint that sends none. The real embedded server with logits kept is in
tests/judge/models/test_client_logprobs.py."""

from __future__ import annotations

import math

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import select

from judge.errors import InvalidInputError
from judge.store.engine import session_scope
from judge.store.tables import JudgeRun, Judgment
from judge.trust import diagnostics
from server import usecases
from tests.judge.trust.test_trust import ANSWERS, _store
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer, score_logprobs

PROBS = {"3": 0.1, "4": 0.2, "5": 0.7}
# By hand: expected = 0.1 x 3 + 0.2 x 4 + 0.7 x 5 = 0.3 + 0.8 + 3.5 = 4.6; entropy =
# -(0.1 log2 0.1 + 0.2 log2 0.2 + 0.7 log2 0.7) = 0.33219 + 0.46439 + 0.36020 = 1.15678 bits.
EXPECTED, ENTROPY = 4.6, 1.15678


def test_logprob_runs_store_probabilities_beside_the_sampled_score(
    engine: Engine, db_url: str
) -> None:
    with StubServer(logprobs=score_logprobs(PROBS)) as stub:
        settings = make_settings(stub.base_url, db_url)
        settings.judge.aggregation = "logprob"
        run_id, _ = _store(engine, ANSWERS)
        done = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
        asked = [b for b in stub.state.bodies if b["messages"][0]["role"] == "system"]
    assert all(b.get("logprobs") is True and b.get("top_logprobs") == 5 for b in asked)
    with session_scope(engine) as session:
        judgments = session.exec(select(Judgment).where(Judgment.judge_run_id == done.run_id)).all()
        run = session.get(JudgeRun, done.run_id)
        (row,) = diagnostics.logprob(session, done.run_id) or []
    assert run is not None and run.aggregation == "logprob"
    assert len(judgments) == 5 and all(j.status == "scored" for j in judgments)
    for j in judgments:
        assert j.score in (1, 2, 3, 4, 5)  # the sampled score is kept as it was
        assert j.score_probs == pytest.approx({"1": 0, "2": 0, "3": 0.1, "4": 0.2, "5": 0.7})
        assert j.expected_score == pytest.approx(EXPECTED)
    assert row.with_distribution == 5 and row.mean_expected == pytest.approx(EXPECTED)
    assert row.mean_entropy_bits == pytest.approx(ENTROPY, abs=1e-4)
    # the likeliest level is 5: every judgment whose sampled score is not 5 differs
    assert row.argmax_differs == sum(j.score != 5 for j in judgments)
    assert math.isclose(sum(judgments[0].score_probs.values()), 1.0)  # type: ignore[union-attr]


def test_logprob_aggregation_is_refused_without_logprobs(engine: Engine, db_url: str) -> None:
    with StubServer() as stub:  # sends no logprobs, even when asked
        settings = make_settings(stub.base_url, db_url)
        settings.judge.aggregation = "logprob"
        run_id, _ = _store(engine, ANSWERS)
        with pytest.raises(InvalidInputError, match="returns no token log-probabilities"):
            usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
        judge_calls = [b for b in stub.state.bodies if b["messages"][0]["role"] == "system"]
    # only the probe (max_tokens 2, logprobs asked) was sent, and nothing was stored
    assert [(b["max_tokens"], b["logprobs"]) for b in judge_calls] == [(2, True)]
    with session_scope(engine) as session:
        assert session.exec(select(JudgeRun)).all() == []
