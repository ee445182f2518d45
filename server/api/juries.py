"""A jury of judge runs over HTTP (issue 44): ``GET /api/v1/juries?runs=1,2,3`` answers what
``fairjudge jury --json`` prints (``server.usecases.juries``); a jury the data cannot make
(one run, runs of other answers or rubrics, no rated item) is a 400 saying why."""

from __future__ import annotations

from typing import Any

from flask import current_app

from server.api import blueprint
from server.db import get_session
from server.schemas.juries import JuryOut, JuryQuery

bp = blueprint("juries", __name__, "agreement")


@bp.get("/juries", responses={200: JuryOut})
def get_jury(query: JuryQuery) -> Any:
    """A jury of judge runs of the same answers against people, beside each judge.

    Per rubric: the jury's agreement (combined by mean, median, majority or cross-fitted
    learnt weights) and each judge's on the same rated items, the paired bootstrap interval
    of jury minus best judge with the verdict (better, not shown better, worse), and the
    jury's cost, the sum of its runs'."""
    from server.usecases.juries import JuryRequest, jury

    fields = query.model_dump(exclude={"campaign", "runs"})
    request = JuryRequest(runs=query.run_ids, campaigns=query.campaign, **fields)
    return jury(get_session(), request, current_app.config["SETTINGS"]).to_dict()
