"""Datasets: every dataset with its items, and one dataset's coverage of FairMonitor's grid."""

from __future__ import annotations

from flask import render_template
from flask.typing import ResponseReturnValue

from server.dashboard import bp, datasets_page
from server.dashboard.access import login_required
from server.dashboard.web import engine
from server.db import get_session


@bp.get("/datasets")
@login_required
def datasets() -> ResponseReturnValue:
    from server.usecases.datasets import list_datasets

    return render_template("dashboard/datasets.html", datasets=list_datasets(engine()))


@bp.get("/datasets/<name>")
@login_required
def dataset(name: str) -> ResponseReturnValue:
    from server.usecases import coverage_report

    page = datasets_page.coverage_page(name, coverage_report(get_session(), name))
    return render_template("dashboard/dataset.html", page=page)
