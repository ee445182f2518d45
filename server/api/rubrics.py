"""``/api/v1/rubrics``: rubrics users registered to score their own criteria."""

from __future__ import annotations

from typing import Any

from flask import current_app

from server import usecases
from server.api import blueprint
from server.db import get_session
from server.schemas import ListOf, RubricCreate, RubricOut

bp = blueprint("rubrics", __name__, "rubrics")


@bp.get("/rubrics", responses={200: ListOf[RubricOut]})
def list_rubrics() -> Any:
    """The latest version of every registered rubric."""
    return [r.to_dict() for r in usecases.list_rubrics(get_session())]


@bp.post("/rubrics", responses={201: ListOf[RubricOut], 200: ListOf[RubricOut]})
def register_rubrics(body: RubricCreate) -> Any:
    """Check and store a rubric file's rubrics, all or none: an unchanged definition adds
    nothing, a changed one becomes the name's next version."""
    engine = current_app.extensions["fairjudge_engine"]
    done = usecases.register_rubric(engine, body.toml)
    return [r.to_dict() for r in done], 201 if any(r.created for r in done) else 200
