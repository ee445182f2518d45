"""``/api/v1/pairwise``: pairwise judgments imported with ``fairjudge judgments import``,
their position bias, repetition stability, win rates and Bradley-Terry strengths per judge."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import current_app

from server.api import blueprint
from server.db import get_session
from server.schemas import (
    PairwiseImportIn,
    PairwiseImportOut,
    PairwisePositionOut,
    PairwisePositionQuery,
)
from server.usecases.pairwise import PositionOptions, import_judgments_text, pairwise_position

bp = blueprint("pairwise", __name__, "pairwise")


@bp.get("/pairwise/position", responses={200: PairwisePositionOut})
def position(query: PairwisePositionQuery) -> Any:
    """Per judge: position consistency, preference fairness and repetition stability (Shi et
    al. 2024), win / tie / loss rates per model pair with Wilson intervals, Bradley-Terry
    strengths with bootstrap intervals. A 404 when no pairwise judgment is stored (for the
    judge named)."""
    options = PositionOptions(**query.model_dump())
    return pairwise_position(get_session(), options)


@bp.post("/pairwise/judgments", responses={201: PairwiseImportOut})
def import_judgments(body: PairwiseImportIn) -> Any:
    """Store one file's pairwise judgments sent as text (csv, jsonl or one shi2024 record
    file), every pair judged in both orders. A text with any problem (one order missing, a
    verdict outside A/B/tie/unreadable, a model outside ``models``, a judgment already
    stored) is a 400 listing every problem, and nothing is stored."""
    done = import_judgments_text(
        current_app.extensions["fairjudge_engine"], body.text, body.format,
        judge=body.judge, models=body.models,
    )  # fmt: skip
    return asdict(done), 201
