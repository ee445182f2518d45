"""``checks counterfactual --dry-run`` and ``--max-cost`` against the stub (10 prompt and
5 completion tokens per call, tests/support/stub_openai.py) on a real SQLite store.

The answers are test_trust's: five S1 answers, four of which name a person (the fifth has
nothing to swap and is skipped), each judged on S1's one rubric (ICS): four judge calls.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from judge.store.tables import GenerationRun, JudgeRun, Judgment
from server import usecases
from server.usecases import trust
from server.usecases.requests import CounterfactualRequest
from tests.judge.trust.test_trust import ANSWERS, _store
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer


def _count(engine: Engine, table: Any) -> int:
    with Session(engine) as session:
        return int(session.exec(select(func.count()).select_from(table)).one())


def test_counterfactual_dry_run_sends_nothing_and_max_cost_stops_the_copy(
    engine: Engine, db_url: str
) -> None:
    with StubServer() as stub:
        # Input free, 1.0 per million output tokens, one call at a time. A judge call
        # reserves max_tokens (320) out: 320e-6, and costs its 5 output tokens: 5e-6. With
        # max_cost = 320e-6 + 5e-6, by hand: call k goes out while (k - 1) x 5e-6 + 320e-6
        # <= 325e-6, i.e. k = 1, 2; the other two of the four are not made.
        settings = make_settings(
            stub.base_url, db_url, concurrency=1, input_price_per_mtok=0.0,
            output_price_per_mtok=1.0, batch_discount=0.5,
        )  # fmt: skip
        run_id, _ = _store(engine, ANSWERS)
        first = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
        sent, runs, copies = (
            stub.state.requests,
            _count(engine, JudgeRun),
            _count(engine, GenerationRun),
        )
        request = CounterfactualRequest.build(judge_run_id=first.run_id, swap=["names"])
        plan = trust.counterfactual_dry_run(engine, settings, request)
        # nothing sent, no copy and no judge run stored
        assert stub.state.requests == sent
        assert (_count(engine, JudgeRun), _count(engine, GenerationRun)) == (runs, copies)
        assert (plan["copy_run_id"], plan["judge_run_id"]) == (None, None)
        assert (plan["items_copied"], plan["items_skipped"]) == (4, 1)
        assert (plan["judgments_to_make"], plan["calls_to_send"]) == (4, 4)
        # at most: 4 calls x 320 output tokens at 1.0 per million, half at the batch price
        assert plan["estimate"]["cost_max"] == pytest.approx(4 * 320e-6)
        assert plan["estimate"]["cost_max_batch"] == pytest.approx(4 * 320e-6 * 0.5)
        stopped = trust.counterfactual_audit(
            engine, settings, first.run_id, swap=["names"], max_cost=325e-6
        )
        assert stub.state.requests == sent + 2
        status, detail = trust.judge_run_status(engine, stopped.judge_run_id)
        assert status == "incomplete" and detail is not None
        # 2 of the 4 judgments made (by hand, above), under the copy's judge run's own bound
        assert detail.startswith(
            "stopped at the cost bound after 2 of 4 calls (--max-cost 0.000325 for the run"
        )
        assert "2 judgments not made" in detail
        # the line names the command that goes on: the counterfactual check, not `judge`
        assert "run the same checks counterfactual command again" in detail
        left = trust.counterfactual_dry_run(engine, settings, request)
        assert (left["copy_run_id"], left["judge_run_id"]) == (
            stopped.copy.run_id, stopped.judge_run_id,
        )  # fmt: skip
        assert (left["judgments_to_make"], left["calls_to_send"]) == (2, 2)
        # the bound is the copy's judge run's, kept across reruns: a higher one goes on
        done = trust.counterfactual_audit(
            engine, settings, request.model_copy(update={"max_cost": 1.0})
        )
        copy_calls = stub.state.bodies[sent:]
    assert (
        len(copy_calls) == 4 and trust.judge_run_status(engine, done.judge_run_id)[0] == "finished"
    )
    # the first dry run rendered, from the copy made in memory, exactly the prompts sent
    chars = sum(len(m["content"]) for body in copy_calls for m in body["messages"])
    assert plan["estimate"]["prompt_chars"] == chars
    with Session(engine) as session:
        made = select(func.count()).where(Judgment.judge_run_id == done.judge_run_id)
        assert session.exec(made).one() == 4
