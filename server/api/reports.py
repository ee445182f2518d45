"""Reports as the CLI writes them, each as JSON (its data), one HTML page or one CSV table:
a judge run's report (``fairjudge report``), the judge's diagnostics of a run (``fairjudge
checks show``), judge runs compared (``fairjudge compare``) and a dataset's coverage of
FairMonitor's grid (``fairjudge dataset coverage``)."""

from __future__ import annotations

from typing import Any

from flask import Response

from server import usecases
from server.api import CSV_TABLE, HTML_PAGE, blueprint
from server.db import get_session
from server.kept.serving import JsonText, api_answer, kept_figures
from server.schemas import (
    CompareCsvQuery,
    CompareQuery,
    ComputingOut,
    DiagnosticsCsvQuery,
    DiagnosticsQuery,
    NamePath,
    ReportCsvQuery,
    ReportOut,
    ReportQuery,
    RunPath,
    TableQuery,
)
from server.usecases import rendering
from server.usecases.reports import Report

bp = blueprint("reports", __name__, "reports")


def _kept(page: str, run_id: int, options: Any) -> Any:
    """A judge run's report (or its diagnostics) kept for its rows as they are now, the
    latest kept while it is computed again, or none yet (server/kept/serving.py)."""
    from server.usecases.dashboard import page_key

    return kept_figures(page_key(page, run_id, options))


def _html_page(text: str) -> Response:
    return Response(text, mimetype="text/html")


@bp.get("/judge-runs/<int:run_id>/report.json", responses={200: ReportOut, 202: ComputingOut})
def report_json(path: RunPath, query: ReportQuery) -> Any:
    """The report's data (what report.json holds), its cost at the prices the server's
    config gives its endpoint, its agreement on the ratings of the campaigns named (every
    campaign's when none is), and ``standing``: the judge's standing per rubric. Served kept
    while the run's rows are unchanged; after a write, the latest kept report
    (`X-Figures-Stale: true` and a `stale` field) while it is computed again; 202 with
    `Retry-After` while none was ever kept. With `require_qualified=true`, 409 naming the
    rubric when the judge is not validated for every rubric it scored."""
    _require(path.run_id, query.require_qualified)
    got = _kept("report.json", path.run_id, tuple(query.campaign))
    return api_answer(got, JsonText)  # the text kept: a load is a read, not a serialisation


@bp.get("/judge-runs/<int:run_id>/report.html", responses={200: HTML_PAGE, 202: ComputingOut})
def report_html(path: RunPath, query: ReportQuery) -> Any:
    """The report as one self-contained HTML page, plots included (stale or 202 meanwhile).

    Kept as report.json is: after a write, the latest kept page (`X-Figures-Stale: true`)
    while it is computed again; 202 with `Retry-After` while none was ever kept; 409 with
    `require_qualified=true` as report.json."""
    _require(path.run_id, query.require_qualified)
    return api_answer(_kept("report.html", path.run_id, tuple(query.campaign)), _html_page)


@bp.get("/judge-runs/<int:run_id>/report.csv", responses={200: CSV_TABLE, 202: ComputingOut})
def report_csv(path: RunPath, query: ReportCsvQuery) -> Any:
    """One of the report's tables as CSV (``table``: its file name, e.g. metrics.csv);
    rows naming a rubric carry its ``judge_standing``.

    Kept as report.json is (stale, or 202, while the report is computed; 409 with
    `require_qualified=true`)."""
    _require(path.run_id, query.require_qualified)
    got = _kept("report", path.run_id, tuple(query.campaign))
    return api_answer(got, lambda report: _csv(report, query.table))


def _require(run_id: int, wanted: bool) -> None:
    """``UnqualifiedError`` (409, the reason) when asked and a rubric is not validated."""
    if wanted:
        from server.usecases.standing import require_qualified

        require_qualified(get_session(), run_id)


