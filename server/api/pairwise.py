"""``/api/v1/pairwise``: pairwise judgments imported with ``fairjudge judgments import``,
their position bias, repetition stability, win rates and Bradley-Terry strengths per judge."""

from __future__ import annotations

from typing import Any

from server.api import blueprint
from server.db import get_session
from server.schemas import PairwisePositionOut, PairwisePositionQuery
from server.usecases.pairwise import PositionOptions, pairwise_position

bp = blueprint("pairwise", __name__, "pairwise")


@bp.get("/pairwise/position", responses={200: PairwisePositionOut})
def position(query: PairwisePositionQuery) -> Any:
    """Per judge: position consistency, preference fairness and repetition stability (Shi et
    al. 2024), win / tie / loss rates per model pair with Wilson intervals, Bradley-Terry
    strengths with bootstrap intervals. A 404 when no pairwise judgment is stored (for the
    judge named)."""
    options = PositionOptions(**query.model_dump())
    return pairwise_position(get_session(), options)
