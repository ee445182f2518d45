"""``/api/v1/judge-runs/<id>/report.{json,html,csv}``: the run's report, as the CLI writes it."""

from __future__ import annotations

from typing import Any

from flask import Response

from server import services
from server.api import blueprint
from server.db import get_session
from server.schemas import CsvQuery, RunPath

bp = blueprint("reports", __name__, "reports")


@bp.get("/judge-runs/<int:run_id>/report.json")
def report_json(path: RunPath) -> Any:
    """The report's data (what report.json holds)."""
    return services.full_report(get_session(), path.run_id).to_json()


@bp.get("/judge-runs/<int:run_id>/report.html")
def report_html(path: RunPath) -> Any:
    """The report as one self-contained HTML page, plots included."""
    from judge.reports.render import html

    return Response(html(services.full_report(get_session(), path.run_id)), mimetype="text/html")


@bp.get("/judge-runs/<int:run_id>/report.csv")
def report_csv(path: RunPath, query: CsvQuery) -> Any:
    """One of the report's tables as CSV (``table``: its file name, e.g. metrics.csv)."""
    from judge.reports.render import csv_table

    report = services.full_report(get_session(), path.run_id)
    name, text = csv_table(report, query.table)
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return Response(text, mimetype="text/csv", headers=headers)
