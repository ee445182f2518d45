"""Dataset generation: items written by a model, and the calls that asked for them.

- ``item.provenance``: where a generated item came from (endpoint, model, prompt version and
  hash, parameters, the call's cache key, the request, time); None for items written by hand
  or imported without one. Existing items get None.
- ``itemgenerationcall``: one row per call that asked an endpoint for items of one cell
  (stage x factor x scenario) of a dataset, with its raw reply, the items it added, the
  rejections and the near-duplicates skipped; unique on (dataset, cell, attempt), so a rerun
  knows which attempts are stored.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN without a table copy (see 0005): existing items get NULL.
    with op.batch_alter_table("item", recreate="never") as batch:
        batch.add_column(sa.Column("provenance", sa.JSON(), nullable=True))
    op.create_table(
        "itemgenerationcall",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(), nullable=False),
        sa.Column("factor", sa.String(), nullable=False),
        sa.Column("scenario", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("asked", sa.Integer(), nullable=False),
        sa.Column("endpoint_name", sa.String(), nullable=False),
        sa.Column("base_url", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("prompt_version", sa.String(), nullable=False),
        sa.Column("prompt_hash", sa.String(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("cache_key", sa.String(), nullable=False),
        sa.Column("cached", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("raw_text", sa.Text(), nullable=True),
        sa.Column("finish_reason", sa.String(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("problems", sa.JSON(), nullable=True),
        sa.Column("added", sa.Integer(), nullable=False),
        sa.Column("added_keys", sa.JSON(), nullable=True),
        sa.Column("duplicates", sa.JSON(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["dataset.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dataset_id", "stage", "factor", "scenario", "attempt"),
    )
    op.create_index("ix_itemgenerationcall_dataset_id", "itemgenerationcall", ["dataset_id"])


def downgrade() -> None:
    op.drop_table("itemgenerationcall")
    with op.batch_alter_table("item", recreate="never") as batch:
        batch.drop_column("provenance")
