"""What the dashboard's views share: the app's settings and engine, the request's session,
figures kept while the store is unchanged (``kept``), and links to the JSON API."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

from flask import current_app, request

from server.dashboard.cache import Computed, FigureCache
from server.db import get_session

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from server.api.kept import Pending, Stale
    from server.usecases.dashboard import PageKey

T = TypeVar("T")
API = "/api/v1"
"""Where the JSON API lives: pages link their numbers there."""
CACHE = "fairjudge_dashboard_figures"


def settings() -> Settings:
    found: Settings = current_app.config["SETTINGS"]
    return found


def engine() -> Engine:
    found: Engine = current_app.extensions["fairjudge_engine"]
    return found


def kept(key: Hashable, compute: Callable[[], T]) -> Computed[T]:
    """``compute()``'s figures for ``key``, kept from an earlier load while what they read is
    unchanged (``?fresh=1`` computes them again): a judge run's pages (a ``PageKey``) by the
    run's version (its own rows), and kept in the store too; other pages by the store's."""
    from server.usecases.dashboard import PageKey, run_version, store_version

    cache: FigureCache = current_app.extensions.setdefault(CACHE, FigureCache())
    if isinstance(key, PageKey):
        version = run_version(get_session(), key.judge_run_id)
    else:
        version = store_version(get_session())
    tier = _StoreTier(key, version) if isinstance(key, PageKey) else None
    return cache.get(key, version, compute, fresh=request.args.get("fresh") == "1", tier=tier)


def bounded(key: PageKey) -> Computed[Any] | Stale | Pending:
    """A judge run's page figures, never computed in the request: kept at the run's version
    now, or computed off the request (the API's single computation, server/api/kept.py)
    within ``PAGE_WAIT_S``; past it the run's latest kept figures (``Stale``), or
    ``Pending`` when none were ever kept. ``?fresh=1`` computes them again."""
    from server.api.kept import PAGE_WAIT_S, figures, wait_bound

    wait = wait_bound("PAGE_WAIT_S", PAGE_WAIT_S)
    return figures(key, wait_s=wait, fresh=request.args.get("fresh") == "1", stale=True)


class _StoreTier:
    """A page's figures kept in the store (server.usecases.figures), for ``FigureCache``. A
    store that cannot read or keep them costs the page nothing but a log line: the figures
    are computed from the rows."""

    def __init__(self, key: Any, version: tuple[Any, ...]) -> None:
        from server.usecases.figures import signing_key, version_text

        self.key, self.version = key, version_text(version, settings())
        self.sign = signing_key(settings())

    def read(self) -> tuple[Any, datetime, float] | None:
        from server.usecases.figures import read

        session = get_session()
        try:
            found = read(session, self.key, self.version, self.sign)
        except Exception as exc:
            session.rollback()  # a failed statement must not spoil the request's session
            current_app.logger.warning("kept figures of %s not read: %s", self.key, exc)
            return None
        return None if found is None else (found.value, found.at, found.seconds)

    def write(self, value: Any, at: datetime, seconds: float) -> None:
        from server.usecases.figures import write

        try:
            write(engine(), self.key, self.version, value, sign=self.sign, at=at, seconds=seconds)
        except Exception as exc:
            current_app.logger.warning("figures of %s not kept in the store: %s", self.key, exc)


def api_url(path: str, query: dict[str, Any] | None = None) -> str:
    """An API URL with the query a page was asked with (empty values left out)."""
    pairs = [
        (k, v)
        for k, value in (query or {}).items()
        for v in (value if isinstance(value, list) else [value])
        if v not in (None, "", [])
    ]
    return f"{API}{path}" + (f"?{urlencode(pairs)}" if pairs else "")


def reload_url() -> str:
    """This page's URL as a plain load (``fresh`` left out): kept figures when there are."""
    args = [(k, v) for k, v in request.args.items(multi=True) if k != "fresh"]
    return request.path + ("?" + urlencode(args) if args else "")


def fresh_url() -> str:
    """This page's URL asking for its figures to be computed again."""
    args = [(k, v) for k, v in request.args.items(multi=True) if k != "fresh"]
    return request.path + "?" + urlencode([*args, ("fresh", "1")])
