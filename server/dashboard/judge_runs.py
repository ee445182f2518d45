"""A judge run's page: stage metrics, score plots, reliability, links to the reports."""

from __future__ import annotations

from flask import current_app, render_template
from flask.typing import ResponseReturnValue

from server.dashboard import bp, pages
from server.dashboard.access import login_required
from server.db import get_session


@bp.get("/judge-runs/<int:run_id>")
@login_required
def judge_run(run_id: int) -> ResponseReturnValue:
    page = pages.judge_run_page(get_session(), run_id, current_app.config["SETTINGS"])
    return render_template("dashboard/judge_run.html", page=page)