def _csv(report: Report, table: str | None) -> Response:
    name, text = rendering.csv_table(report, table)
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return Response(text, mimetype="text/csv", headers=headers)


def _html(report: Report) -> Response:
    return Response(rendering.html(report), mimetype="text/html")


# -- the judge's diagnostics of one run ------------------------------------------------------


def _diagnostics(run_id: int, query: DiagnosticsQuery, *, html: bool = False) -> Any:
    """The diagnostics report kept (the dashboard's checks page holds the same), the latest
    kept, or none yet."""
    from server.usecases.dashboard import ChecksPageOptions

    _require(run_id, query.require_qualified)
    options = ChecksPageOptions(query.tolerance, query.margin)
    return _kept("checks.html" if html else "checks", run_id, options)


@bp.get("/judge-runs/<int:run_id>/diagnostics.json", responses={200: ReportOut, 202: ComputingOut})
def diagnostics_json(path: RunPath, query: DiagnosticsQuery) -> Any:
    """The judge's checks on its own biases for this run (counterfactual copies, order,
    length, self-preference) and what it cost: the report's data (stale, with a `stale`
    field, or 202, while computed)."""
    return api_answer(_diagnostics(path.run_id, query), Report.to_json)


@bp.get("/judge-runs/<int:run_id>/diagnostics.html", responses={200: HTML_PAGE, 202: ComputingOut})
def diagnostics_html(path: RunPath, query: DiagnosticsQuery) -> Any:
    """The judge's diagnostics of this run as one self-contained HTML page (kept).

    Stale (`X-Figures-Stale: true`), or 202, while computed."""
    return api_answer(_diagnostics(path.run_id, query, html=True), _html_page)


@bp.get("/judge-runs/<int:run_id>/diagnostics.csv", responses={200: CSV_TABLE, 202: ComputingOut})
def diagnostics_csv(path: RunPath, query: DiagnosticsCsvQuery) -> Any:
    """One table of the judge's diagnostics as CSV (``table``: its file name).

    Kept; stale (`X-Figures-Stale: true`), or 202, while computed."""
    got = _diagnostics(path.run_id, query)
    return api_answer(got, lambda report: _csv(report, query.table))


# -- judge runs compared -----------------------------------------------------------------------


def _compare(query: CompareQuery) -> Report:
    return usecases.compare_report(get_session(), query.judge_run)


@bp.get("/compare.json", responses={200: ReportOut})
def compare_json(query: CompareQuery) -> Any:
    """Judge runs side by side (``judge_run``, repeated: at least two): stage metrics per
    factor and stage with intervals and unscored counts, and score distributions."""
    return _compare(query).to_json()


@bp.get("/compare.html", responses={200: HTML_PAGE})
def compare_html(query: CompareQuery) -> Any:
    """The comparison as one self-contained HTML page."""
    return _html(_compare(query))


@bp.get("/compare.csv", responses={200: CSV_TABLE})
def compare_csv(query: CompareCsvQuery) -> Any:
    """One table of the comparison as CSV (``table``: its file name)."""
    return _csv(_compare(query), query.table)


# -- a dataset's coverage ----------------------------------------------------------------------


@bp.get("/datasets/<name>/coverage.json", responses={200: ReportOut})
def coverage_json(path: NamePath) -> Any:
    """Items per stage x factor x scenario by review status, over FairMonitor's grid."""
    return usecases.coverage_report(get_session(), path.name).to_json()


@bp.get("/datasets/<name>/coverage.html", responses={200: HTML_PAGE})
def coverage_html(path: NamePath) -> Any:
    """The dataset's coverage as one self-contained HTML page."""
    return _html(usecases.coverage_report(get_session(), path.name))


@bp.get("/datasets/<name>/coverage.csv", responses={200: CSV_TABLE})
def coverage_csv(path: NamePath, query: TableQuery) -> Any:
    """The dataset's coverage table as CSV."""
    return _csv(usecases.coverage_report(get_session(), path.name), query.table)
