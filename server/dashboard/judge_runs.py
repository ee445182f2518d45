"""A judge run's pages: the run (the answer, the grid, distributions, unscored judgments, the
item browser), its agreement with people, and the judge's own checks."""

from __future__ import annotations

from flask import render_template, request
from flask.typing import ResponseReturnValue

from server.dashboard import agreement_page, bp, checks_page, run_page
from server.dashboard.access import login_required
from server.dashboard.pages import row_id
from server.dashboard.web import kept, settings
from server.db import get_session


def _campaigns() -> tuple[str, ...]:
    return tuple(request.args.getlist("campaign"))


@bp.get("/judge-runs/<int:run_id>")
@login_required
def judge_run(run_id: int) -> ResponseReturnValue:
    from server.usecases.dashboard import judge_run_view, page_key

    run_id, campaigns = row_id("judge run", run_id), _campaigns()
    computed = kept(
        page_key("judge-run", run_id, campaigns),
        lambda: judge_run_view(get_session(), run_id, settings=settings(), campaigns=campaigns),
    )
    page = run_page.judge_run_page(run_id, computed, request.args)
    return render_template("dashboard/judge_run.html", page=page)


@bp.get("/judge-runs/<int:run_id>/agreement")
@login_required
def agreement(run_id: int) -> ResponseReturnValue:
    from server.usecases.dashboard import agreement_figures, agreement_options, page_key

    run_id = row_id("judge run", run_id)
    options = agreement_options(request.args)
    computed = kept(
        page_key("agreement", run_id, options),
        lambda: agreement_figures(get_session(), run_id, options),
    )
    page = agreement_page.agreement_page(run_id, options, computed)
    return render_template("dashboard/agreement.html", page=page)


@bp.get("/judge-runs/<int:run_id>/checks")
@login_required
def checks(run_id: int) -> ResponseReturnValue:
    from server.usecases.dashboard import checks_figures, checks_options, page_key

    run_id = row_id("judge run", run_id)
    options = checks_options(request.args)
    computed = kept(
        page_key("checks", run_id, options),
        lambda: checks_figures(get_session(), run_id, options, settings()),
    )
    page = checks_page.checks_page(run_id, options, computed)
    return render_template("dashboard/checks.html", page=page)
