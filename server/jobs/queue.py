"""Jobs in the store, and the worker that runs them.

A job is a ``Job`` row plus a function from ``tasks.TASKS``. A worker holds the job with a
lease in the ``runlease`` table (kind ``job``, the same lease that keeps two processes off
one judge run), renewed by a heartbeat; the lease of a killed worker lapses, and the next
worker to look takes the job over and runs its function again, which does only what the
store does not hold yet. Nothing here knows Flask or click: the API, the dashboard and the
CLI call these functions, and another job engine (Celery) could call ``run_job``.

Two jobs on one run cannot both work on it: the use case takes the run's own lease, and the
second job waits in the queue until the first lets go (``RunBusyError`` -> back to queued).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from judge.errors import FairJudgeError, InvalidInputError, NotFoundError
from judge.runs import RunBusyError, run_lease
from judge.store.tables import Job, utcnow
from server.jobs.tasks import check_params, check_targets, run_task

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings

log = logging.getLogger("fairjudge.jobs")

STATUSES = ("queued", "running", "finished", "failed", "cancelled")
DONE = ("finished", "failed", "cancelled")
PROGRESS_EVERY_S = 0.5
"""How often a running job writes its progress (and reads whether it was cancelled)."""


class JobStateError(InvalidInputError):
    """The job is in a state that does not allow this (HTTP 409)."""


class JobCancelled(Exception):
    """Raised inside a running job when someone asked to cancel it."""


def submit(
    engine: Engine,
    kind: str,
    params: dict[str, Any],
    *,
    created_by: str | None = None,
    settings: Settings | None = None,
) -> Job:
    """Queue a job of ``kind``; its parameters are checked now, not when it runs (with
    ``settings``, also the endpoint it names)."""
    checked = check_params(kind, params)
    with Session(engine) as session:
        check_targets(session, kind, checked, settings)
        job = Job(kind=kind, params=checked, created_by=created_by)
        session.add(job)
        session.commit()
        session.refresh(job)
        return job


def get_job(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise NotFoundError(f"no job {job_id}")
    return job


def list_jobs(
    session: Session,
    *,
    status: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[Job], int]:
    """Newest first: one page of jobs and how many match in all."""
    query = select(Job)
    counted = select(func.count()).select_from(Job)
    for column, value in ((Job.status, status), (Job.kind, kind)):
        if value is not None:
            query = query.where(col(column) == value)
            counted = counted.where(col(column) == value)
    rows = session.exec(query.order_by(col(Job.id).desc()).offset(offset).limit(limit)).all()
    return list(rows), int(session.exec(counted).one())


def cancel_job(engine: Engine, job_id: int) -> Job:
    """A queued job is cancelled at once; a running one stops at its next progress report
    (within about half a second of a result arriving), keeping what it stored."""
    with Session(engine) as session:
        job = get_job(session, job_id)
        if job.status in DONE:
            raise JobStateError(f"job {job_id} is {job.status}; there is nothing to cancel")
        if job.status == "queued":
            job.status, job.finished_at = "cancelled", utcnow()
        else:
            job.cancel_requested = True
        session.add(job)
        session.commit()
        session.refresh(job)
        return job


def resume_job(engine: Engine, job_id: int) -> Job:
    """Put a failed or cancelled job back in the queue; it continues from what is stored."""
    with Session(engine) as session:
        job = get_job(session, job_id)
        if job.status == "finished":
            raise JobStateError(f"job {job_id} is finished; start a new job to run it again")
        if job.status in ("failed", "cancelled"):
            job.status, job.error, job.cancel_requested, job.finished_at = (
                "queued",
                None,
                False,
                None,
            )
            session.add(job)
            session.commit()
            session.refresh(job)
        return job


def _set(engine: Engine, job_id: int, **values: Any) -> None:
    with Session(engine) as session:
        session.execute(update(Job).where(col(Job.id) == job_id).values(**values))
        session.commit()


class _Reporter:
    """The progress callback of one running job: writes done/total now and then, and
    raises JobCancelled once the job was asked to stop."""

    def __init__(self, engine: Engine, job_id: int) -> None:
        self.engine, self.job_id, self.last = engine, job_id, 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S and done < total:
            return
        self.last = now
        with Session(self.engine) as session:
            session.execute(
                update(Job).where(col(Job.id) == self.job_id).values(done=done, total=total)
            )
            session.commit()
            cancel = session.exec(select(Job.cancel_requested).where(Job.id == self.job_id)).one()
        if cancel:
            raise JobCancelled


def run_job(engine: Engine, settings: Settings, job_id: int, *, lease_s: float = 15.0) -> str:
    """Run one job under its lease if no live worker holds it; return its status after.
    ``busy`` means another worker holds it (nothing was done)."""
    try:
        with run_lease(engine, "job", job_id, seconds=lease_s):
            return _run_held(engine, settings, job_id)
    except RunBusyError:
        return "busy"


def _run_held(engine: Engine, settings: Settings, job_id: int) -> str:
    with Session(engine) as session:
        job = get_job(session, job_id)
        if job.status in DONE:
            return job.status
        if job.cancel_requested:
            job.status, job.finished_at = "cancelled", utcnow()
            session.add(job)
            session.commit()
            return "cancelled"
        if job.status == "running":
            log.info("job %s: its worker stopped; resuming (attempt %s)", job_id, job.attempts + 1)
        kind, params, attempts = job.kind, dict(job.params), job.attempts + 1
    _set(
        engine,
        job_id,
        status="running",
        attempts=attempts,
        started_at=utcnow(),
        worker=f"{socket.gethostname()}:{os.getpid()}",
        error=None,
    )
    try:
        result = run_task(
            kind,
            engine,
            settings,
            params,
            _Reporter(engine, job_id),
            lambda partial: _set(engine, job_id, result=partial),
        )
    except JobCancelled:
        _set(engine, job_id, status="cancelled", finished_at=utcnow())
        return "cancelled"
    except RunBusyError as exc:  # another job or process is on the same run: wait for it
        _set(engine, job_id, status="queued", error=f"waiting: {exc}")
        return "queued"
    except FairJudgeError as exc:
        _set(engine, job_id, status="failed", error=str(exc), finished_at=utcnow())
        return "failed"
    except Exception as exc:  # a bug: keep the worker alive, the job says what happened
        log.error("job %s failed:\n%s", job_id, traceback.format_exc())
        message = f"unexpected {type(exc).__name__}: {exc} (the server log has the traceback)"
        _set(engine, job_id, status="failed", error=message, finished_at=utcnow())
        return "failed"
    _set(engine, job_id, status="finished", result=result, finished_at=utcnow())
    return "finished"


def runnable(session: Session) -> list[int]:
    """Jobs a worker may try, oldest first: queued ones, and running ones (their worker may
    have died; the lease decides)."""
    rows = session.exec(
        select(Job.id)
        .where(col(Job.status).in_(("queued", "running")))
        .order_by(col(Job.id))
        .limit(100)
    ).all()
    return [int(r) for r in rows if r is not None]


@dataclass
class Worker:
    """Runs jobs from the store, at most ``slots`` at once, until ``stop`` is set."""

    engine: Engine
    settings: Settings
    stop: threading.Event

    def run(self) -> None:
        cfg = self.settings.server
        active: dict[int, threading.Thread] = {}
        log.info(
            "job worker %s:%s: %s jobs at once", socket.gethostname(), os.getpid(), cfg.job_slots
        )
        while not self.stop.is_set():
            for job_id in [j for j, t in active.items() if not t.is_alive()]:
                del active[job_id]
            if len(active) < cfg.job_slots:
                for job_id in self._candidates(active):
                    thread = threading.Thread(
                        target=self._one, args=(job_id,), name=f"job-{job_id}", daemon=True
                    )
                    active[job_id] = thread
                    thread.start()
                    if len(active) >= cfg.job_slots:
                        break
            self.stop.wait(cfg.job_poll_s)
        for thread in active.values():
            thread.join(timeout=1)

    def _candidates(self, active: dict[int, threading.Thread]) -> Iterator[int]:
        try:
            with Session(self.engine) as session:
                ids = runnable(session)
        except Exception:  # a busy or restarting database: look again next poll
            log.warning("could not read the job queue:\n%s", traceback.format_exc())
            return
        yield from (i for i in ids if i not in active)

    def _one(self, job_id: int) -> None:
        status = run_job(
            self.engine, self.settings, job_id, lease_s=self.settings.server.job_lease_s
        )
        if status != "busy":
            log.info("job %s: %s", job_id, status)
