"""The web dashboard: server-rendered pages (Jinja templates, inline SVG charts drawn in
Python, no front-end build step), one module per page group.

Views (Flask): ``login`` (sign in with an API key, sign out), ``overview`` (runs and jobs,
live), ``datasets`` (coverage heatmaps), ``judge_runs`` (a run: the answer, the grid, the
items; its agreement with people; the judge's own checks), ``comparisons`` (judge runs side by
side and pair by pair), ``watch`` (a jury of runs, a drift series, the release gates' last
verdicts), ``campaigns``, ``audits``, ``jobs`` (every kind, live, and a form for
any kind), ``pairwise`` (imported pairwise judgments' position figures), ``admin`` (keys,
annotators; admins only). What a page shows is gathered without Flask in ``pages``,
``run_page``, ``agreement_page``, ``checks_page``, ``compare_page``, ``jury_page``,
``drift_page``, ``datasets_page``, ``campaign_page``, ``audit_page`` and ``job_form``;
``charts`` draws, ``figures`` turns report figures into charts, ``cache`` keeps figures while
the store is unchanged, ``access`` owns the signed-in state.
"""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint(
    "dashboard",
    __name__,
    template_folder="templates",
    static_folder="static",
    static_url_path="/dashboard/static",
)

from server.dashboard.access import csrf_token  # noqa: E402
from server.dashboard.web import fresh_url  # noqa: E402


@bp.context_processor
def _template_helpers() -> dict[str, object]:
    """Templates of the dashboard put ``csrf_token()`` in every form they POST, and link
    ``fresh_url()`` to compute a page's kept figures again."""
    return {"csrf_token": csrf_token, "fresh_url": fresh_url}


# The view modules attach their routes to ``bp``; importing them registers the pages.
from server.dashboard import (  # noqa: E402
    admin,
    audits,
    campaigns,
    comparisons,
    datasets,
    errors,
    jobs,
    judge_runs,
    login,
    overview,
    pairwise,
    watch,
)

__all__ = [
    "admin",
    "audits",
    "bp",
    "campaigns",
    "comparisons",
    "datasets",
    "errors",
    "jobs",
    "judge_runs",
    "login",
    "overview",
    "pairwise",
    "watch",
]
