"""Figures the API serves kept, and never a request held longer than a bound for them.

A judge run's report, agreement and diagnostics take seconds to tens of seconds on a large
run. The routes serve them kept: from this process's memory (the dashboard's cache), else
from the store (``dashboardfigure``: computed ahead by the job worker, or by an earlier
request), both keyed by the run's version (``run_version``: a write to the run's rows makes
them stale, a write to another run's does not). Figures kept nowhere are computed on a
thread of their own, one computation per page however many clients ask (they share it); a
request waits for it at most ``wait_s`` (``FIGURES_WAIT_S`` in the app's config, else
``WAIT_S``), then gets 202 with ``Retry-After``: asked again, the route serves the figures
once they are kept.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from flask import current_app

from server.dashboard.cache import Computed, FigureCache
from server.dashboard.web import CACHE
from server.db import get_session

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from server.usecases.dashboard import PageKey

WAIT_S = 1.5
"""How long a request waits for figures being computed before it is answered 202."""
TESTING_WAIT_S = 300.0
"""The wait under an app made for tests (``TESTING``) with no ``FIGURES_WAIT_S``: tests on a
busy machine get the figures, not a 202; the tests of the 202 set the bound they need."""
THREADS = 2
"""Figures computed at once in one web worker, beyond which requests queue for them."""

_POOL = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="api-figures")
_FLIGHTS: dict[tuple[Any, str], Future[Computed[Any]]] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Pending:
    """Figures still being computed: how long this request waited, when to ask again."""

    page: str
    judge_run_id: int
    waited_s: float
    retry_after_s: int

    def reply(self) -> tuple[dict[str, Any], int, dict[str, str]]:
        """The 202 answer (``ComputingOut``)."""
        body = {
            "status": "computing",
            "page": self.page,
            "judge_run_id": self.judge_run_id,
            "waited_s": round(self.waited_s, 2),
            "retry_after_s": self.retry_after_s,
            "message": (
                f"the {self.page} of judge run {self.judge_run_id} is being computed; ask "
                f"again in {self.retry_after_s} s"
            ),
        }
        return body, 202, {"Retry-After": str(self.retry_after_s)}


def kept_figures(key: PageKey) -> Any | Pending:
    """The figures of ``key`` at the run's version now: kept in memory, kept in the store,
    or computed within the wait; else ``Pending``. Errors of the computation (an unknown
    run, a bad option) are raised here, as they would be computed inline."""
    from server.usecases.dashboard import run_version
    from server.usecases.figures import read, signing_key, version_text

    settings: Settings = current_app.config["SETTINGS"]
    engine: Engine = current_app.extensions["fairjudge_engine"]
    cache: FigureCache = current_app.extensions.setdefault(CACHE, FigureCache())
    session = get_session()
    version = run_version(session, key.judge_run_id)
    found = cache.peek(key, version)
    if found is not None:
        return found.value
    text, sign = version_text(version, settings), signing_key(settings)
    try:
        stored = read(session, key, text, sign)
    except Exception as exc:  # the store could not be read: compute from the rows
        session.rollback()
        current_app.logger.warning("kept figures of %s not read: %s", key, exc)
        stored = None
    if stored is not None:
        cache.put(key, version, Computed(stored.value, stored.at, stored.seconds, True))
        return stored.value
    start = time.monotonic()
    future = _flight(engine, settings, key, text, sign)
    wait = current_app.config.get("FIGURES_WAIT_S")
    if wait is None:
        wait = TESTING_WAIT_S if current_app.testing else WAIT_S
    try:
        made = future.result(timeout=float(wait))
    except FutureTimeout:
        waited = time.monotonic() - start
        return Pending(key.page, key.judge_run_id, waited, retry_after_s=max(1, round(wait * 2)))
    cache.put(key, version, made)
    return made.value


def _flight(
    engine: Engine, settings: Settings, key: PageKey, version: str, sign: bytes
) -> Future[Computed[Any]]:
    """The computation of ``key`` at ``version`` in this process: the one under way, or one
    started now."""
    with _LOCK:
        found = _FLIGHTS.get((key, version))
        if found is not None:
            return found
        future = _POOL.submit(_compute, engine, settings, key, version, sign)
        _FLIGHTS[(key, version)] = future
    future.add_done_callback(lambda _: _forget(key, version))
    return future


def _forget(key: PageKey, version: str) -> None:
    with _LOCK:
        _FLIGHTS.pop((key, version), None)


def _compute(
    engine: Engine, settings: Settings, key: PageKey, version: str, sign: bytes
) -> Computed[Any]:
    """Compute the figures from the rows in a session of their own, and keep them in the
    store for every process (a store that cannot keep them costs a log line)."""
    from sqlmodel import Session

    from server.usecases.dashboard import DERIVED, PageKey, derived_figures, page_figures
    from server.usecases.figures import read

    began = time.perf_counter()
    with Session(engine) as session:
        if key.page in DERIVED:  # HTML drawn from the report: the report kept, or made now
            base = PageKey(DERIVED[key.page], key.judge_run_id, key.options)
            stored = read(session, base, version, sign)
            if stored is None:
                value = page_figures(session, base, settings)
                _keep(engine, base, version, value, sign, time.perf_counter() - began)
            else:
                value = stored.value
            value = derived_figures(key, value)
        else:
            value = page_figures(session, key, settings)
    seconds = time.perf_counter() - began
    return _keep(engine, key, version, value, sign, seconds)


def _keep(
    engine: Engine, key: PageKey, version: str, value: Any, sign: bytes, seconds: float
) -> Computed[Any]:
    from server.usecases.figures import log, write

    log.info("figures of %s computed for the API in %.2f s", key.text(), seconds)
    at = datetime.now(UTC)
    try:
        write(engine, key, version, value, sign=sign, at=at, seconds=seconds)
    except Exception as exc:
        log.warning("figures of %s not kept in the store: %s", key, exc)
    return Computed(value, at, seconds, False)
