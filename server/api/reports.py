"""``/api/v1/judge-runs/<id>/report.{json,html,csv}``: the run's report, as the CLI writes it."""

from __future__ import annotations

from typing import Any

from flask import Response, current_app

from server import usecases
from server.api import CSV_TABLE, HTML_PAGE, blueprint
from server.db import get_session
from server.schemas import CsvQuery, RatingScopeQuery, ReportOut, RunPath
from server.usecases import rendering

bp = blueprint("reports", __name__, "reports")


def _report(run_id: int, campaigns: list[str]) -> Any:
    """The run's report, its cost at the prices the server's config gives its endpoint; its
    agreement on the ratings of ``campaigns`` (every campaign's when empty)."""
    settings = current_app.config["SETTINGS"]
    return usecases.full_report(get_session(), run_id, settings=settings, campaigns=campaigns)


@bp.get("/judge-runs/<int:run_id>/report.json", responses={200: ReportOut})
def report_json(path: RunPath, query: RatingScopeQuery) -> Any:
    """The report's data (what report.json holds)."""
    return _report(path.run_id, query.campaign).to_json()


@bp.get("/judge-runs/<int:run_id>/report.html", responses={200: HTML_PAGE})
def report_html(path: RunPath, query: RatingScopeQuery) -> Any:
    """The report as one self-contained HTML page, plots included."""
    return Response(rendering.html(_report(path.run_id, query.campaign)), mimetype="text/html")


@bp.get("/judge-runs/<int:run_id>/report.csv", responses={200: CSV_TABLE})
def report_csv(path: RunPath, query: CsvQuery) -> Any:
    """One of the report's tables as CSV (``table``: its file name, e.g. metrics.csv)."""
    report = _report(path.run_id, query.campaign)
    name, text = rendering.csv_table(report, query.table)
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return Response(text, mimetype="text/csv", headers=headers)
