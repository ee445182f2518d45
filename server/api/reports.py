"""``/api/judge-runs/<id>/report``: the judge run's full report (the same one the CLI writes)."""

from __future__ import annotations

from flask import Blueprint
from flask.typing import ResponseReturnValue

from server import services
from server.api import stored_id
from server.db import get_session

bp = Blueprint("reports", __name__)


@bp.get("/judge-runs/<int:run_id>/report")
def report(run_id: int) -> ResponseReturnValue:
    return services.full_report(get_session(), stored_id("judge run", run_id)).to_json()
