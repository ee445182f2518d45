"""Dashboard figures kept in the store.

``dashboardfigure`` holds a page's figures as computed at one version of the store (the
page's key, the version, when and how long, the figures pickled and compressed), so every
web worker and every restart reuses them and a job computes a run's pages as it ends
(server.usecases.figures). The table is new; no existing row changes.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboardfigure",
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("page", sa.String(), nullable=False),
        sa.Column("judge_run_id", sa.Integer(), nullable=True),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_dashboardfigure_judge_run_id", "dashboardfigure", ["judge_run_id"])


def downgrade() -> None:
    op.drop_index("ix_dashboardfigure_judge_run_id", table_name="dashboardfigure")
    op.drop_table("dashboardfigure")
