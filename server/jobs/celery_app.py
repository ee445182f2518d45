"""Jobs on Celery workers, for users past one machine (``[workers] broker_url``; the why of
each setting is in docs/scaling.md).

Two tasks: ``fairjudge.job`` runs a job, and for a judge or generation job only opens it:
makes its run and cuts the run's items into parts (``server.usecases.parts``), each sent as a
``fairjudge.part`` task, so that several workers share one run. Every other kind runs whole in
the task that took it (``running.run_job``, under the job's lease, as the local worker runs it).

Delivery is at least once, and a task may run twice: it is acknowledged only once it ends
(``task_acks_late``), a task whose worker process was lost is handed back
(``task_reject_on_worker_lost``), and a worker holds one task beyond the ones it runs
(``worker_prefetch_multiplier = 1``) so that a worker that dies strands as little as
possible. Running a task twice costs nothing: a job or part resumes from the store, and a
part held by a live worker is left to it (its lease).

Each worker also keeps watch (``Watch``), every few seconds: it beats in ``workerbeat``;
it sends again the parts left ``running`` by a worker that stopped beating (killed, its
machine gone), rather than wait for the broker to hand the task back (with Redis, only once
the visibility timeout passed); and when the broker's Redis lost its data (a restart without
persistence, seen as its marker key gone) it sends again every queued job and part.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import traceback
from functools import cache
from typing import TYPE_CHECKING

from celery import Celery

from judge.errors import ConfigError, FairJudgeError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings

__all__ = ["Watch", "check_broker", "make_app", "send_job", "send_part", "start_worker"]

log = logging.getLogger("fairjudge.jobs")

QUEUE = "fairjudge"
MARKER_KEY = "fairjudge:broker-marker"
"""A key the workers keep in the broker's Redis: gone means Redis lost its data."""
WATCH_EVERY_S = 2.0


class _Worker:
    """What the tasks of this worker process use: its store and settings, set by
    ``start_worker`` before the first task."""

    engine: Engine | None = None
    settings: Settings | None = None
    name: str = ""


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: say only its scheme
        return url.split("://", 1)[0] + "://..."


def make_app(broker_url: str, *, visibility_timeout_s: int = 3600) -> Celery:
    """The Celery app for this broker (redis:// or amqp://)."""
    app = Celery("fairjudge", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=QUEUE,
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        broker_transport_options={"visibility_timeout": visibility_timeout_s},
    )

    @app.task(name="fairjudge.job", ignore_result=True)
    def job_task(job_id: int) -> str:
        return _run_job(app, job_id)

    @app.task(name="fairjudge.part", ignore_result=True)
    def part_task(job_id: int, number: int) -> str:
        return _run_part(job_id, number)

    return app


@cache
def _app_for(broker_url: str, visibility_timeout_s: int) -> Celery:
    return make_app(broker_url, visibility_timeout_s=visibility_timeout_s)


def app_of(settings: Settings) -> Celery:
    cfg = settings.workers
    if not cfg.broker_url:
        raise ConfigError("no [workers] broker_url: jobs run on the server's own worker")
    return _app_for(cfg.broker_url, cfg.visibility_timeout_s)


def send_job(settings: Settings, job_id: int) -> None:
    """Hand a queued job to the broker."""
    app_of(settings).send_task("fairjudge.job", args=[job_id], queue=QUEUE)


def send_part(app: Celery, job_id: int, number: int) -> None:
    app.send_task("fairjudge.part", args=[job_id, number], queue=QUEUE)


def check_broker(settings: Settings) -> None:
    """Refuse to start when the broker cannot be reached, with one line naming it."""
    url = settings.workers.broker_url
    try:
        with app_of(settings).connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=5)
    except Exception as exc:
        raise ConfigError(
            f"the Celery broker at {redact(url)} cannot be reached ({type(exc).__name__}); "
            "start it, or fix [workers] broker_url"
        ) from None


def _state() -> tuple[Engine, Settings]:
    if _Worker.engine is None or _Worker.settings is None:
        raise RuntimeError("a FairJudge task ran outside `fairjudge worker`")
    return _Worker.engine, _Worker.settings


