"""The store's schema: where a database stands among the migrations, and bringing it up to
date (Alembic, owned by ``judge.store.engine``)."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any


def upgrade_store(database_url: str) -> dict[str, Any]:
    """Apply every migration the database lacks: the revisions before and after, and
    whether anything changed."""
    from judge.store.engine import upgrade

    done = upgrade(database_url)
    return {"before": done.before, "after": done.after, "changed": done.changed}


def store_revision(database_url: str) -> dict[str, Any]:
    """The database (its URL without a password), its schema revision, the newest this
    FairJudge knows, and whether it is at that one."""
    from judge.store.engine import head_revision, masked, revision_at

    revision = revision_at(database_url)
    head = head_revision()
    return {
        "database": masked(database_url),
        "revision": revision,
        "head": head,
        "up_to_date": revision == head,
    }


def secret_key(state_dir: str) -> str:
    """The server's secret: it signs session cookies and the dashboard's kept figures
    (server.usecases.figures). Made once, kept in ``<state_dir>/server-secret``
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
