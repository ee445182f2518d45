"""The overview: generation runs, judge runs and jobs, with jobs' progress kept live."""

from __future__ import annotations

from flask import render_template
from flask.typing import ResponseReturnValue

from server.dashboard import bp, pages
from server.dashboard.access import login_required
from server.db import get_session


@bp.get("/")
@login_required
def overview() -> ResponseReturnValue:
    return render_template("dashboard/overview.html", page=pages.overview(get_session()))


@bp.get("/live/overview")
@login_required
def overview_live() -> ResponseReturnValue:
    """The overview's tables alone: the page fetches them every 2 s and swaps them in."""
    return render_template("dashboard/_overview_tables.html", page=pages.overview(get_session()))
