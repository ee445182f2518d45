"""The pages over several judge runs that issue 44 added beside the comparison page: a jury
of runs (``jury_page``), a drift series (``drift_page``), and the release gates' last
verdicts as ``fairjudge gate`` kept them."""

from __future__ import annotations

from flask import current_app, render_template, request
from flask.typing import ResponseReturnValue

from judge.errors import InvalidInputError
from server.dashboard import bp, drift_page, jury_page
from server.dashboard.access import login_required
from server.dashboard.comparisons import _picked
from server.db import get_session


def _choice(name: str, allowed: tuple[str, ...]) -> str:
    """The query's ``name`` (the first of ``allowed`` without it); InvalidInputError naming
    the choices for another value."""
    value = request.args.get(name) or allowed[0]
    if value not in allowed:
        raise InvalidInputError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    return value


@bp.get("/jury")
@login_required
def jury() -> ResponseReturnValue:
    page = jury_page.jury_page(
        get_session(),
        current_app.config.get("SETTINGS"),
        _picked(),
        _choice("combine", jury_page.COMBINE),
        _choice("statistic", jury_page.STATISTICS),
    )
    return render_template("dashboard/jury.html", page=page)


@bp.get("/drift")
@login_required
def drift() -> ResponseReturnValue:
    page = drift_page.drift_page(get_session(), _picked(), request.args.getlist("figure"))
    return render_template("dashboard/drift.html", page=page)


@bp.get("/gates")
@login_required
def gates() -> ResponseReturnValue:
    from server.usecases.release_gates import last_verdicts

    return render_template("dashboard/gates.html", verdicts=last_verdicts(get_session()))
