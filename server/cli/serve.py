"""``fairjudge serve``: the web API and dashboard under gunicorn, with a job worker beside it;
``fairjudge worker``: the job worker alone (for more workers, or one on another machine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

import click

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
    worker = None if no_worker else _start_worker(ctx)
    cfg = settings.server
    err().print(
        f"FairJudge serving on http://{cfg.host}:{cfg.port}/ (API /api/v1, docs "
        f"/api/v1/docs/swagger); {cfg.workers} web workers x {cfg.threads} threads"
        + ("" if worker is None else f"; job worker pid {worker.pid}")
    )
    try:
        _Gunicorn(lambda: _app(ctx), _gunicorn_options(settings)).run()
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            worker.wait(timeout=10)


@click.command()
@click.option(
    "--exit-with-parent",
    is_flag=True,
    hidden=True,
    help="Stop when the process that started this one ends (used by serve).",
)
@click.pass_obj
def worker(ctx: Context, exit_with_parent: bool) -> None:
    """Run queued jobs (generation, judging, campaign pulls) until stopped; resumes jobs
    whose worker died. Several workers may share one database."""
    import logging

    from server.jobs.queue import Worker
    from server.usecases import open_store, preload_runners

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] [worker] %(message)s")
    settings = ctx.settings()
    engine = open_store(settings, migrate=False)
    # A worker lives long: load the judging and generation code (openai among it, ~1 s) now
    # rather than when the first job has started and is being timed by its user.
    preload_runners()

    stop = threading.Event()
    if exit_with_parent:
        _watch_parent(os.getppid(), stop)
    err().print(f"job worker {os.getpid()} running ({settings.server.job_slots} jobs at once)")
    try:
        Worker(engine, settings, stop).run()
    except KeyboardInterrupt:
        stop.set()


def _app(ctx: Context) -> Any:
    from server import create_app

    return create_app({"SETTINGS": ctx.settings()})


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
        # gunicorn's default access-log format has no headers, so keys never reach the log.
        "accesslog": "-",
        "errorlog": "-",
        "loglevel": "info",
    }


def _start_worker(ctx: Context) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "server.cli"]
    if ctx.config_path:
        args += ["--config", ctx.config_path]
    if ctx.database_url:
        args += ["--db", ctx.database_url]
    return subprocess.Popen([*args, "worker", "--exit-with-parent"], preexec_fn=_die_with_parent)


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
