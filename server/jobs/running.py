"""Running one job: under its lease, its progress written now and then, its end stored
(``run_job``). The server's own worker (``server.jobs.queue.Worker``) and the Celery task
(``server.jobs.celery_app``) both call it, so neither imports the other.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import traceback
from typing import TYPE_CHECKING

from judge.errors import FairJudgeError
from server.jobs.tasks import BatchWaiting, run_task
from server.usecases import jobs as stored
from server.usecases.jobs import (
    RunBusyError,
    count_attempt,
    get_job,
    job_lease,
    report_progress,
    set_job,
    start_job,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings

log = logging.getLogger("fairjudge.jobs")

PROGRESS_EVERY_S = 0.5
"""How often a running job writes its progress (and reads whether it was cancelled)."""


class JobCancelled(Exception):
    """Raised inside a running job when someone asked to cancel it."""


class _Reporter:
    """The progress callback of one running job: writes done/total now and then, and
    raises JobCancelled once the job was asked to stop. Its first call counts the attempt:
    the job's work has begun (its run's lease is held)."""

    def __init__(self, engine: Engine, job_id: int, attempts_before: int) -> None:
        self.engine, self.job_id, self.last = engine, job_id, 0.0
        self.attempt, self.counted = attempts_before + 1, False

    def count(self) -> None:
        if not self.counted:
            count_attempt(self.engine, self.job_id, self.attempt)
            self.counted = True

    def __call__(self, done: int, total: int) -> None:
        self.count()
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S and done < total:
            return
        self.last = now
        if report_progress(self.engine, self.job_id, done, total):
            raise JobCancelled


def run_job(engine: Engine, settings: Settings, job_id: int, *, lease_s: float = 15.0) -> str:
    """Run one job under its lease if no live worker holds it; return its status after.
    ``busy`` means another worker holds it (nothing was done)."""
    try:
        with job_lease(engine, job_id, seconds=lease_s):
            status = _run_held(engine, settings, job_id)
    except RunBusyError:
        return "busy"
    if status == "finished" and settings.server.warm_figures:
        # Once the lease is given back: the job is over, this is for the dashboard.
        from sqlmodel import Session

        from server.usecases.warming import runs_of_result, warm_after_job

        with Session(engine) as session:
            result = get_job(session, job_id).result
        warm_after_job(engine, settings, runs_of_result(result))
    return status


def _run_held(engine: Engine, settings: Settings, job_id: int) -> str:
    started = start_job(engine, job_id, f"{socket.gethostname()}:{os.getpid()}")
    if isinstance(started, str):  # done already, or cancelled before it started
        return started
    kind, params, attempts_before = started
    reporter = _Reporter(engine, job_id, attempts_before)
    try:
        try:
            result = run_task(
                kind,
                engine,
                settings,
                params,
                reporter,
                lambda partial: set_job(engine, job_id, result=partial),
            )
        except RunBusyError as exc:  # another job or process is on the same run: wait for it
            # Waiting is not an attempt: the count stays where it was.
            set_job(engine, job_id, status="queued", error=f"waiting: {exc}")
            return "queued"
        except BatchWaiting as waiting:  # its batches run at the provider: off the slot
            reporter.count()
            set_job(
                engine, job_id, status="queued", result=waiting.result, error=None,
                not_before=time.time() + waiting.after_s,
            )  # fmt: skip
            return "waiting"
        except BaseException:
            reporter.count()  # the work began and ended in an error: that was an attempt
            raise
        reporter.count()
    except JobCancelled:
        set_job(engine, job_id, now=("finished_at",), status="cancelled")
        return "cancelled"
    except FairJudgeError as exc:
        set_job(engine, job_id, now=("finished_at",), status="failed", error=str(exc))
        return "failed"
    except Exception as exc:  # a bug: keep the worker alive, the job says what happened
        log.error("job %s failed:\n%s", job_id, traceback.format_exc())
        message = f"unexpected {type(exc).__name__}: {exc} (the server log has the traceback)"
        set_job(engine, job_id, now=("finished_at",), status="failed", error=message)
        return "failed"
    status, why = stored.ending(engine, result)  # "failed" for a run mostly unscored
    said = {} if why is None else {"error": why}  # a finished job keeps its resumed note
    set_job(
        engine, job_id, now=("finished_at",), status=status, result=result, not_before=None,
        **said,
    )  # fmt: skip
    return status
