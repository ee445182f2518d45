"""A drift series over HTTP (issue 44): ``GET /api/v1/drift?runs=1,2,3`` answers what
``fairjudge drift --json`` prints (``server.usecases.drift``); a series the data cannot make
(one run, a gap, another configuration, an unknown figure) is a 400 saying why."""

from __future__ import annotations

from typing import Any

from server.api import blueprint, dump
from server.db import get_session
from server.schemas.drift import DriftOut, DriftQuery

bp = blueprint("drift", __name__, "reports")


@bp.get("/drift", responses={200: DriftOut})
def get_drift(query: DriftQuery) -> Any:
    """Judge runs of one configuration on the same anchor items, watched for drift.

    In release order, per figure and run: the drift against the baseline (paired on the
    items), its anytime-valid interval, whether the alarm rang, and the first run at which it
    did. Looking after every run does not inflate false alarms."""
    from server.usecases.drift import drift

    series = drift(
        get_session(), query.run_ids, figures=query.figure, baseline=query.baseline,
        alpha=query.alpha,
    )  # fmt: skip
    return dump(DriftOut, series.to_json())
