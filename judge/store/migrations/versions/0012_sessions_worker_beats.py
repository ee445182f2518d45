"""Dashboard sessions kept in the store, and job workers' heartbeats.

``websession`` holds one row per dashboard sign-in (the sha256 of the cookie's random token,
the key, when it was made and when it was revoked): signing out revokes the row, so a copied
cookie stops working. ``workerbeat`` holds one row per job worker (host:pid) with its last
heartbeat, which ``/api/v1/health`` reports. Both tables are new; no existing row changes.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "websession",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(), nullable=False),
        sa.Column("key_id", sa.Integer(), nullable=False),
        _timestamp("created_at"),
        _timestamp("revoked_at", nullable=True),
        sa.ForeignKeyConstraint(["key_id"], ["apikey.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_websession_token_hash", "websession", ["token_hash"], unique=True)
    op.create_index("ix_websession_key_id", "websession", ["key_id"])

    op.create_table(
        "workerbeat",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(), nullable=False),
        _timestamp("started_at"),
        _timestamp("beat_at"),
        _timestamp("stopped_at", nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_workerbeat_worker", "workerbeat", ["worker"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_workerbeat_worker", table_name="workerbeat")
    op.drop_table("workerbeat")
    op.drop_index("ix_websession_key_id", table_name="websession")
    op.drop_index("ix_websession_token_hash", table_name="websession")
    op.drop_table("websession")
