"""Computing pages ahead never holds a job slot, and health says when the queue stops moving.

A real worker (``queue.Worker``, one slot) on a real SQLite store and the scripted stub. The
sample's first 18 items are its S1 items (one ICS judgment each), imported twice as datasets
``a`` and ``b`` so that two judge jobs have runs of their own.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from judge.config import Settings
from judge.data.datasets import import_items
from judge.store.engine import session_scope
from judge.store.tables import utcnow
from server import create_app, usecases
from server.jobs import queue
from server.tables import Job
from server.usecases import figures
from server.usecases.jobs import worker_beat, worker_health
from tests.server.jobs.test_queue import Running, wait
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

S1_ITEMS = 18
WARM_S = 4.0
"""How long computing a run's pages takes here: made long on purpose (see the test)."""


def _two_datasets(engine: Engine, stub: StubServer, db_url: str, **server: Any) -> Settings:
    settings = make_settings(stub.base_url, db_url)
    cfg = {"job_poll_s": 0.05, "job_slots": 1, **server}
    settings = settings.model_copy(update={"server": settings.server.model_copy(update=cfg)})
    for name in ("a", "b"):
        with session_scope(engine) as session:
            import_items(session, SAMPLE, name)
        usecases.generate(engine, settings, usecases.GenerateRequest(dataset=name, limit=S1_ITEMS))
    return settings


def test_a_small_job_behind_a_finished_one_starts_while_its_pages_are_computed(
    engine: Engine, stub: StubServer, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _two_datasets(engine, stub, db_url, warm_figures=True)
    # 18 judgments' pages take about a second here, too short to tell a slot held from a
    # slot free; computing them is made WARM_S longer (the real computation runs after it).
    real = figures.warm_run
    warming: list[tuple[float, float]] = []

    def slow_warm(engine: Engine, settings: Settings, run: int) -> Any:
        began = time.monotonic()
        time.sleep(WARM_S)
        try:
            return real(engine, settings, run)
        finally:
            warming.append((began, time.monotonic()))

    monkeypatch.setattr(figures, "warm_run", slow_warm)
    first = queue.submit(engine, "judge", {"generation_run_id": 1}, created_by="t")
    with Running(engine, settings):
        assert wait(engine, first.id or 0, ("finished", "failed")).status == "finished"
        second = queue.submit(engine, "judge", {"generation_run_id": 2}, created_by="t")
        started = wait(engine, second.id or 0, ("running", "finished", "failed"))
        seen_started = time.monotonic()
        queued_for = (started.started_at - started.created_at).total_seconds()  # type: ignore[operator]
        done = wait(engine, second.id or 0, ("finished", "failed"))
        deadline = time.monotonic() + 60
        while len(warming) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert done.status == "finished", done.error
    # With the slot held by warming, the second job would wait WARM_S or more; free, it waits
    # for the worker's next look at the queue (every 0.05 s) and the store's writes.
    assert queued_for < WARM_S / 2, queued_for
    # And computing the first job's run pages was still under way when the second started.
    assert warming and warming[0][1] > seen_started, (warming, seen_started)


def _beat(engine: Engine) -> None:
    worker_beat(engine, "host:1")


def _queued(engine: Engine, waited_s: float) -> int:
    with session_scope(engine) as session:
        job = Job(kind="judge", params={"generation_run_id": 1})
        job.created_at = utcnow() - timedelta(seconds=waited_s)
        session.add(job)
        session.flush()
        return job.id or 0


def test_health_says_degraded_when_the_oldest_job_waits_past_the_bound(engine: Engine) -> None:
    _beat(engine)  # a worker alive, that takes no job (its slots are full, say)
    _queued(engine, 120.0)
    health = worker_health(engine, stale_after_s=10.0, wait_alert_s=60.0)
    # Queued 120 s ago (set by hand above): past the 60 s bound; the worker beats.
    assert health.healthy and health.degraded and health.live == 1
    assert health.queued_jobs == 1 and 120.0 <= (health.oldest_wait_s or 0) < 130.0
    assert "has waited 12" in health.reason and "not moving" in health.reason
    settings = make_settings("http://127.0.0.1:9/v1", str(engine.url))
    app = create_app({"SETTINGS": settings, "TESTING": True})
    reply = app.test_client().get("/api/v1/health")
    assert reply.status_code == 200 and reply.get_json()["status"] == "degraded"
    assert reply.get_json()["worker"]["degraded"] is True


def test_health_stays_ok_while_jobs_start_soon(engine: Engine) -> None:
    _beat(engine)
    _queued(engine, 2.0)  # queued 2 s ago: well within the bound
    health = worker_health(engine, stale_after_s=10.0, wait_alert_s=60.0)
    assert health.healthy and not health.degraded and health.queued_jobs == 1
    assert health.reason == "1 job worker(s) beating"


def test_health_follows_a_real_queue_held_then_moving(db_url: str, engine: Engine) -> None:
    with StubServer(latency=0.4) as stub:  # 18 calls, 4 at once: about 2 s per job
        settings = _two_datasets(engine, stub, db_url)
        first = queue.submit(engine, "judge", {"generation_run_id": 1}, created_by="t")
        with Running(engine, settings):
            wait(engine, first.id or 0, ("running",))
            second = queue.submit(engine, "judge", {"generation_run_id": 2}, created_by="t")
            seen: list[bool] = []
            stop = threading.Event()

            def watch() -> None:
                while not stop.is_set():
                    seen.append(worker_health(engine, stale_after_s=10, wait_alert_s=0.5).degraded)
                    time.sleep(0.1)

            watcher = threading.Thread(target=watch)
            watcher.start()
            wait(engine, second.id or 0, ("finished", "failed"))
            stop.set()
            watcher.join()
            after = worker_health(engine, stale_after_s=10, wait_alert_s=0.5)
    # The second job waited for the one slot more than 0.5 s: degraded then; started and
    # finished, nothing waits: not degraded.
    assert True in seen, seen
    assert not after.degraded and after.queued_jobs == 0 and after.oldest_wait_s is None
    with Session(engine) as session:
        assert queue.get_job(session, second.id or 0).status == "finished"
