"""A judge run's pages: the run (the answer, the grid, distributions, unscored judgments, the
item browser), its agreement with people, and the judge's own checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import render_template, request
from flask.typing import ResponseReturnValue

from server.dashboard import agreement_page, bp, checks_page, run_page
from server.dashboard.access import login_required
from server.dashboard.pages import row_id
from server.dashboard.web import reload_url
from server.kept.serving import Pending, Stale, bounded

if TYPE_CHECKING:
    from server.kept.cache import Computed
    from server.usecases.dashboard import PageKey

WHAT = {
    "judge-run": "page",
    "agreement": "agreement with people",
    "checks": "judge's own checks",
}
"""What each page shows, for the page that says it is being computed."""


def _campaigns() -> tuple[str, ...]:
    return tuple(request.args.getlist("campaign"))


@bp.get("/judge-runs/<int:run_id>")
@login_required
def judge_run(run_id: int) -> ResponseReturnValue:
    from server.usecases.dashboard import page_key

    run_id, campaigns = row_id("judge run", run_id), _campaigns()
    return _shown(
        page_key("judge-run", run_id, campaigns),
        "dashboard/judge_run.html",
        lambda c: run_page.judge_run_page(run_id, c, request.args),
    )


@bp.get("/judge-runs/<int:run_id>/agreement")
@login_required
def agreement(run_id: int) -> ResponseReturnValue:
    from server.usecases.dashboard import agreement_options, page_key

    run_id = row_id("judge run", run_id)
    options = agreement_options(request.args)
    _require(run_id)
    return _shown(
        page_key("agreement", run_id, options),
        "dashboard/agreement.html",
        lambda c: agreement_page.agreement_page(run_id, options, c),
    )


@bp.get("/judge-runs/<int:run_id>/checks")
@login_required
def checks(run_id: int) -> ResponseReturnValue:
    from server.usecases.dashboard import checks_options, page_key

    run_id = row_id("judge run", run_id)
    options = checks_options(request.args)
    _require(run_id)
    return _shown(
        page_key("checks", run_id, options),
        "dashboard/checks.html",
        lambda c: checks_page.checks_page(run_id, options, c),
    )


def _require(run_id: int) -> None:
    """With ``require_qualified=true`` in the query: ``UnqualifiedError`` (the error page,
    409, naming the rubric and why) unless the judge is validated for every rubric it
    scored, as the report and diagnostics routes of the API answer."""
    if request.args.get("require_qualified") in ("1", "true", "on"):
        from server.db import get_session
        from server.usecases.standing import require_qualified

        require_qualified(get_session(), run_id)


def _shown(
    key: PageKey, template: str, build: Callable[[Computed[Any]], Any]
) -> ResponseReturnValue:
    """The page of ``key`` from its figures, never computed in the request (``bounded``):
    fresh; the latest kept ones with a banner (``stale``); or, none ever kept, a page that
    reloads itself (202)."""
    got = bounded(key)
    if isinstance(got, Pending):
        every = max(2, got.retry_after_s)
        html = render_template(
            "dashboard/computing.html",
            pending=got,
            what=WHAT.get(key.page, key.page),
            every=every,
            reload_url=reload_url(),
        )
        return html, 202, {"Retry-After": str(every)}
    if isinstance(got, Stale):
        page, stale = build(got.computed), got
    else:
        page, stale = build(got), None
    return render_template(template, page=page, stale=stale, reload_url=reload_url())
