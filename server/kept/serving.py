"""Figures served kept, and never a request held longer than a bound for them: the one path
the API's report, agreement and diagnostics and the dashboard's pages take.

A judge run's report, agreement and diagnostics take seconds to tens of seconds on a large
run. They are served kept: from this process's memory (``FigureCache``), else from the store
(``dashboardfigure``: computed ahead by a warmer, or by an earlier request), both keyed by
the run's version (``run_version``: a write to the run's rows makes them stale, a write to
another run's does not). Figures kept nowhere are computed on a thread of their own, one
computation per page however many clients ask (they share it); a request waits for it at
most a bound, then gets the run's latest kept figures, at an older version of its rows, as
they were kept (``Stale``), or, when none were ever kept, ``Pending``:

- the API (``kept_figures``, ``api_answer``) waits ``FIGURES_WAIT_S`` in the app's config,
  else ``WAIT_S``; it answers stale figures with 200, ``X-Figures-Stale: true`` and, in a
  JSON object, a ``stale`` field (when they were computed, at which version, what changed
  since), and ``Pending`` with 202 and ``Retry-After``;
- the dashboard's judge run pages (``bounded``) wait ``PAGE_WAIT_S``: stale figures under a
  banner, ``Pending`` as a page that reloads itself.

Pages that are not a judge run's (``kept``) are kept in memory only, by the store's version.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from flask import Response, current_app, request
from sqlmodel import Session

from server.db import get_session
from server.kept.cache import Computed, FigureCache

T = TypeVar("T")

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from server.usecases.dashboard import PageKey
    from server.usecases.figures import Stored

WAIT_S = 0.4
"""How long an API request waits for figures being computed before it is answered with the
latest kept ones, or 202 when none were ever kept."""
TESTING_WAIT_S = 300.0
"""The wait under an app made for tests (``TESTING``) with no ``FIGURES_WAIT_S``: tests on a
busy machine get the figures, not a 202; the tests of the 202 set the bound they need."""
PAGE_WAIT_S = 0.25
"""How long a dashboard page waits for its figures being computed (``PAGE_WAIT_S`` in the
app's config overrides it) before it shows the latest kept ones or a page that reloads."""
THREADS = 2
"""Figures computed at once for one web worker, beyond which requests queue for them: each
in a process of its own (``_pool``), never on a thread of the web worker's interpreter."""
CACHE = "fairjudge_dashboard_figures"
"""Where the app keeps its ``FigureCache`` (``app.extensions``)."""

_POOL: ProcessPoolExecutor | None = None
_THREADS = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="kept-figures")
"""Only for a store no other process can open (SQLite in memory)."""
_FLIGHTS: dict[tuple[str, Any, str], Future[Stored]] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class JsonText:
    """A JSON object's text as kept (``report.json``): served as it is, its ``stale`` field,
    when stale, written in after its last member."""

    text: str

    def with_field(self, name: str, value: Any) -> str:
        """The object's text with ``name`` set to ``value``: the field written first (a
        reader keeps the last of two equal names, so one the object held is replaced)."""
        body = self.text.strip()
        if not body.startswith("{") or not body.endswith("}"):
            raise ValueError("kept JSON text is not an object")
        member = f"{json.dumps(name)}:{json.dumps(value, separators=(',', ':'))}"
        inner = body[1:-1].strip()
        return "{" + (f"{inner},{member}" if inner else member) + "}"


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
    word for word. ``changed``: the kinds of rows written since, when known (None: kept by
    another process, whose store row holds only the version's digest); ``version``: that
    digest."""

    computed: Computed[Any]
    changed: tuple[str, ...] | None
    again: bool  # the figures kept are at the version now: asked to compute them again
    version: str

    def to_json(self) -> dict[str, Any]:
        """The ``stale`` field of an API answer (``StaleOut``)."""
        behind = [] if self.again else (None if self.changed is None else list(self.changed))
        since = "" if not behind else f" ({', '.join(behind)})"
        return {
            "computed_at": self.computed.at.isoformat(),
            "version": self.version,
            "behind": behind,
            "message": (
                f"these figures were computed {self.computed.at:%Y-%m-%d %H:%M:%S} UTC, before "
                f"the latest writes to this run's rows{since}; they are being computed again: "
                "ask again in a moment for the figures as they are now"
            ),
        }


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


def _cache() -> FigureCache:
    found: FigureCache = current_app.extensions.setdefault(CACHE, FigureCache())
    return found


def _fresh() -> bool:
    return request.args.get("fresh") == "1"


def kept(key: Hashable, compute: Callable[[], T]) -> Computed[T]:
    """A page's figures that are not a judge run's (an audit's): ``compute()``'s, kept in
    memory from an earlier load while the store is unchanged (``?fresh=1`` computes them
    again)."""
    from server.usecases.dashboard import store_version

    return _cache().get(key, store_version(get_session()), compute, fresh=_fresh())


def bounded(key: PageKey) -> Computed[Any] | Stale | Pending:
    """A dashboard page's judge run figures, never computed in the request: kept at the
    run's version now, or computed off the request within ``PAGE_WAIT_S``; past it the
    run's latest kept figures (``Stale``), or ``Pending`` when none were ever kept.
    ``?fresh=1`` computes them again."""
    wait = wait_bound("PAGE_WAIT_S", PAGE_WAIT_S)
    return figures(key, wait_s=wait, fresh=_fresh(), stale=True)


def kept_figures(key: PageKey) -> Computed[Any] | Stale | Pending:
    """An API route's figures of ``key``: at the run's version now (kept in memory, in the
    store, or computed within the wait), else the latest kept (``Stale``), else
    ``Pending``. Errors of the computation (an unknown run, a bad option) are raised here,
    as they would be computed inline."""
    return figures(key, wait_s=wait_bound(), stale=True)


def api_answer(got: Computed[Any] | Stale | Pending, render: Callable[[Any], Any]) -> Any:
    """An API route's answer from ``kept_figures``: 202 for ``Pending``; else ``render`` of
    the figures, 200, with ``X-Figures-Stale`` and ``X-Figures-Computed-At``; stale ones also
    with ``X-Figures-Version`` and, when the body is a JSON object (a dict, or ``JsonText``
    kept as text), its ``stale`` field."""
    if isinstance(got, Pending):
        return got.reply()
    made = got.computed if isinstance(got, Stale) else got
    body = render(made.value)
    headers = {
        "X-Figures-Stale": "true" if isinstance(got, Stale) else "false",
        "X-Figures-Computed-At": made.at.isoformat(),
    }
    if isinstance(got, Stale):
        headers["X-Figures-Version"] = got.version
        if isinstance(body, dict):
            body = {**body, "stale": got.to_json()}
        elif isinstance(body, JsonText):
            body = JsonText(body.with_field("stale", got.to_json()))
    if isinstance(body, JsonText):
        body = Response(body.text, mimetype="application/json")
    if isinstance(body, Response):
        body.headers.update(headers)
        return body
    return body, 200, headers


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
    cache, session = _cache(), get_session()
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
    future = _flight(engine, settings, key, text, sign, fresh=fresh)
    try:
        done = future.result(timeout=wait_s)
    except FutureTimeout:
        older = _latest(cache, settings, key, version, text, sign) if stale else None
        if older is not None:
            return older
        waited = time.monotonic() - start
        return Pending(key.page, key.judge_run_id, waited, retry_after_s=max(1, round(wait_s * 2)))
    except Exception:
        _forget(_store(engine), key, text, future, failed=True)  # shown here: collected
        raise
    made = Computed(done.value, done.at, done.seconds, False)
    cache.put(key, version, made)
    return made


def _read(reader: Callable[[], T | None], key: PageKey) -> T | None:
    """``reader()``, or None when the store could not be read (a log line)."""
    try:
        return reader()
    except Exception as exc:  # the store could not be read: compute from the rows
        get_session().rollback()  # a failed statement must not spoil the request's session
        current_app.logger.warning("kept figures of %s not read: %s", key, exc)
        return None


def _latest(
    cache: FigureCache,
    settings: Settings,
    key: PageKey,
    version: tuple[Any, ...],
    text: str,
    sign: bytes,
) -> Stale | None:
    """The latest figures of ``key`` kept in memory or in the store, at any version (the
    later computed of the two), as ``Stale``; None when none were ever kept."""
    from server.usecases.figures import read_latest, version_text

    memory = cache.latest(key)
    stored: tuple[str, Stored] | None = _read(lambda: read_latest(get_session(), key, sign), key)
    if memory is not None and (stored is None or memory[1].at >= stored[1].at):
        old, made = memory
        assert isinstance(old, tuple)  # a judge run's page: kept by its run's version
        again = Computed(made.value, made.at, made.seconds, True)
        return Stale(again, _changed(old, version), old == version, version_text(old, settings))
    if stored is None:
        return None
    at_version, kept_row = stored
    made = Computed(kept_row.value, kept_row.at, kept_row.seconds, True)
    return Stale(made, None, at_version == text, at_version)


def _changed(old: tuple[Any, ...], now: tuple[Any, ...]) -> tuple[str, ...]:
    """The kinds of rows (``CHANGED``) whose fingerprints differ between two run versions."""
    names = []
    for a, b in zip(old, now, strict=False):
        if a != b:
            table = b.split("'")[1] if b.startswith("('") else ""
            names.append(CHANGED.get(table, "other rows"))
    return tuple(dict.fromkeys(names))


def _flight(
    engine: Engine, settings: Settings, key: PageKey, version: str, sign: bytes, *, fresh: bool
) -> Future[Stored]:
    """The computation of ``key`` at ``version`` for this process: the one under way, or one
    started now in a process of its own (``compute_in_child``: computed and kept in the
    store, then read back here), so that this process's request threads never wait for the
    GIL behind a computation."""
    store = _store(engine)
    with _LOCK:
        found = _FLIGHTS.get((store, key, version))
        if found is not None:
            if not found.done():
                return found
            _FLIGHTS.pop((store, key, version), None)
            if found.exception() is not None:  # it failed after its requests stopped waiting
                return found  # raised once, to the request that collects it
            # It succeeded and is on its way out (its figures are kept): a load that asked
            # for them again (``?fresh=1``) gets a computation of its own.
        future = _start(engine, settings, key, version, sign, fresh)
        _FLIGHTS[(store, key, version)] = future
    future.add_done_callback(lambda done: _forget(store, key, version, done))
    return future


def _store(engine: Engine) -> str:
    """Which store a computation is of, for ``_FLIGHTS``: two stores at the same run version
    (two test stores, two deployments in one process) never share one; each SQLite store in
    memory is a store of its own."""
    url = engine.url.render_as_string(hide_password=True)
    if engine.url.get_backend_name() == "sqlite" and engine.url.database in (None, "", ":memory:"):
        return f"{url}#{id(engine)}"
    return url


def _start(
    engine: Engine, settings: Settings, key: PageKey, version: str, sign: bytes, fresh: bool
) -> Future[Stored]:
    from server.usecases.figures import compute_in_child, compute_page

    if engine.url.get_backend_name() == "sqlite" and engine.url.database in (None, "", ":memory:"):
        return _THREADS.submit(compute_page, engine, settings, key, version, sign)
    url = engine.url.render_as_string(hide_password=False)
    child = _submit(compute_in_child, url, settings, key, version, sign, fresh)
    out: Future[Stored] = Future()

    def read_back(done: Future[Any]) -> None:
        from server.usecases.figures import Stored, read

        try:
            at, seconds, value = done.result()
            if value is None:  # kept by the child: read back from the store
                with Session(engine) as session:
                    stored = read(session, key, version, sign)
                if stored is None:
                    raise RuntimeError(f"the figures of {key.text()} were kept, then gone")
                value = stored.value
            out.set_result(Stored(value, at, seconds))
        except BaseException as exc:  # the computation's own error, shown by the request
            out.set_exception(exc)

    child.add_done_callback(read_back)
    return out


def _submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """``fn(*args)`` in this process's pool of figure processes (spawned, lower priority:
    ``server.usecases.figures.child_init``), made again when one of them died."""

    from server.usecases.figures import child_init

    global _POOL
    for _ in range(2):
        with _LOCK_POOL:
            if _POOL is None:
                _POOL = ProcessPoolExecutor(
                    max_workers=THREADS,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=child_init,
                )
            pool = _POOL
        try:
            return pool.submit(fn, *args)
        except (BrokenProcessPool, RuntimeError):  # a child died (killed): a new pool
            with _LOCK_POOL:
                if _POOL is pool:
                    _POOL = None
    raise RuntimeError("no process could be started to compute the figures")


_LOCK_POOL = threading.Lock()


def _forget(
    store: str, key: PageKey, version: str, done: Future[Stored], *, failed: bool = False
) -> None:
    """Forget a computation that succeeded (its figures are kept) or whose error a request
    shows (``failed``); one that failed unseen stays until a request collects its error, so
    that a page that stopped waiting for it shows that error on its next load instead of
    starting it again for ever."""
    if not failed and not done.cancelled() and done.exception() is not None:
        return
    with _LOCK:
        if _FLIGHTS.get((store, key, version)) is done:
            _FLIGHTS.pop((store, key, version), None)
