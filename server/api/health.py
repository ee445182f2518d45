"""``/api/health``: is the server up."""

from __future__ import annotations

from flask import Blueprint
from flask.typing import ResponseReturnValue

bp = Blueprint("health", __name__)


@bp.get("/health")
def health() -> ResponseReturnValue:
    return {"status": "ok"}
