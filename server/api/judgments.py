"""``/api/v1/judgments``: judge scores and unscored judgments, filtered and paginated."""

from __future__ import annotations

from typing import Any

from server.api import blueprint, page
from server.db import get_session
from server.schemas import JudgmentOut, JudgmentQuery, Page
from server.usecases import browse

bp = blueprint("judgments", __name__, "judgments")


@bp.get("/judgments", responses={200: Page[JudgmentOut]})
def judgments(query: JudgmentQuery) -> Any:
    """Judgments by id, filtered by judge run, rubric, status, score and item key."""
    rows, total = browse.list_judgments(
        get_session(),
        judge_run=query.judge_run,
        rubric=query.rubric,
        status=query.status,
        score=query.score,
        item=query.item,
        limit=query.limit,
        offset=query.offset,
    )
    return page(JudgmentOut, rows, total, query.limit, query.offset)
