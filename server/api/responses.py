"""``/api/v1/responses``: answers produced elsewhere, stored as an imported generation run."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import current_app

from server.api import blueprint
from server.schemas import ResponsesIn, ResponsesOut

bp = blueprint("responses", __name__, "responses")


@bp.post("/responses", responses={201: ResponsesOut})
def import_responses(body: ResponsesIn) -> Any:
    """Store a batch of answers (at most 5,000 rows): every bad row is reported and nothing
    is stored; answers already stored with the same text are counted, not added again."""
    from server.usecases.browse import import_response_rows

    done = import_response_rows(
        current_app.extensions["fairjudge_engine"],
        current_app.config["SETTINGS"],
        body.dataset,
        body.rows,
        model=body.model,
    )
    return asdict(done), 201 if done.added else 200
