"""Annotation campaigns in Label Studio, rating history, and expert reviews of items.

Adds the ``campaign``, ``campaigntask``, ``annotator`` and ``ratingchange`` tables; gives
``humanrating`` the columns a rating pulled from Label Studio needs (its campaign, the
annotation's id, when it was last edited, the annotator's lead time, and when it was
withdrawn); gives ``item`` its review status and the latest review. Existing rows keep their
values; the new columns start empty.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "campaign",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("generation_run_id", sa.Integer(), nullable=True),
        sa.Column("judge_run_id", sa.Integer(), nullable=True),
        sa.Column("rubrics", sa.JSON(), nullable=True),
        sa.Column("strategy", sa.String(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("population", sa.Integer(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("annotators", sa.Integer(), nullable=False),
        sa.Column("design", sa.JSON(), nullable=True),
        sa.Column("ls_url", sa.String(), nullable=False),
        sa.Column("ls_project_id", sa.Integer(), nullable=True),
        _timestamp("created_at"),
        _timestamp("pulled_at", nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.ForeignKeyConstraint(["dataset_id"], ["dataset.id"]),
        sa.ForeignKeyConstraint(["generation_run_id"], ["generationrun.id"]),
        sa.ForeignKeyConstraint(["judge_run_id"], ["judgerun.id"]),
    )
    op.create_index("ix_campaign_name", "campaign", ["name"], unique=True)
    op.create_index("ix_campaign_dataset_id", "campaign", ["dataset_id"])

    op.create_table(
        "campaigntask",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("task_key", sa.String(), nullable=False),
        sa.Column("stratum", sa.String(), nullable=False),
        sa.Column("inclusion_probability", sa.Float(), nullable=False),
        sa.Column("ls_task_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("campaign_id", "item_id"),
        sa.UniqueConstraint("task_key"),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaign.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
    )
    op.create_index("ix_campaigntask_campaign_id", "campaigntask", ["campaign_id"])

    op.create_table(
        "annotator",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("ls_user_id", sa.Integer(), nullable=True),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_annotator_email", "annotator", ["email"], unique=True)

    op.create_table(
        "ratingchange",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rating_id", sa.Integer(), nullable=False),
        sa.Column("change", sa.String(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=True),
        _timestamp("valid_until"),
        sa.PrimaryKeyConstraint("id"),
        sa.ForeignKeyConstraint(["rating_id"], ["humanrating.id"]),
    )
    op.create_index("ix_ratingchange_rating_id", "ratingchange", ["rating_id"])

    # Plain ALTER TABLE ... ADD COLUMN (no table copy): SQLite cannot drop and recreate
    # ``item`` or ``humanrating`` while other tables' foreign keys point at them. So
    # ``humanrating.campaign_id`` is an indexed column without a foreign-key constraint.
    with op.batch_alter_table("humanrating", recreate="never") as batch:
        batch.add_column(sa.Column("campaign_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("annotation_id", sa.Integer(), nullable=True))
        batch.add_column(_timestamp("updated_at", nullable=True))
        batch.add_column(sa.Column("lead_time_s", sa.Float(), nullable=True))
        batch.add_column(_timestamp("withdrawn_at", nullable=True))
    op.create_index("ix_humanrating_campaign_id", "humanrating", ["campaign_id"])
    with op.batch_alter_table("item", recreate="never") as batch:
        batch.add_column(sa.Column("review_status", sa.String(), nullable=True))
        batch.add_column(sa.Column("review", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("item", recreate="never") as batch:
        batch.drop_column("review")
        batch.drop_column("review_status")
    op.drop_index("ix_humanrating_campaign_id", "humanrating")
    with op.batch_alter_table("humanrating", recreate="never") as batch:
        for column in ("withdrawn_at", "lead_time_s", "updated_at", "annotation_id"):
            batch.drop_column(column)
        batch.drop_column("campaign_id")
    for table in ("ratingchange", "annotator", "campaigntask", "campaign"):
        op.drop_table(table)
