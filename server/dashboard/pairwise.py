"""Pairwise judgments imported from files: every judge's position consistency, preference
fairness, repetition stability and flag, its win rates and Bradley-Terry strengths (the
figures of ``GET /api/v1/pairwise/position``, kept while the store is unchanged)."""

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
    options = PositionOptions(inconsistent="apart" if apart else "tie")
    computed = kept(
        ("pairwise", options.inconsistent),
        lambda: pairwise_position_or_none(get_session(), options),
    )
    return render_template(
        "dashboard/pairwise.html", result=computed.value, computed_figures=computed
    )
