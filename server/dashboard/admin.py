"""Pages for admins only: the API keys (never the keys themselves) and the annotators. A
member's key gets 403 here, as it does from the API's admin routes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from flask import render_template
from flask.typing import ResponseReturnValue

from server.auth import list_keys, require_role
from server.dashboard import bp
from server.dashboard.access import current_key, login_required
from server.dashboard.web import engine
from server.db import get_session

P = ParamSpec("P")
R = TypeVar("R")


def admin_only(view: Callable[P, R]) -> Callable[P, R]:
    """ForbiddenError (a 403 page) unless the signed-in key is an admin's."""

    @functools.wraps(view)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        require_role(current_key(), "admin")
        return view(*args, **kwargs)

    return wrapped


@bp.get("/admin/keys")
@login_required
@admin_only
def keys() -> ResponseReturnValue:
    return render_template("dashboard/keys.html", keys=list_keys(get_session()))


@bp.get("/admin/annotators")
@login_required
@admin_only
def annotators() -> ResponseReturnValue:
    from server.usecases.campaigns import list_annotators

    return render_template("dashboard/annotators.html", annotators=list_annotators(engine()))
