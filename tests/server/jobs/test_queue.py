"""Jobs in the store and the worker that runs them, on a real SQLite store and the stub.

Expected counts: the sample's first 18 items are its S1 items, one ICS judgment each (18),
as tests/server/api/test_api.py reads off the file.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from judge.config import Settings
from judge.data.datasets import import_items
from judge.store.engine import session_scope
from judge.store.tables import Judgment, RunLease
from server import usecases
from server.jobs import queue
from server.tables import Job
from server.usecases.runs import job_counts
from tests.support.factories import SAMPLE, make_settings
from tests.support.kills import requests_of
from tests.support.stub_openai import StubServer

S1_ITEMS = 18


@pytest.fixture
def slow_stub() -> Iterator[StubServer]:
    with StubServer(latency=0.1) as stub:
        yield stub


def prepared(engine: Engine, stub: StubServer, db_url: str, **endpoint: object) -> Settings:
    settings = make_settings(stub.base_url, db_url, **endpoint)
    settings = settings.model_copy(
        update={"server": settings.server.model_copy(update={"job_poll_s": 0.05})}
    )
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    usecases.generate(engine, settings, usecases.GenerateRequest(dataset="sample", limit=S1_ITEMS))
    return settings


class Running:
    """A worker thread for the block."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=queue.Worker(engine, settings, self.stop).run, daemon=True
        )

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def wait(engine: Engine, job_id: int, until: tuple[str, ...], timeout: float = 60) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        with Session(engine) as session:
            job = queue.get_job(session, job_id)
        if job.status in until:
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job.status}"
        time.sleep(0.02)


def judgments(engine: Engine) -> list[tuple[int, int, str, int]]:
    with Session(engine) as session:
        rows = session.exec(
            select(Judgment.judge_run_id, Judgment.item_id, Judgment.rubric, Judgment.sample_index)
        ).all()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def test_a_judge_job_runs_to_the_end(engine: Engine, stub: StubServer, db_url: str) -> None:
    settings = prepared(engine, stub, db_url)
    job = queue.submit(engine, "judge", {"generation_run_id": 1}, created_by="t")
    with Running(engine, settings):
        done = wait(engine, job.id or 0, ("finished", "failed"))
    assert done.status == "finished", done.error
    assert (done.done, done.total, done.attempts) == (S1_ITEMS, S1_ITEMS, 1)
    assert done.result is not None and done.result["judge_run_id"] == 1
    assert len(judgments(engine)) == S1_ITEMS == requests_of(stub, "judge")
    with Session(engine) as session:
        counts = job_counts(session, done.result)
        rows = session.exec(select(Judgment)).all()
    assert counts == {
        "by_status": {"scored": S1_ITEMS},
        "prompt_tokens": sum(j.prompt_tokens for j in rows),  # summed here, row by row
        "completion_tokens": sum(j.completion_tokens for j in rows),
        "cached_prompt_tokens": sum(j.cached_prompt_tokens for j in rows),
    }
    assert counts["prompt_tokens"] > 0


def test_bad_parameters_are_refused_before_anything_is_queued(
    engine: Engine, stub: StubServer, db_url: str
) -> None:
    prepared(engine, stub, db_url)
    with pytest.raises(queue.InvalidInputError, match="samples: Input should be less"):
        queue.submit(engine, "judge", {"generation_run_id": 1, "samples": 99})
    with pytest.raises(queue.NotFoundError, match="no dataset named 'nope'"):
        queue.submit(engine, "generate", {"dataset": "nope"})
    with pytest.raises(queue.InvalidInputError, match="unknown job kind"):
        queue.submit(engine, "bake", {})
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(Job)).one() == 0


def test_a_job_on_an_unreachable_endpoint_fails_with_the_reason(
    engine: Engine, stub: StubServer, db_url: str
) -> None:
    settings = prepared(engine, stub, db_url)
    down = settings.model_copy(deep=True)
    down.endpoints["test"].base_url = "http://127.0.0.1:9/v1"  # the discard port: refused
    job = queue.submit(engine, "judge", {"generation_run_id": 1})
    with Running(engine, down):
        failed = wait(engine, job.id or 0, ("finished", "failed"))
    assert failed.status == "failed" and "cannot reach endpoint 'test'" in (failed.error or "")
    assert judgments(engine) == []
    # Resumed against the endpoint that is up, it completes: nothing was lost.
    queue.resume_job(engine, job.id or 0)
    with Running(engine, settings):
        assert wait(engine, job.id or 0, ("finished", "failed")).status == "finished"
    assert len(judgments(engine)) == S1_ITEMS


