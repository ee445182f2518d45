"""Release gates' verdicts kept.

``gateverdict`` holds each evaluation of a gates file by ``fairjudge gate`` (the name it is
kept under, the file, passed or not, the counts, when and how long, the verdict's JSON), so
the API (``GET /api/v1/gates``) and the dashboard show the last verdicts. The table is new; no
existing row changes.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateverdict",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("n_gates", sa.Integer(), nullable=False),
        sa.Column("n_failed", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("evaluated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_gateverdict_name", "gateverdict", ["name"])


def downgrade() -> None:
    op.drop_index("ix_gateverdict_name", table_name="gateverdict")
    op.drop_table("gateverdict")
