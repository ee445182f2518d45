"""Pairwise judgments, imported from files or made by FairJudge's judge (``judge-pairs``):
every judge's position consistency, preference fairness, repetition stability and flag, its
win rates and Bradley-Terry strengths (the figures of ``GET /api/v1/pairwise/position``, kept
while the store is unchanged); ``?judge=LABEL`` shows one judge (a judge-pairs job links
there)."""

from __future__ import annotations

from flask import render_template, request
from flask.typing import ResponseReturnValue

from server.dashboard import bp
from server.dashboard.access import login_required
from server.db import get_session
from server.kept.serving import kept


@bp.get("/pairwise")
@login_required
def pairwise() -> ResponseReturnValue:
    from server.usecases.pairwise import PositionOptions, pairwise_position_or_none

    apart = request.args.get("inconsistent") == "apart"
    judge = (request.args.get("judge") or "").strip()[:200] or None
    options = PositionOptions(inconsistent="apart" if apart else "tie", judge=judge)
    computed = kept(
        ("pairwise", options.inconsistent, judge or ""),
        lambda: pairwise_position_or_none(get_session(), options),
    )
    return render_template(
        "dashboard/pairwise.html", result=computed.value, computed_figures=computed, judge=judge
    )
