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

The dashboard's judge run pages use the same computation (``figures``) with a shorter bound
(``PAGE_WAIT_S``): past it a page shows the run's latest kept figures, at an older version of
its rows, as they were kept (``Stale``: its banner says so), or, when none were ever kept, a
page that reloads itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from flask import current_app

from server.dashboard.cache import Computed, FigureCache
from server.dashboard.web import CACHE
from server.db import get_session

T = TypeVar("T")

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from server.usecases.dashboard import PageKey
    from server.usecases.figures import Stored

WAIT_S = 1.5
"""How long a request waits for figures being computed before it is answered 202."""
TESTING_WAIT_S = 300.0
"""The wait under an app made for tests (``TESTING``) with no ``FIGURES_WAIT_S``: tests on a
busy machine get the figures, not a 202; the tests of the 202 set the bound they need."""
PAGE_WAIT_S = 0.5
"""How long a dashboard page waits for its figures being computed (``PAGE_WAIT_S`` in the
app's config overrides it) before it shows the latest kept ones or a page that reloads."""
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


@dataclass(frozen=True)
class Stale:
    """The run's latest kept figures, computed at an older version of its rows (or, asked to
    compute again, at this one) while the figures now are being computed: shown as kept,
    word for word, with what changed since when it is known (``changed``: kinds of rows)."""

    computed: Computed[Any]
    changed: tuple[str, ...]
    again: bool  # the figures kept are at the version now: asked to compute them again


CHANGED = {
    "humanrating": "ratings",
    "ratingchange": "ratings",
    "judgment": "judgments",
    "judgerun": "judge runs",
    "response": "answers",
    "generationrun": "generation runs",
    "item": "items",
    "campaign": "campaigns",
    "campaigntask": "campaigns",
}
"""Tables of ``run_version`` named in words, for the banner of a stale page."""


def wait_bound(config_key: str = "FIGURES_WAIT_S", default: float = WAIT_S) -> float:
    """How long a request waits for figures being computed: the app's ``config_key``, else
    ``default`` (``TESTING_WAIT_S`` under an app made for tests)."""
    wait = current_app.config.get(config_key)
    if wait is None:
        wait = TESTING_WAIT_S if current_app.testing else default
    return float(wait)


def kept_figures(key: PageKey) -> Any | Pending:
    """The figures of ``key`` at the run's version now: kept in memory, kept in the store,
    or computed within the wait; else ``Pending``. Errors of the computation (an unknown
    run, a bad option) are raised here, as they would be computed inline."""
    got = figures(key, wait_s=wait_bound())
    return got.value if isinstance(got, Computed) else got


def figures(
    key: PageKey, *, wait_s: float, fresh: bool = False, stale: bool = False
) -> Computed[Any] | Stale | Pending:
    """The figures of ``key`` at the run's version now, kept or computed within ``wait_s``
    (``fresh``: computed again even when kept); past the wait, with ``stale``, the run's
    latest kept figures at any version (``Stale``); else ``Pending``."""
    from server.usecases.dashboard import run_version
    from server.usecases.figures import read, signing_key, version_text

    settings: Settings = current_app.config["SETTINGS"]
    engine: Engine = current_app.extensions["fairjudge_engine"]
    cache: FigureCache = current_app.extensions.setdefault(CACHE, FigureCache())
    session = get_session()
    version = run_version(session, key.judge_run_id)
    found = None if fresh else cache.peek(key, version)
    if found is not None:
        return found
    text, sign = version_text(version, settings), signing_key(settings)
    stored = None if fresh else _read(lambda: read(session, key, text, sign), key)
    if stored is not None:
        made = Computed(stored.value, stored.at, stored.seconds, True)
        cache.put(key, version, made)
        return made
    start = time.monotonic()
    future = _flight(engine, settings, key, text, sign)
    try:
        made = future.result(timeout=wait_s)
    except FutureTimeout:
        older = _latest(cache, key, version, text, sign) if stale else None
        if older is not None:
            return older
        waited = time.monotonic() - start
        return Pending(key.page, key.judge_run_id, waited, retry_after_s=max(1, round(wait_s * 2)))
    except Exception:
        _forget(key, text, future, failed=True)  # this request shows the error: collected
        raise
    cache.put(key, version, made)
    return made


def _read(reader: Callable[[], T | None], key: PageKey) -> T | None:
    """``reader()``, or None when the store could not be read (a log line)."""
    try:
        return reader()
    except Exception as exc:  # the store could not be read: compute from the rows
        get_session().rollback()
        current_app.logger.warning("kept figures of %s not read: %s", key, exc)
        return None


def _latest(
    cache: FigureCache, key: PageKey, version: tuple[Any, ...], text: str, sign: bytes
) -> Stale | None:
    """The latest figures of ``key`` kept in memory or in the store, at any version (the
    later computed of the two), as ``Stale``; None when none were ever kept."""
    from server.usecases.figures import read_latest

    memory = cache.latest(key)
    stored: tuple[str, Stored] | None = _read(lambda: read_latest(get_session(), key, sign), key)
    if memory is not None and (stored is None or memory[1].at >= stored[1].at):
        old, made = memory
        changed = _changed(old, version) if isinstance(old, tuple) else ()
        again = old == version
        return Stale(Computed(made.value, made.at, made.seconds, True), changed, again)
    if stored is None:
        return None
    at_version, kept = stored
    return Stale(Computed(kept.value, kept.at, kept.seconds, True), (), at_version == text)


def _changed(old: tuple[Any, ...], now: tuple[Any, ...]) -> tuple[str, ...]:
    """The kinds of rows (``CHANGED``) whose fingerprints differ between two run versions."""
    names = []
    for a, b in zip(old, now, strict=False):
        if a != b:
            table = b.split("'")[1] if b.startswith("('") else ""
            names.append(CHANGED.get(table, "other rows"))
    return tuple(dict.fromkeys(names))


def _flight(
    engine: Engine, settings: Settings, key: PageKey, version: str, sign: bytes
) -> Future[Computed[Any]]:
    """The computation of ``key`` at ``version`` in this process: the one under way, or one
    started now."""
    with _LOCK:
        found = _FLIGHTS.get((key, version))
        if found is not None:
            if found.done():  # it failed after its requests stopped waiting: raised once
                _FLIGHTS.pop((key, version), None)
            return found
        future = _POOL.submit(_compute, engine, settings, key, version, sign)
        _FLIGHTS[(key, version)] = future
    future.add_done_callback(lambda done: _forget(key, version, done))
    return future


def _forget(
    key: PageKey, version: str, done: Future[Computed[Any]], *, failed: bool = False
) -> None:
    """Forget a computation that succeeded (its figures are kept) or whose error a request
    shows (``failed``); one that failed unseen stays until a request collects its error, so
    that a page that stopped waiting for it shows that error on its next load instead of
    starting it again for ever."""
    if not failed and not done.cancelled() and done.exception() is not None:
        return
    with _LOCK:
        if _FLIGHTS.get((key, version)) is done:
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
