"""What the dashboard's views share: the app's settings and engine, links to the JSON API and
to the page itself (figures kept between loads: server/kept/serving.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from flask import current_app, request

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings

API = "/api/v1"
"""Where the JSON API lives: pages link their numbers there."""


def settings() -> Settings:
    found: Settings = current_app.config["SETTINGS"]
    return found


def engine() -> Engine:
    found: Engine = current_app.extensions["fairjudge_engine"]
    return found


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
