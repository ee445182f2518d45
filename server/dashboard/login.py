"""Sign in with an API key (pasted once, never shown again) and sign out."""

from __future__ import annotations

from flask import redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from server.auth import AuthError, authenticate
from server.dashboard import bp
from server.dashboard.access import check_csrf, forget, local_path, remember
from server.db import get_session
from server.errors import status_for

NO_KEY = "paste an API key (an admin creates one with `fairjudge keys create`)"


@bp.route("/login", methods=["GET", "POST"])
def login() -> ResponseReturnValue:
    target = local_path(request.values.get("next"), url_for("dashboard.overview"))
    if request.method == "GET":
        return render_template("dashboard/login.html", next=target)
    check_csrf()
    raw = request.form.get("key", "").strip()
    try:
        if not raw:
            raise AuthError(NO_KEY)
        key = authenticate(get_session(), raw)
    except AuthError as exc:
        # The form comes back empty: a refused key is not echoed into the page.
        return render_template("dashboard/login.html", next=target, error=str(exc)), status_for(exc)
    remember(get_session(), key)
    return redirect(target)


@bp.post("/logout")
def logout() -> ResponseReturnValue:
    check_csrf()
    forget(get_session())
    return redirect(url_for("dashboard.login"))
