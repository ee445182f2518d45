"""``judge --max-cost`` and ``judge --dry-run`` against the stub, which reports 10 prompt and
5 completion tokens for every call (tests/support/stub_openai.py), on a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import select

from judge.errors import ConfigError
from judge.runs import NOT_MADE
from judge.store.engine import session_scope
from judge.store.tables import JudgeRun, Judgment
from server import usecases
from tests.judge.trust.test_trust import ANSWERS, _store
from tests.support.cli import fairjudge
from tests.support.factories import make_settings, write_config
from tests.support.stub_openai import StubServer


def _judge_calls(stub: StubServer) -> list[dict]:  # type: ignore[type-arg]
    return [b for b in stub.state.bodies if b["messages"][0]["role"] == "system"]


def test_max_cost_stops_at_the_budget_and_a_rerun_goes_on(engine: Engine, db_url: str) -> None:
    with StubServer() as stub:
        # Input tokens free, 1.0 per million output tokens, one call at a time. A call
        # reserves its worst case, max_tokens (320) out: 320e-6; it then costs its 5 output
        # tokens: 5e-6. With max_cost = 320e-6 + 3 x 5e-6 = 335e-6, by hand: call k goes out
        # while (k - 1) x 5e-6 + 320e-6 <= 335e-6, i.e. for k = 1..4; the 5th is refused.
        settings = make_settings(
            stub.base_url, db_url, concurrency=1,
            input_price_per_mtok=0.0, output_price_per_mtok=1.0,
        )  # fmt: skip
        run_id, _ = _store(engine, ANSWERS)
        before = usecases.judge_dry_run(
            engine, settings, usecases.JudgeRequest(generation_run_id=run_id)
        )
        assert (before["judge_run_id"], before["judgments_to_make"]) == (None, 5)
        assert before["calls_to_send"] == 5 and before["cached_calls"] == 0
        stopped = usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=run_id, max_cost=335e-6)
        )
        assert len(_judge_calls(stub)) == 4
        assert stopped.flags == {"scored": 4, NOT_MADE: 1}
        with session_scope(engine) as session:
            run = session.get(JudgeRun, stopped.run_id)
            assert run is not None and run.status == "incomplete"
            # 4 of the 5 judgments made (by hand, above), the bound kept with the run
            assert run.status_detail and run.status_detail.startswith(
                "stopped at the cost bound after 4 of 5 calls (--max-cost 0.000335 for the run"
            )
            assert (
                "spent 0.0000 in all" in run.status_detail
                and "1 judgments not made" in run.status_detail
            )
            assert run.max_cost == 335e-6
        left = usecases.judge_dry_run(
            engine, settings, usecases.JudgeRequest(generation_run_id=run_id)
        )
        assert (left["judge_run_id"], left["judgments_to_make"]) == (stopped.run_id, 1)
        assert left["calls_to_send"] == 1
        # The same bound again spends nothing more: 4 x 5e-6 spent + 320e-6 held > 335e-6
        # (each command used to have a fresh 335e-6, and this rerun made the 5th call).
        again = usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=run_id, max_cost=335e-6)
        )
        assert len(_judge_calls(stub)) == 4 and again.flags == {NOT_MADE: 1}
        with session_scope(engine) as session:
            run = session.get(JudgeRun, stopped.run_id)
            assert run is not None and run.status == "incomplete" and run.status_detail
            assert run.status_detail.startswith("stopped at the cost bound after 4 of 5 calls")
        goes_on = usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=run_id, max_cost=1.0)
        )  # a higher bound
        last = _judge_calls(stub)[-1]
    assert len(_judge_calls(stub)) == 5 and goes_on.flags == {"scored": 1}
    # the dry run's estimate counted the characters of exactly the call later sent
    chars = sum(len(m["content"]) for m in last["messages"])
    assert left["estimate"]["prompt_chars"] == chars
    assert left["estimate"]["prompt_tokens"] == -(-chars // 4)  # 4 characters per token
    # and its cost bound: no input price, 320 output tokens at 1.0 per million
    assert left["estimate"]["cost_max"] == pytest.approx(320e-6)
    with session_scope(engine) as session:
        judgments = session.exec(select(Judgment).where(Judgment.judge_run_id == goes_on.run_id))
        assert len(judgments.all()) == 5
        run = session.get(JudgeRun, goes_on.run_id)
        assert run is not None and run.status == "finished"


def test_max_cost_without_prices_is_refused_before_any_call(engine: Engine, db_url: str) -> None:
    with StubServer() as stub:
        settings = make_settings(stub.base_url, db_url)
        run_id, _ = _store(engine, ANSWERS)
        with pytest.raises(ConfigError, match="input_price_per_mtok"):
            usecases.judge(
                engine, settings, usecases.JudgeRequest(generation_run_id=run_id, max_cost=1.0)
            )
        assert _judge_calls(stub) == []


def test_dry_run_through_the_cli_sends_and_stores_nothing(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    with StubServer() as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        text = config.read_text().replace(  # prices for the judge endpoint
            "max_backoff_s = 0.1\n",
            "max_backoff_s = 0.1\ninput_price_per_mtok = 2.0\noutput_price_per_mtok = 8.0\n",
            1,
        )
        config.write_text(text)
        run_id, _ = _store(engine, ANSWERS)
        done = fairjudge("--config", config, "judge", str(run_id), "--dry-run")
        assert done.returncode == 0, done.stderr
        assert _judge_calls(stub) == []
    assert "judgments to make: 5" in done.stdout and "calls to send: 5" in done.stdout
    # at most: 5 calls x 320 output tokens x 8.0 per million = 0.0128, plus the prompts
    assert "at most 0.0" in done.stdout
    with session_scope(engine) as session:
        assert session.exec(select(JudgeRun)).all() == []
