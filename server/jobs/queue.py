"""The worker that runs jobs; the job rows themselves (queue, read, cancel, resume) are kept
by ``server.usecases.jobs`` and re-exported here.

A job is a ``Job`` row plus a function from ``tasks.TASKS``. A worker holds the job with a
lease in the ``runlease`` table (kind ``job``, the same lease that keeps two processes off
one judge run), renewed by a heartbeat; the lease of a killed worker lapses, and the next
worker to look takes the job over and runs its function again, which does only what the
store does not hold yet. Nothing here knows Flask or click: the API, the dashboard and the
CLI call these functions, and Celery calls ``run_job`` (``server.jobs.running``) as this
worker does.

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from judge.errors import InvalidInputError, NotFoundError
from server.jobs.running import JobCancelled, run_job
from server.queries import runnable_job_ids
from server.tables import Job
from server.usecases import jobs as stored
from server.usecases.batch import check_job_transport
from server.usecases.gates import check_size
from server.usecases.jobs import (
    BEAT_EVERY_S,
    DONE,
    STATUSES,
    JobStateError,
    cancel_job,
    check_params,
    get_job,
    list_jobs,
    runnable,
    store_job,
    worker_beat,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from server.usecases.requests import Request


__all__ = [
    "DONE",
    "STATUSES",
    "InvalidInputError",
    "JobCancelled",
    "JobStateError",
    "NotFoundError",
    "Worker",
    "cancel_job",
    "get_job",
    "list_jobs",
    "resume_job",
    "run_job",
    "runnable",
    "submit",
]

log = logging.getLogger("fairjudge.jobs")

WAIT_RETRY_S = 2.0
"""How long a worker leaves a job whose run another job or process holds before it looks
again (the job waits in the queue meanwhile)."""


def submit(
    engine: Engine,
    kind: str,
    params: Mapping[str, Any] | Request,
    *,
    created_by: str | None = None,
    settings: Settings | None = None,
    gated: bool = False,
    confirmed_calls: int | None = None,
    ask: str | None = None,
) -> Job:
    """Queue a job of ``kind`` (its request, or the request's fields as a mapping): the
    parameters are checked now, not when it runs (with ``settings``, also the endpoint they
    name and the rubrics); ``gated`` (with ``settings``): first ``check_size``, so a job over
    the server's limits (or with a reason to ``ask``) is queued only with ``confirmed_calls``
    covering its calls. Where ``[workers] broker_url`` is set the job is handed to the
    Celery workers; else the server's own worker finds it in the store."""
    checked = check_params(kind, params)
    if settings is not None:
        check_job_transport(settings, kind, checked)
    if gated and settings is not None:
        check_size(engine, settings, kind, checked, confirmed_calls=confirmed_calls, ask=ask)
    job = store_job(engine, kind, checked, created_by=created_by, settings=settings)
    _dispatch(settings, job)
    return job


def resume_job(engine: Engine, job_id: int, *, settings: Settings | None = None) -> Job:
    """Put a failed or cancelled job back in the queue (and on the broker, with Celery)."""
    job = stored.resume_job(engine, job_id)
    if job.status == "queued":
        _dispatch(settings, job)
    return job


def _dispatch(settings: Settings | None, job: Job) -> None:
    if settings is None or not settings.workers.broker_url or job.id is None:
        return
    from server.jobs.celery_app import send_job

    send_job(settings, job.id)


def uses_celery(settings: Settings) -> bool:
    """Whether jobs go to Celery workers (``[workers] broker_url``) rather than the server's
    own worker."""
    return bool(settings.workers.broker_url)


@dataclass
class Worker:
    """Runs jobs from the store, at most ``slots`` at once, until ``stop`` is set."""

    engine: Engine
    settings: Settings
    stop: threading.Event
    _waiting: dict[int, float] = field(default_factory=dict)
    """Job -> when to try it again, for jobs that found their run busy."""

    def run(self) -> None:
        cfg = self.settings.server
        active: dict[int, threading.Thread] = {}
        name = f"{socket.gethostname()}:{os.getpid()}"
        log.info("job worker %s: %s jobs at once", name, cfg.job_slots)
        if cfg.warm_figures:  # pages computed ahead on a thread of their own, off the slots
            from server.usecases.warming import warmer

            warmer(self.engine, self.settings)
        last_beat = 0.0
        try:
            while not self.stop.is_set():
                if time.monotonic() - last_beat >= BEAT_EVERY_S:
                    last_beat = self._beat(name) or last_beat
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
        finally:
            # Also on SIGTERM or Ctrl-C (a KeyboardInterrupt out of the wait): a worker that
            # stops says so, or health would take it for one that went silent.
            for thread in active.values():
                thread.join(timeout=1)
            self._beat(name, stopping=True)
            if cfg.warm_figures:
                from server.usecases.warming import close_warmer

                close_warmer(self.engine)

    def _beat(self, name: str, *, stopping: bool = False) -> float | None:
        """Renew this worker's heartbeat row; the time it was written, or None when the
        store could not be written (the next loop tries again)."""
        try:
            worker_beat(self.engine, name, stopping=stopping)
        except Exception:  # a busy or restarting database must not stop the worker
            log.warning("could not write the worker's heartbeat:\n%s", traceback.format_exc())
            return None
        return time.monotonic()

    def _candidates(self, active: dict[int, threading.Thread]) -> Iterator[int]:
        try:
            with Session(self.engine) as session:
                # not the jobs waiting for their batches at the provider (``not_before``)
                ids = runnable_job_ids(session, limit=100, now=time.time())
        except Exception:  # a busy or restarting database: look again next poll
            log.warning("could not read the job queue:\n%s", traceback.format_exc())
            return
        now = time.monotonic()
        yield from (i for i in ids if i not in active and self._waiting.get(i, 0.0) <= now)

    def _one(self, job_id: int) -> None:
        status = run_job(
            self.engine, self.settings, job_id, lease_s=self.settings.server.job_lease_s
        )
        if status == "queued":  # its run is busy: look again in a while, not every poll
            self._waiting[job_id] = time.monotonic() + WAIT_RETRY_S
        else:
            self._waiting.pop(job_id, None)
        if status != "busy":
            log.info("job %s: %s", job_id, status)
