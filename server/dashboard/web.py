"""What the dashboard's views share: the app's settings and engine, the request's session,
figures kept while the store is unchanged (``kept``), and links to the JSON API."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

from flask import current_app, request

from server.dashboard.cache import Computed, FigureCache
from server.db import get_session

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings

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
    """``compute()``'s figures for ``key``, kept from an earlier load while the store's
    version is unchanged (``?fresh=1`` computes them again)."""
    from server.usecases.dashboard import store_version

    cache: FigureCache = current_app.extensions.setdefault(CACHE, FigureCache())
    version = store_version(get_session())
    return cache.get(key, version, compute, fresh=request.args.get("fresh") == "1")


def api_url(path: str, query: dict[str, Any] | None = None) -> str:
    """An API URL with the query a page was asked with (empty values left out)."""
    pairs = [
        (k, v)
        for k, value in (query or {}).items()
        for v in (value if isinstance(value, list) else [value])
        if v not in (None, "", [])
    ]
    return f"{API}{path}" + (f"?{urlencode(pairs)}" if pairs else "")


def fresh_url() -> str:
    """This page's URL asking for its figures to be computed again."""
    args = [(k, v) for k, v in request.args.items(multi=True) if k != "fresh"]
    return request.path + "?" + urlencode([*args, ("fresh", "1")])
