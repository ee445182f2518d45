"""No secret stays in a stored base URL, in any form refused today.

Revision 0010 redacted the forms its release refused; ``;key=`` matrix parameters (and a
``name=value`` path segment naming a credential) were let through until later, so runs made
in between still hold them. This revision passes every stored base URL through today's
``judge.endpoint_url.redacted`` again: ``base_url`` of ``generationrun``, ``judgerun``,
``auditrun``, ``itemgenerationcall`` and ``batchjob``, and ``item.provenance["base_url"]``.
A URL without a secret is left exactly as written.

No schema change. Run identity is untouched (a judge run's ``config_hash`` was fixed by
0010), and such a run could not be resumed anyway: its URL is refused at configuration now.
Downgrading keeps the redaction (the secret is gone for good).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

URL_TABLES = ("generationrun", "judgerun", "auditrun", "itemgenerationcall", "batchjob")
"""Every table with a ``base_url`` column."""


def _redact(url: str) -> str:
    # Redaction only ever removes more: the current detector is the right one to use.
    from judge.endpoint_url import redacted

    return redacted(url)


def upgrade() -> None:
    conn = op.get_bind()
    for name in URL_TABLES:
        table = sa.table(name, sa.column("id", sa.Integer()), sa.column("base_url", sa.String()))
        for row_id, url in conn.execute(sa.select(table.c.id, table.c.base_url)).all():
            clean = _redact(url or "")
            if url and clean != url:
                conn.execute(table.update().where(table.c.id == row_id).values(base_url=clean))
    item = sa.table("item", sa.column("id", sa.Integer()), sa.column("provenance", sa.JSON()))
    for row_id, provenance in conn.execute(
        sa.select(item.c.id, item.c.provenance).where(item.c.provenance.is_not(None))
    ).all():
        fixed = _clean_provenance(provenance)
        if fixed is not None:
            conn.execute(item.update().where(item.c.id == row_id).values(provenance=fixed))


def _clean_provenance(provenance: Any) -> dict[str, Any] | None:
    """The provenance with its base_url redacted, or None when nothing changes."""
    if isinstance(provenance, str):  # a JSON column read back as text by some drivers
        provenance = json.loads(provenance)
    if not isinstance(provenance, dict) or not isinstance(provenance.get("base_url"), str):
        return None
    clean = _redact(provenance["base_url"])
    if clean == provenance["base_url"]:
        return None
    return {**provenance, "base_url": clean}


def downgrade() -> None:
    # Nothing to undo in the schema, and a removed secret is not put back.
    pass
