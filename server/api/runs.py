"""``/api/runs``: generation runs and judge runs."""

from __future__ import annotations

from dataclasses import asdict

from flask import Blueprint
from flask.typing import ResponseReturnValue

from judge.store.queries import list_runs
from server.db import get_session

bp = Blueprint("runs", __name__)


@bp.get("/runs")
def runs() -> ResponseReturnValue:
    return asdict(list_runs(get_session()))
