"""Jobs on a Celery worker whose broker is the machine's RabbitMQ (127.0.0.1:5672, guest), not
Redis: a judge run split into parts ends with the same judgments as the same run made in one
process on SQLite (the plain path: the reference), once each. With an amqp:// broker and no
``limiter_url`` there is no shared Redis quota: each worker limits its own calls, which the
stub's count of calls in flight shows (at most one task's ``task_concurrency``)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from sqlmodel import Session, select

from judge.store.tables import Judgment
from server.jobs import queue
from server.tables import Job, JobPart
from tests.server.jobs.test_celery import (
    PER_TASK,
    Workers,
    _answered_store,
    _beating,
    _expected,
    _job_over,
    _wait,
)
from tests.support.kills import requests_of
from tests.support.stub_openai import StubServer

BROKER = "amqp://guest:guest@127.0.0.1:5672//"


def _rabbitmq_up() -> None:
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
    except OSError as exc:
        why = f"RabbitMQ does not answer at 127.0.0.1:5672 ({exc})"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{why}; CI must run the RabbitMQ test")
        pytest.skip(why)


def test_a_worker_on_rabbitmq_judges_a_split_run_once_each(tmp_path: Path, pg_url: str) -> None:
    from server.jobs.celery_app import make_app

    _rabbitmq_up()
    # Tasks another run left in the shared queue would only repeat work (they are idempotent),
    # but the count of calls below must be this run's.
    app = make_app(BROKER)
    app.control.purge()
    with StubServer(latency=0.05) as stub:
        expected = _expected(tmp_path, stub)

    with StubServer(latency=0.05) as stub:
        config, settings, engine = _answered_store(tmp_path, stub, pg_url, BROKER)
        workers = Workers(config, tmp_path)
        try:
            worker = workers.start()
            _wait(lambda: _beating(engine, {worker.pid}), "the worker beating", workers)
            before = requests_of(stub, "judge")
            with stub.state.lock:
                stub.state.max_in_flight = 0
            job = queue.submit(engine, "judge", {"generation_run_id": 1}, settings=settings)

            _wait(lambda: _job_over(engine, job.id), "the job's end", workers, timeout=120)
        finally:
            workers.stop()
        with Session(engine) as session:
            done = session.get(Job, job.id)
            rows = session.exec(select(Judgment)).all()
            parts = session.exec(select(JobPart).where(JobPart.job_id == job.id)).all()
        assert done is not None and done.status == "finished", (done, workers.logs()[-3000:])
        got = {(j.item_id, j.rubric, j.sample_index): j.score for j in rows}
        assert len(rows) == len(got) == len(expected) and got == expected
        # 60 items in parts of 8, each run by the worker, each call paid once.
        assert len(parts) == 8 and all(p.status == "done" for p in parts)
        assert requests_of(stub, "judge") - before == len(expected)
        assert stub.state.max_in_flight <= PER_TASK
        engine.dispose()
