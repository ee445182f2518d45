"""Audit runs: every run of the bias suites, and one run's figures, tests and follow-ups."""

from __future__ import annotations

from flask import render_template
from flask.typing import ResponseReturnValue

from server.dashboard import audit_page, bp
from server.dashboard.access import login_required
from server.dashboard.pages import row_id
from server.dashboard.web import settings
from server.db import get_session
from server.kept.serving import kept


@bp.get("/audits")
@login_required
def audits() -> ResponseReturnValue:
    from server.usecases.audits import list_runs

    return render_template("dashboard/audits.html", runs=list_runs(get_session()))


@bp.get("/audits/<int:run_id>")
@login_required
def audit(run_id: int) -> ResponseReturnValue:
    from server.usecases.audits import audit_result

    run_id = row_id("audit run", run_id)
    computed = kept(("audit", run_id), lambda: audit_result(get_session(), run_id, settings()))
    page = audit_page.audit_page(run_id, computed.value)
    return render_template("dashboard/audit.html", page=page, computed_figures=computed)
