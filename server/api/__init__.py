"""The JSON API: one blueprint per resource under ``/api``."""

from __future__ import annotations

from flask import Flask

from judge.errors import NotFoundError

MAX_ID = 2**63 - 1
"""The largest id a database row can have (a signed 64-bit integer)."""


def stored_id(kind: str, value: int) -> int:
    """``value`` when it can be a row's id (1 .. 2^63-1), else NotFoundError (a 404): a larger
    number cannot be bound as a database integer and would otherwise be a 500."""
    if not 1 <= value <= MAX_ID:
        raise NotFoundError(f"{kind} {value} not found (ids run from 1 to {MAX_ID})")
    return value


def register(app: Flask) -> None:
    from server.api import datasets, health, reports, runs

    for module in (health, datasets, runs, reports):
        app.register_blueprint(module.bp, url_prefix="/api")
