"""Pairwise verdicts imported from files (issue 45).

``pairwiseimport``: one row per ``fairjudge judgments import``; ``pairwiseverdict``: one
judge's verdict (A, B, tie or unreadable) per question, answer pair, order and repetition.
New tables: no existing row changes.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pairwiseimport",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("format", sa.String(), nullable=False),
        sa.Column("sha256", sa.String(), nullable=False),
        sa.Column("records", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "pairwiseverdict",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("import_id", sa.Integer(), nullable=False),
        sa.Column("judge", sa.String(), nullable=False),
        sa.Column("question", sa.String(), nullable=False),
        sa.Column("model_first", sa.String(), nullable=False),
        sa.Column("model_second", sa.String(), nullable=False),
        sa.Column("repetition", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(), nullable=False),
        sa.Column("category", sa.String(), nullable=True),
        sa.Column("raw", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["import_id"], ["pairwiseimport.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("judge", "question", "model_first", "model_second", "repetition"),
    )
    op.create_index("ix_pairwiseverdict_import_id", "pairwiseverdict", ["import_id"])
    op.create_index("ix_pairwiseverdict_judge", "pairwiseverdict", ["judge"])


def downgrade() -> None:
    op.drop_index("ix_pairwiseverdict_judge", table_name="pairwiseverdict")
    op.drop_index("ix_pairwiseverdict_import_id", table_name="pairwiseverdict")
    op.drop_table("pairwiseverdict")
    op.drop_table("pairwiseimport")
