"""Who is signed in to the dashboard, and the form token that guards its POSTs.

A user signs in by pasting an API key once. The signed session cookie then holds a random
token of a session kept in the store (``websession``, only the token's hash), never the key:
the cookie is signed, not encrypted, so anyone who holds it can read it. Every request looks
the session and its key up again, so signing out, revoking the key or the session's age ends
it at the next click, for every copy of the cookie.
"""

from __future__ import annotations

import functools
import hmac
import secrets
from collections.abc import Callable
from typing import ParamSpec, TypeVar
from urllib.parse import urlsplit

from flask import g, redirect, request, session, url_for
from flask.typing import ResponseReturnValue
from sqlmodel import Session

from judge.errors import InvalidInputError
from server.auth import (
    COOKIE_TOKEN,
    ApiKey,
    close_web_session,
    open_web_session,
    web_session_key,
)

P = ParamSpec("P")
R = TypeVar("R")

TOKEN = COOKIE_TOKEN
CSRF = "csrf"


def remember(db: Session, key: ApiKey) -> None:
    """Sign ``key`` in: a new stored session, and a fresh cookie (no state of an earlier
    user survives)."""
    session.clear()
    session[TOKEN] = open_web_session(db, key)


def forget(db: Session) -> None:
    """Sign out: the stored session is revoked, then the cookie cleared."""
    token = session.get(TOKEN)
    if isinstance(token, str):
        close_web_session(db, token)
    session.clear()


def signed_in_key(db: Session) -> ApiKey | None:
    """The live key of the cookie's session, or None (not signed in, signed out, expired, or
    the key was revoked)."""
    token = session.get(TOKEN)
    return web_session_key(db, token) if isinstance(token, str) else None


def current_key() -> ApiKey:
    """The key of the request (set by ``login_required``)."""
    key: ApiKey = g.dashboard_key
    return key


def login_required(view: Callable[P, R]) -> Callable[P, R | ResponseReturnValue]:
    """Run ``view`` for a signed-in user; send anyone else to the login page, then back."""

    @functools.wraps(view)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R | ResponseReturnValue:
        from server.db import get_session

        key = signed_in_key(get_session())
        if key is None:
            session.clear()
            return redirect(url_for("dashboard.login", next=request.full_path.rstrip("?")))
        g.dashboard_key = key
        return view(*args, **kwargs)

    return wrapped


def csrf_token() -> str:
    """The session's token for forms (made on first use); templates call it."""
    if CSRF not in session:
        session[CSRF] = secrets.token_urlsafe(32)
    token: str = session[CSRF]
    return token


def check_csrf() -> None:
    """InvalidInputError unless the POSTed form carries the session's token: a page on
    another site cannot submit the dashboard's forms with the user's cookie."""
    sent = request.form.get(CSRF, "")
    expected = session.get(CSRF)
    if not isinstance(expected, str) or not hmac.compare_digest(sent, expected):
        raise InvalidInputError(
            "the form has expired or did not come from this dashboard; reload the page and "
            "submit it again"
        )


def local_path(target: str | None, default: str) -> str:
    """``target`` when it is a path on this site (``/jobs/3``), else ``default``: the
    login page's ``next`` must not send people to another site."""
    if not target:
        return default
    # Browsers read "/\\host" like "//host" (another site): a backslash is refused too.
    parts = urlsplit(target)
    on_site = target.startswith("/") and not target.startswith("//") and "\\" not in target
    return target if on_site and not parts.scheme and not parts.netloc else default
