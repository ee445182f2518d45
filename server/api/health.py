"""``/api/v1/health``: is the server up, and is its database reachable (no key needed)."""

from __future__ import annotations

from typing import Any

from flask import current_app
from flask_openapi3 import APIBlueprint, Tag

from server.schemas import HealthOut

bp = APIBlueprint("health", __name__, abp_tags=[Tag(name="health")])


@bp.get("/health", responses={200: HealthOut}, security=[])
def health() -> Any:
    """Whether the server answers and its database is reachable."""
    from server.usecases.browse import schema_revision

    revision = schema_revision(current_app.extensions["fairjudge_engine"])
    return {"status": "ok", "schema_revision": revision}
