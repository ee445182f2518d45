"""The web layer's database session: one per request, rolled back on error, closed on
teardown; and the secret that signs the dashboard's session cookie."""

from __future__ import annotations

from flask import Flask, current_app, g
from sqlmodel import Session

from judge.store.engine import make_engine


def init_app(app: Flask) -> None:
    url = app.config["SETTINGS"].database_url
    app.extensions["fairjudge_engine"] = make_engine(url, migrate=False)
    app.teardown_appcontext(close_session)


def get_session() -> Session:
    if "session" not in g:
        g.session = Session(current_app.extensions["fairjudge_engine"])
    return g.session  # type: ignore[no-any-return]


def close_session(exc: BaseException | None) -> None:
    session = g.pop("session", None)
    if session is not None:
        if exc is not None:
            session.rollback()
        session.close()
