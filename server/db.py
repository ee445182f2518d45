"""The web layer's database session: one per request, rolled back on error, closed on
teardown; and the secret that signs the dashboard's session cookie."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

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


def secret_key(state_dir: str) -> str:
    """The key that signs session cookies: made once, kept in ``<state_dir>/server-secret``
    (mode 0600), so that every web worker and every restart shares it."""
    path = Path(state_dir) / "server-secret"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another worker is writing it
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(32))
    for _ in range(50):
        if key := path.read_text().strip():
            return key
        time.sleep(0.02)
    raise RuntimeError(f"{path} is empty; delete it and start the server again")
