"""A judge-pairs run's cost bound kept with it.

``max_cost`` on ``pairwiseimport``, the table that holds both imported pairwise records and
FairJudge's own pairwise judge runs (``fairjudge judge-pairs``): the bound ``--max-cost`` gave,
kept across reruns as 0016 keeps a generation, judge or audit run's. Existing rows get NULL:
no bound.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pairwiseimport") as batch:
        batch.add_column(sa.Column("max_cost", sa.Float(), nullable=True))


def downgrade() -> None:
    # Dropped in place (SQLite 3.35+ and PostgreSQL), as 0016 does.
    with op.batch_alter_table("pairwiseimport", recreate="never") as batch:
        batch.drop_column("max_cost")
