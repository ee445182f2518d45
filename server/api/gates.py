"""Release gates' last verdicts over HTTP (issue 44): ``GET /api/v1/gates`` answers each
name's newest evaluation kept by ``fairjudge gate`` (``server.usecases.release_gates``)."""

from __future__ import annotations

from typing import Any

from server.api import blueprint, dump
from server.db import get_session
from server.schemas.gates import GatesQuery, GateVerdictOut, GateVerdictsOut

bp = blueprint("gates", __name__, "reports")


@bp.get("/gates", responses={200: GateVerdictsOut})
def get_gates(query: GatesQuery) -> Any:
    """The last verdict of each gates file `fairjudge gate` evaluated, newest first.

    Each verdict says whether every gate passed and, gate by gate, the outcome with the
    figure found, its interval and the threshold. Verdicts are kept under the name
    `--record` gave (default the gates file as given); a `name` with none is a 404."""
    from server.usecases.release_gates import last_verdicts

    rows = last_verdicts(get_session(), name=query.name)
    return {"items": [dump(GateVerdictOut, r) for r in rows]}
