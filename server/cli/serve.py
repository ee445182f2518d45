"""``fairjudge serve``: the web API and dashboard under gunicorn, with a job worker beside it;
``fairjudge worker``: the job worker alone (for more workers, or one on another machine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import click

from server import create_app
from server.cli.output import err

if TYPE_CHECKING:
    from server.cli import Context


@click.command()
@click.option("--host", help="Address to listen on (default: [server] host, 127.0.0.1).")
@click.option("--port", type=int, help="Port to listen on (default: [server] port, 5000).")
@click.option("--workers", type=int, help="gunicorn worker processes (default: [server] workers).")
@click.option(
    "--no-worker",
    is_flag=True,
    help="Do not start a job worker (jobs wait for `fairjudge worker`).",
)
@click.pass_obj
def serve(
    ctx: Context, host: str | None, port: int | None, workers: int | None, no_worker: bool
) -> None:
    """Run the FairJudge server: JSON API under /api/v1, dashboard at /, and a job worker.

    The database must be at the newest schema revision (`fairjudge db upgrade`). Jobs that
    were running when the server stopped are resumed by the worker.
    """
    from server.usecases import open_store

    settings = ctx.settings(**{"server.host": host, "server.port": port, "server.workers": workers})
    open_store(settings, migrate=False).dispose()  # refuse a stale schema now
    celery = bool(settings.workers.broker_url)
    if celery:  # jobs go to the Celery workers (`fairjudge worker` on each machine)
        from server.jobs.celery_app import check_broker

        check_broker(settings)
    worker = (
        None
        if no_worker or celery
        else Supervised(_start_worker(ctx), lambda: _start_worker(ctx, die_with_parent=False))
    )
    cfg = settings.server
    err().print(
        f"FairJudge serving on http://{cfg.host}:{cfg.port}/ (API /api/v1, docs "
        f"/api/v1/docs/swagger); {cfg.workers} web workers x {cfg.threads} threads"
        + ("" if worker is None else f"; job worker pid {worker.pid} (restarted if it dies)")
        + ("; jobs go to the Celery workers ([workers] broker_url)" if celery else "")
    )
    try:
        _Gunicorn(lambda: _app(ctx), _gunicorn_options(settings)).run()
    finally:
        if worker is not None:
            worker.close()


@click.command()
@click.option(
    "--exit-with-parent",
    is_flag=True,
    hidden=True,
    help="Stop when the process that started this one ends (used by serve).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    help="Celery only: tasks this worker runs at once (default: [server] job_slots); each "
    "task makes up to its endpoint's `concurrency` calls at once.",
)
@click.pass_obj
def worker(ctx: Context, exit_with_parent: bool, concurrency: int | None) -> None:
    """Run queued jobs (generation, judging, audits, campaign pulls...) until stopped; resumes
    jobs whose worker died. Several workers may share one database. With [workers]
    broker_url set, this is a Celery worker: start one on each machine, with the same
    config (docs/scaling.md)."""
    import logging

    from server.jobs.queue import Worker
    from server.usecases import open_store
    from server.usecases.runs import preload_runners

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] [worker] %(message)s")
    # The HTTP clients log every request at INFO: a line per model call (10,000 for a
    # 10,000-judgment run) would bury what the worker's log is for. Their warnings stay.
    for name in ("httpx", "httpx2", "httpcore", "httpcore2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    settings = ctx.settings()
    celery = bool(settings.workers.broker_url)
    if celery and settings.database_url.startswith("sqlite"):
        raise click.UsageError(
            "Celery workers need a database every machine reaches: set database_url to a "
            "PostgreSQL URL ([workers] broker_url is set)"
        )
    engine = open_store(settings, migrate=False)
    # A worker lives long: load the judging and generation code (openai among it, ~1 s) now
    # rather than when the first job has started and is being timed by its user.
    preload_runners()
    if celery:
        from server.jobs.celery_app import check_broker, start_worker

        check_broker(settings)
        slots = concurrency or settings.server.job_slots
        err().print(f"Celery worker {os.getpid()} running ({slots} tasks at once)")
        start_worker(engine, settings, concurrency=slots)
        return

    stop = threading.Event()
    if exit_with_parent:
        _watch_parent(os.getppid(), stop)
    err().print(f"job worker {os.getpid()} running ({settings.server.job_slots} jobs at once)")
    try:
        Worker(engine, settings, stop).run()
    except KeyboardInterrupt:
        stop.set()


def _app(ctx: Context) -> Any:
    return create_app({"SETTINGS": ctx.settings()})


ACCESS_LOG_FORMAT = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(L)ss "%(a)s"'
"""gunicorn's access-log line without the query string and the Referer: host, time, method,
path, protocol, status, bytes, seconds and user agent."""


def _gunicorn_options(settings: Any) -> dict[str, Any]:
    cfg = settings.server
    return {
        "bind": f"{cfg.host}:{cfg.port}",
        "workers": cfg.workers,
        "threads": cfg.threads,
        "worker_class": "gthread",
        "timeout": 120,
        "graceful_timeout": 10,
        # gunicorn 25+ opens a control socket in ~/.gunicorn by default: one per machine
        # would clash between servers, and nothing here uses it.
        "control_socket_disable": True,
        # gunicorn's default access-log format writes the request line with its query string
        # and the Referer header; a key pasted into a URL (`?api_key=...`, refused with 401)
        # would reach the log that way. This format has the path only, and no headers but
        # the user agent.
        "accesslog": "-",
        "access_log_format": ACCESS_LOG_FORMAT,
        "errorlog": "-",
        "loglevel": "info",
    }


class Supervised:
    """The job worker beside ``serve``, restarted when it ends while the server runs: after
    1 s, then twice as long after each quick end (at most RESTART_MAX_S), and back to 1 s
    once a worker has lived RESTART_RESET_S. A worker that was killed loses nothing: the
    jobs it held are taken over from their leases by the next one."""

    RESTART_MAX_S = 60.0
    RESTART_RESET_S = 60.0

    def __init__(self, first: subprocess.Popen[bytes], restart: Any) -> None:
        self._start, self._clock = restart, time.monotonic
        self.proc = first
        self.started = self._clock()
        self.stop = threading.Event()
        self.restarts = 0
        self._thread = threading.Thread(target=self._watch, name="worker-supervisor", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _watch(self) -> None:
        delay = 1.0
        while not self.stop.wait(0.5):
            code = self.proc.poll()
            if code is None:
                continue
            if self._clock() - self.started >= self.RESTART_RESET_S:
                delay = 1.0
            # No exit code: gunicorn's arbiter reaps every child of this process, the job
            # worker too, so the code Popen sees is not the worker's.
            err().print(f"job worker pid {self.proc.pid} ended; starting another in {delay:g} s")
            if self.stop.wait(delay):
                return
            delay = min(delay * 2, self.RESTART_MAX_S)
            try:
                proc = self._start()
            except OSError as exc:  # no process could be made now: try again after the delay
                err().print(f"could not start a job worker ({exc}); trying again in {delay:g} s")
                continue
            self.proc, self.started = proc, self._clock()
            self.restarts += 1
            err().print(f"job worker restarted: pid {self.proc.pid}")

    def close(self) -> None:
        self.stop.set()
        self._thread.join(timeout=5)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _start_worker(ctx: Context, *, die_with_parent: bool = True) -> subprocess.Popen[bytes]:
    """The job worker as a child process. ``die_with_parent`` has Linux kill it when the
    thread that starts it ends (PR_SET_PDEATHSIG is tied to that thread): right for the first
    worker, started by the main thread; the supervisor's restarts go without it and rely on
    the worker's own ``--exit-with-parent`` watch, or they would die with the supervisor."""
    args = [sys.executable, "-m", "server.cli"]
    if ctx.config_path:
        args += ["--config", ctx.config_path]
    if ctx.database_url:
        args += ["--db", ctx.database_url]
    return subprocess.Popen(
        [*args, "worker", "--exit-with-parent"],
        preexec_fn=_die_with_parent if die_with_parent else None,
    )


def _die_with_parent() -> None:
    """In the child: have Linux kill it when its parent dies (PR_SET_PDEATHSIG), so a
    killed server does not leave an orphan worker running jobs."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: _watch_parent covers it
        pass


def _watch_parent(parent: int, stop: threading.Event) -> None:
    def watch() -> None:
        while not stop.wait(1.0):
            if os.getppid() != parent:
                os._exit(1)  # as abrupt as the parent's end: the lease hands the jobs on

    threading.Thread(target=watch, daemon=True).start()


def _gunicorn_class() -> type:
    from gunicorn.app.base import BaseApplication

    class Gunicorn(BaseApplication):  # type: ignore[misc]
        def __init__(self, factory: Any, options: dict[str, Any]) -> None:
            self.factory, self.options = factory, options
            super().__init__()

        def load_config(self) -> None:
            for key, value in self.options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return self.factory()

    return Gunicorn


def _Gunicorn(factory: Any, options: dict[str, Any]) -> Any:  # noqa: N802
    return _gunicorn_class()(factory, options)