def test_cancel_stops_a_running_job_and_resume_finishes_it(
    engine: Engine, slow_stub: StubServer, db_url: str
) -> None:
    # One call at a time, 0.1 s each: the 18 judgments take about 1.8 s.
    settings = prepared(engine, slow_stub, db_url, concurrency=1)
    job_id = queue.submit(engine, "judge", {"generation_run_id": 1}).id or 0
    with Running(engine, settings):
        wait(engine, job_id, ("running",))
        while len(judgments(engine)) < 3:
            time.sleep(0.02)
        assert queue.cancel_job(engine, job_id).cancel_requested
        cancelled = wait(engine, job_id, ("cancelled", "finished"), timeout=10)
        assert cancelled.status == "cancelled"
        kept = len(judgments(engine))
        assert 3 <= kept < S1_ITEMS  # what was stored stays
        queue.resume_job(engine, job_id)
        assert wait(engine, job_id, ("finished", "failed")).status == "finished"
    rows = judgments(engine)
    assert len(rows) == len(set(rows)) == S1_ITEMS
    # A cancel stops between calls: at most the one call in flight is paid again.
    assert S1_ITEMS <= requests_of(slow_stub, "judge") <= S1_ITEMS + 1


def test_two_jobs_on_one_run_judge_each_item_once(
    engine: Engine, slow_stub: StubServer, db_url: str
) -> None:
    settings = prepared(engine, slow_stub, db_url, concurrency=2)
    first = queue.submit(engine, "judge", {"generation_run_id": 1}).id or 0
    second = queue.submit(engine, "judge", {"generation_run_id": 1}).id or 0
    with Running(engine, settings):  # two slots: both start at once, one waits for the run
        for job_id in (first, second):
            assert wait(engine, job_id, ("finished", "failed")).status == "finished"
    rows = judgments(engine)
    assert len(rows) == len(set(rows)) == S1_ITEMS
    assert requests_of(slow_stub, "judge") == S1_ITEMS  # nothing paid twice
    with Session(engine) as session:
        later = queue.get_job(session, second)
    assert later.result is not None and later.result["summary"]["model_calls"] in (0, S1_ITEMS)


def test_a_job_whose_worker_died_is_taken_over(
    engine: Engine, stub: StubServer, db_url: str, tmp_path: Path
) -> None:
    settings = prepared(engine, stub, db_url)
    job_id = queue.submit(engine, "judge", {"generation_run_id": 1}).id or 0
    dead = _dead_pid()
    with Session(engine) as session:  # as a worker killed mid-job leaves it
        job = session.get(Job, job_id)
        assert job is not None
        job.status, job.attempts = "running", 1
        session.add(job)
        host = socket.gethostname()
        session.add(
            RunLease(kind="job", run_id=job_id, pid=dead, host=host, token="x", expires_at=2e9)
        )
        session.commit()
    with Running(engine, settings):
        done = wait(engine, job_id, ("finished", "failed"))
    assert (done.status, done.attempts) == ("finished", 2)
    assert len(judgments(engine)) == S1_ITEMS


def _dead_pid() -> int:
    """A pid that no process has: a child that has exited and been reaped."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


@pytest.mark.parametrize("warm", [True, False])
def test_a_finished_judge_job_leaves_its_run_pages_computed(
    engine: Engine, stub: StubServer, db_url: str, warm: bool
) -> None:
    from server.usecases.dashboard import default_pages, page_key, run_version
    from server.usecases.figures import read, signing_key, version_text

    settings = prepared(engine, stub, db_url)
    settings = settings.model_copy(
        update={"server": settings.server.model_copy(update={"warm_figures": warm})}
    )
    sign = signing_key(settings)
    job = queue.submit(engine, "judge", {"generation_run_id": 1}, created_by="t")
    with Running(engine, settings):  # leaving joins the worker: its job is over, warming too
        done = wait(engine, job.id or 0, ("finished", "failed"))
        assert done.status == "finished", done.error
        deadline = time.monotonic() + 30
        while warm and time.monotonic() < deadline:
            with Session(engine) as session:
                version = version_text(run_version(session, 1), settings)
                keys = [page_key(p, 1, o) for p, o in default_pages(settings)]
                if all(read(session, k, version, sign) for k in keys[:5]):
                    break
            time.sleep(0.1)
    with Session(engine) as session:
        version = version_text(run_version(session, 1), settings)
        kept = [read(session, page_key(p, 1, o), version, sign) for p, o in default_pages(settings)]
    # The run's report, agreement and checks pages, then the report, report.html and
    # report.json's text, at the run's version now (the job's rows included); none at all
    # with [server] warm_figures = false. Nobody rated the run: agreement is the page's
    # reason, and the API's agreement JSON (a 404) is kept nowhere.
    assert [k is not None for k in kept] == [warm] * 6 + [False]
    if warm:
        report = kept[0].value  # type: ignore[union-attr]
        assert report.info.id == 1 and len(report.browser.items) == S1_ITEMS
