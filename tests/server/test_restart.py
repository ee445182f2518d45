"""A server killed with SIGKILL mid-job, then started again: the job resumes and completes
with exactly one judgment per item x rubric x sample, and only the calls that were in
flight at the kill are paid twice (their answers never reached the store).

The 108 judgments of the 72-item sample are counted in tests/judge/test_durability.py."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlmodel import Session, select

from judge.store.tables import Judgment
from tests.support.cli import fairjudge
from tests.support.factories import SAMPLE, write_config
from tests.support.kills import requests_of
from tests.support.live import LiveServer
from tests.support.stub_openai import StubServer

JUDGMENTS = 108
CONCURRENCY = 4


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("db_url" if request.param == "sqlite" else "pg_url"))


@contextmanager
def session_on(url: str) -> Iterator[Session]:
    """A session on the store, its engine closed afterwards (a PostgreSQL connection left
    to the garbage collector is a ResourceWarning)."""
    engine = create_engine(url)
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


def test_sigkill_mid_job_then_restart_resumes_the_job(tmp_path: Path, store_url: str) -> None:
    with StubServer(latency=0.1) as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, store_url, concurrency=4)
        for args in (["dataset", "import", SAMPLE], ["generate", SAMPLE.stem]):
            done = fairjudge("--config", config, *args)  # set-up in process
            assert done.returncode == 0, done.stderr
        server = LiveServer(config)
        with server:
            status, job = server.post(
                "/api/v1/jobs", {"kind": "judge", "params": {"generation_run_id": 1}}
            )
            assert status == 201, job
            deadline = time.monotonic() + 60
            while requests_of(stub, "judge") < 30:  # well into the job (108 calls, 4 at a time)
                assert time.monotonic() < deadline
                time.sleep(0.01)
            server.kill(signal.SIGKILL)  # every process of the server: web and job worker
            paid_at_kill = requests_of(stub, "judge")
            time.sleep(0.5)
            assert requests_of(stub, "judge") == paid_at_kill  # nothing of it survived
        with session_on(store_url) as s:
            stored = len(s.exec(select(Judgment.id)).all())
        assert 0 < stored < JUDGMENTS

        restarted = LiveServer(config)
        with restarted:
            finished = restarted.wait_job(job["id"], timeout=120)
        paid = requests_of(stub, "judge")
    assert finished["status"] == "finished", finished
    assert finished["attempts"] == 2  # started once, taken over once after the kill
    assert finished["counts"]["by_status"] == {"scored": JUDGMENTS}  # the stub always grades
    with session_on(store_url) as s:
        keys = s.exec(select(Judgment.item_id, Judgment.rubric, Judgment.sample_index)).all()
    assert len(keys) == len(set(keys)) == JUDGMENTS
    # Calls stored before the kill are never repaid; those in flight at it may be (at most
    # the endpoint's concurrency).
    assert JUDGMENTS <= paid <= JUDGMENTS + CONCURRENCY, paid
