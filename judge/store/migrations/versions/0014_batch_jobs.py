"""Batches of model calls sent through a provider's Batch API.

``batchjob`` holds one row per batch of a run's calls (``fairjudge judge RUN --batch``): the
calls' keys, the input file's name and id, the batch's id and status, and what was collected
from it. Each step is written down before it is taken, so an interrupted command resumes its
batch (judge.models.batching). The table is new; no existing row changes.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def _timestamp(name: str, *, nullable: bool = True) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "batchjob",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_kind", sa.String(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("purpose", sa.String(), nullable=False),
        sa.Column("endpoint_name", sa.String(), nullable=False),
        sa.Column("base_url", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("input_name", sa.String(), nullable=False),
        sa.Column("keys", sa.JSON(), nullable=True),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("input_file_id", sa.String(), nullable=True),
        sa.Column("batch_id", sa.String(), nullable=True),
        sa.Column("batch_status", sa.String(), nullable=True),
        sa.Column("output_file_id", sa.String(), nullable=True),
        sa.Column("error_file_id", sa.String(), nullable=True),
        sa.Column("request_counts", sa.JSON(), nullable=True),
        sa.Column("answered", sa.Integer(), nullable=False),
        sa.Column("failures", sa.JSON(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        _timestamp("created_at", nullable=False),
        _timestamp("uploaded_at"),
        _timestamp("submitted_at"),
        _timestamp("collected_at"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_batchjob_run_id", "batchjob", ["run_id"])
    op.create_index("ix_batchjob_state", "batchjob", ["state"])
    op.create_index("ix_batchjob_input_name", "batchjob", ["input_name"], unique=True)
    op.create_index("ix_batchjob_batch_id", "batchjob", ["batch_id"])


def downgrade() -> None:
    for index in ("batch_id", "input_name", "state", "run_id"):
        op.drop_index(f"ix_batchjob_{index}", table_name="batchjob")
    op.drop_table("batchjob")
