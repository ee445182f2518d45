"""How a run's end reads: a pass with nothing to do says so (not "5/5 (100 %)"), and a run
whose judgments are mostly unscored ends ``unusable``, with exit code 3 from `judge` and a
failed job, unless ``[runs] max_unusable_share`` allows it. Real SQLite, the scripted stub.

Counts by hand: the five S1 answers of ``ANSWERS`` are judged on one rubric (ICS, the only
fairmonitor rubric for S1 items, as ``judge --dry-run`` counts in test_max_cost.py): five
judgments, one call each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from judge.store.engine import session_scope
from judge.store.tables import JudgeRun
from server.jobs import queue
from server.tables import Job
from tests.judge.trust.test_trust import ANSWERS, _store
from tests.support.cli import fairjudge
from tests.support.factories import make_settings, write_config
from tests.support.stub_openai import StubServer


def _prose(messages: list[dict[str, Any]]) -> str | None:
    """Judge calls get a reply with no grade in it (unscored); answers are left to the stub."""
    if any(m.get("role") == "system" for m in messages):
        return "I would rather not grade this answer."
    return None


def _with_runs_table(config: Path, share: float) -> Path:
    config.write_text(config.read_text() + f"\n[runs]\nmax_unusable_share = {share}\n")
    return config


def test_a_second_judge_with_nothing_to_do_says_so(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    with StubServer() as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        run_id, _ = _store(engine, ANSWERS)
        first = fairjudge("--config", config, "judge", str(run_id))
        again = fairjudge("--config", config, "judge", str(run_id))
    assert first.returncode == 0, first.stderr
    assert "judging: 5/5 (100 %)" in first.stderr
    assert again.returncode == 0, again.stderr
    assert "judging: nothing to do: 5 of 5 already stored" in again.stderr
    assert "(100 %)" not in again.stderr


def test_a_judge_run_all_unscored_ends_unusable_and_exits_3(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    with StubServer(responder=_prose) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        run_id, _ = _store(engine, ANSWERS)
        done = fairjudge("--config", config, "judge", str(run_id))
    assert done.returncode == 3, done.stderr
    assert "judge run 1 is unusable: 5 of 5 judgments unscored (" in done.stderr
    assert "more than the 50 % [runs] max_unusable_share allows" in done.stderr
    with session_scope(engine) as session:
        run = session.get(JudgeRun, 1)
        assert run is not None and run.status == "unusable"


def test_a_share_that_allows_every_unscored_judgment_leaves_it_finished(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    # The same five unscored judgments, with the check turned off (share 1): finished.
    with StubServer(responder=_prose) as stub:
        config = _with_runs_table(write_config(tmp_path / "f.toml", stub.base_url, db_url), 1.0)
        run_id, _ = _store(engine, ANSWERS)
        done = fairjudge("--config", config, "judge", str(run_id))
    assert done.returncode == 0, done.stderr
    with session_scope(engine) as session:
        run = session.get(JudgeRun, 1)
        assert run is not None and (run.status, run.status_detail) == ("finished", None)


def _job_end(engine: Engine, db_url: str, responder: Any) -> Job:
    with StubServer(responder=responder) as stub:
        settings = make_settings(stub.base_url, db_url)
        run_id, _ = _store(engine, ANSWERS)
        job = queue.submit(engine, "judge", {"generation_run_id": run_id}, settings=settings)
        assert job.id is not None
        queue.run_job(engine, settings, job.id)
    with Session(engine) as session:
        ended = session.get(Job, job.id)
        assert ended is not None
        session.expunge(ended)
        return ended


def test_a_job_whose_judgments_are_all_unscored_fails_with_the_counts(
    engine: Engine, db_url: str
) -> None:
    ended = _job_end(engine, db_url, _prose)
    assert ended.status == "failed"
    assert ended.error is not None
    assert ended.error.startswith("judge run 1 is unusable: 5 of 5 judgments unscored (")
    assert (ended.done, ended.total) == (5, 5)  # the work was done: it is its result that fails


def test_a_job_whose_judgments_are_scored_finishes(engine: Engine, db_url: str) -> None:
    ended = _job_end(engine, db_url, None)
    assert (ended.status, ended.error) == ("finished", None)
    assert (ended.done, ended.total) == (5, 5)


def test_a_judge_stopped_at_the_cost_bound_says_after_how_many_calls_never_100_percent(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    # As in test_max_cost.py: input free, 1.0 per million output tokens, one call at a time;
    # a call holds 320e-6 (320 tokens out) and costs 5e-6 (the stub's 5 tokens). With
    # --max-cost 335e-6 calls 1..4 go out ((k - 1) x 5e-6 + 320e-6 <= 335e-6): 4 of 5.
    with StubServer() as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        config.write_text(
            config.read_text().replace(
                "max_backoff_s = 0.1\n",
                "max_backoff_s = 0.1\ninput_price_per_mtok = 0.0\noutput_price_per_mtok = 1.0\n",
                1,
            )
        )
        run_id, _ = _store(engine, ANSWERS)
        done = fairjudge("--config", config, "judge", str(run_id), "--max-cost", "0.000335")
        again = fairjudge("--config", config, "judge", str(run_id), "--max-cost", "0.000335")
        calls = sum(1 for b in stub.state.bodies if b["messages"][0]["role"] == "system")
    assert done.returncode == 3, done.stderr
    assert "stopped at the cost bound after 4 of 5 calls" in done.stderr
    assert "(100 %)" not in done.stderr
    # The pass's last progress line: 4 of its 5 judgments made (counts, no share).
    assert "judging: ended with 4 of 5 done in " in done.stderr
    # The bound is the run's: the same command again makes no call and says the same.
    assert calls == 4
    assert again.returncode == 3 and "stopped at the cost bound after 4 of 5 calls" in again.stderr
    assert "(100 %)" not in again.stderr
    # The rerun had the one judgment left to make and made none; 4 were stored.
    assert "judging: ended with 0 of 1 done in " in again.stderr
    assert "; 4 already stored" in again.stderr


def _audit_job_end(engine: Engine, db_url: str, reply: str) -> Job:
    """An audit job: the names suite, 1 repeat, its first 4 prompts, every answer ``reply``."""
    with StubServer(responder=lambda messages: reply) as stub:
        settings = make_settings(stub.base_url, db_url)
        params = {"suite": "names", "options": {"repeats": 1}, "limit": 4}
        job = queue.submit(engine, "audit", params, settings=settings)
        assert job.id is not None
        queue.run_job(engine, settings, job.id)
    with Session(engine) as session:
        ended = session.get(Job, job.id)
        assert ended is not None
        session.expunge(ended)
        return ended


def test_an_audit_job_whose_answers_are_unreadable_fails_with_the_counts(
    engine: Engine, db_url: str
) -> None:
    # 4 answers with no number in them: 4 of 4 unparsed, more than half.
    ended = _audit_job_end(engine, db_url, "It depends on too many things to say.")
    assert ended.status == "failed"
    assert ended.error is not None
    assert ended.error.startswith(
        "audit run 1 is unusable: 4 of 4 answers unreadable (unparsed: 4)"
    )


def test_an_audit_job_whose_answers_are_read_finishes(engine: Engine, db_url: str) -> None:
    ended = _audit_job_end(engine, db_url, "45000")  # a plain amount: read as a number
    assert (ended.status, ended.error) == ("finished", None)
