"""The parts of a job that Celery workers split between them.

``jobpart`` holds one row per part of a judge or generation job run on Celery workers
(``[workers] broker_url``): the part's items, its status, the worker on it and its progress.
The table is new; no existing row changes.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _timestamp(name: str) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=True)


def upgrade() -> None:
    op.create_table(
        "jobpart",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("item_ids", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("worker", sa.String(), nullable=True),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        _timestamp("sent_at"),
        _timestamp("started_at"),
        _timestamp("finished_at"),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "number"),
    )
    op.create_index("ix_jobpart_job_id", "jobpart", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_jobpart_job_id", table_name="jobpart")
    op.drop_table("jobpart")
