"""A run's cost bound kept with it.

``max_cost`` on generation, judge and audit runs: the bound ``--max-cost`` set, so that it
holds for the run as a whole across reruns (judge.costs.run_budget). Nullable, no default:
every existing run has no bound, as before.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

RUN_TABLES = ("generationrun", "judgerun", "auditrun")


def upgrade() -> None:
    for table in RUN_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("max_cost", sa.Float(), nullable=True))


def downgrade() -> None:
    # Dropped in place (SQLite 3.35+ and PostgreSQL): copying a run table to drop a column
    # would break the foreign keys that point at it.
    for table in RUN_TABLES:
        with op.batch_alter_table(table, recreate="never") as batch:
            batch.drop_column("max_cost")