def _run_job(app: Celery, job_id: int) -> str:
    from server.jobs.running import run_job
    from server.usecases import parts
    from server.usecases.jobs import DONE, get_job, job_request, set_job, start_job

    engine, settings = _state()
    from sqlmodel import Session

    with Session(engine) as session:
        job = get_job(session, job_id)
        kind, status = job.kind, job.status
        known = (job.result or {}).get(parts.SPLIT_KINDS.get(kind, ""))
    if status in DONE:
        return status
    if kind not in parts.SPLIT_KINDS:
        return run_job(engine, settings, job_id, lease_s=settings.server.job_lease_s)
    started = start_job(engine, job_id, _Worker.name)
    if isinstance(started, str):
        return started
    _, params, attempts_before = started
    try:
        opened = parts.open_parts(engine, settings, job_id, kind, job_request(kind, params), known)
    except FairJudgeError as exc:
        set_job(engine, job_id, now=("finished_at",), status="failed", error=str(exc))
        return "failed"
    except Exception as exc:  # a bug: the job says what happened, the worker goes on
        log.error("job %s could not be opened:\n%s", job_id, traceback.format_exc())
        message = f"unexpected {type(exc).__name__}: {exc} (the worker's log has the traceback)"
        set_job(engine, job_id, now=("finished_at",), status="failed", error=message)
        return "failed"
    result = {parts.SPLIT_KINDS[kind]: opened.run_id, "parts": opened.total}
    set_job(engine, job_id, result=result, attempts=attempts_before + 1)
    parts.mark_sent(engine, job_id, opened.parts)
    for number in opened.parts:
        send_part(app, job_id, number)
    if not opened.parts:  # every part was done already (the job was opened twice)
        parts.finish_if_done(engine, settings, job_id)
    return "running"


def _run_part(job_id: int, number: int) -> str:
    from server.usecases import parts

    engine, settings = _state()
    status = parts.run_part(engine, settings, job_id, number, _Worker.name)
    log.info("job %s, part %s: %s", job_id, number, status)
    return status


class Watch:
    """A worker's watch thread: its heartbeat, parts stranded by dead workers, and a broker
    that lost its messages (module docstring)."""

    def __init__(self, app: Celery, engine: Engine, settings: Settings, name: str) -> None:
        self.app, self.engine, self.settings, self.name = app, engine, settings, name
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="fairjudge-watch", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        from server.usecases.jobs import worker_beat

        self.stop.set()
        self.thread.join(timeout=5)
        try:
            worker_beat(self.engine, self.name, stopping=True)
        except Exception:
            log.warning("could not record that worker %s stopped", self.name)

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                self.once()
            except Exception:  # a busy or restarting store or broker: look again soon
                log.warning("the worker's watch failed:\n%s", traceback.format_exc())
            self.stop.wait(WATCH_EVERY_S)

    def once(self) -> None:
        from server.usecases import parts
        from server.usecases.jobs import set_job, worker_beat

        worker_beat(self.engine, self.name)
        if self._broker_lost():
            jobs, lost = parts.unsent(self.engine)
            log.warning(
                "the broker's Redis lost its data: sending %d job(s) and %d part(s) again",
                len(jobs), len(lost),
            )  # fmt: skip
            for job_id in jobs:
                self.app.send_task("fairjudge.job", args=[job_id], queue=QUEUE)
            self._resend(lost)
        silent = self.settings.server.job_lease_s
        stale = parts.stale_parts(self.engine, silent_after_s=silent)
        if stale:
            log.warning("parts left by workers that stopped beating, sent again: %s", stale)
            self._resend(stale)
        for job_id in parts.stale_jobs(self.engine, silent_after_s=silent):
            log.warning("job %s was left by a worker that stopped beating: sent again", job_id)
            set_job(self.engine, job_id, worker=None)
            self.app.send_task("fairjudge.job", args=[job_id], queue=QUEUE)

    def _resend(self, pairs: list[tuple[int, int]]) -> None:
        from server.usecases import parts

        for job_id, number in pairs:
            parts.mark_sent(self.engine, job_id, [number])
            send_part(self.app, job_id, number)

    def _broker_lost(self) -> bool:
        """Whether the broker is a Redis that lost its data since this worker last looked
        (its marker key is gone); the marker is set again either way."""
        if not self.settings.workers.broker_url.startswith(("redis://", "rediss://")):
            return False
        import redis

        client = redis.Redis.from_url(self.settings.workers.broker_url, socket_timeout=5)
        try:
            return bool(client.set(MARKER_KEY, self.name, nx=True))
        finally:
            client.close()


def start_worker(engine: Engine, settings: Settings, *, concurrency: int) -> None:
    """Run a Celery worker in this process until it is stopped (Ctrl-C, SIGTERM): it takes
    ``concurrency`` tasks at once, each in a thread, and keeps watch meanwhile."""
    app = app_of(settings)
    _Worker.engine, _Worker.settings = engine, settings
    _Worker.name = f"{socket.gethostname()}:{os.getpid()}"
    watch = Watch(app, engine, settings, _Worker.name)
    # The first watch marks the broker seen, so a worker starting on a fresh Redis does not
    # take it for one that lost its data (queued rows are sent again all the same: a job
    # queued while no broker ran is in no queue).
    watch.once()
    watch.start()
    if settings.server.warm_figures:  # pages computed ahead on a thread of their own
        from server.usecases.warming import warmer

        warmer(engine, settings)
    try:
        app.worker_main(
            [
                "worker",
                "--pool=threads",
                f"--concurrency={concurrency}",
                f"--queues={QUEUE}",
                f"--hostname=fairjudge-{_Worker.name.replace(':', '-')}@%h",
                "--without-gossip",
                "--without-mingle",
                "--loglevel=INFO",
            ]
        )
    finally:
        watch.close()
