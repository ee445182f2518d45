"""The web dashboard: server-rendered pages (Jinja templates, no front-end build step).

One module per page group: ``login`` (sign in with an API key, sign out), ``overview`` (runs
and jobs, live), ``judge_runs`` (a judge run's report), ``jobs`` (start a judge job, watch
it). ``pages`` gathers what each page shows; ``access`` owns the signed-in state.
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


@bp.context_processor
def _form_token() -> dict[str, object]:
    """Templates of the dashboard put ``csrf_token()`` in every form they POST."""
    return {"csrf_token": csrf_token}


# The view modules attach their routes to ``bp``; importing them registers the pages.
from server.dashboard import errors, jobs, judge_runs, login, overview  # noqa: E402

__all__ = ["bp", "errors", "jobs", "judge_runs", "login", "overview"]
