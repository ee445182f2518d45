"""``/api/v1/judgments``: judge scores and unscored judgments, filtered and paginated."""

from __future__ import annotations

from typing import Any

from judge.store.queries import JudgmentFilter, list_judgments
from server.api import blueprint, page
from server.db import get_session
from server.schemas import JudgmentOut, JudgmentQuery

bp = blueprint("judgments", __name__, "judgments")


@bp.get("/judgments", responses={200: JudgmentOut})
def judgments(query: JudgmentQuery) -> Any:
    """Judgments by id, filtered by judge run, rubric, status, score and item key."""
    where = JudgmentFilter(query.judge_run, query.rubric, query.status, query.score, query.item)
    rows, total = list_judgments(get_session(), where, limit=query.limit, offset=query.offset)
    return page(JudgmentOut, rows, total, query.limit, query.offset)
