"""The store's schema: where a database stands among the migrations, and bringing it up to
date (Alembic, owned by ``judge.store.engine``)."""

from __future__ import annotations

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
