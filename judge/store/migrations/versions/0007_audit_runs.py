"""Audit runs: the audit suites sent to a model, their answers and the classes given to them.

Adds the ``auditrun``, ``auditanswer`` and ``auditlabel`` tables; nothing existing changes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "auditrun",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(), nullable=False),
        sa.Column("endpoint_name", sa.String(), nullable=False),
        sa.Column("base_url", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("temperature", sa.Float(), nullable=False),
        sa.Column("max_tokens", sa.Integer(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("config_hash", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("status_detail", sa.Text(), nullable=True),
        _timestamp("created_at"),
        _timestamp("finished_at", nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_auditrun_suite", "auditrun", ["suite"])
    op.create_index("ix_auditrun_config_hash", "auditrun", ["config_hash"])

    op.create_table(
        "auditanswer",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("turn", sa.String(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("raw_text", sa.Text(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("finish_reason", sa.String(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("cache_key", sa.String(), nullable=False),
        _timestamp("created_at"),
        sa.ForeignKeyConstraint(["run_id"], ["auditrun.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "key", "turn"),
    )
    op.create_index("ix_auditanswer_run_id", "auditanswer", ["run_id"])

    op.create_table(
        "auditlabel",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("answer_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("label", sa.String(), nullable=True),
        sa.Column("explanation", sa.Text(), nullable=True),
        sa.Column("raw_text", sa.Text(), nullable=True),
        sa.Column("cache_key", sa.String(), nullable=True),
        _timestamp("created_at"),
        sa.ForeignKeyConstraint(["answer_id"], ["auditanswer.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["auditrun.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("answer_id", "source"),
    )
    op.create_index("ix_auditlabel_answer_id", "auditlabel", ["answer_id"])
    op.create_index("ix_auditlabel_run_id", "auditlabel", ["run_id"])


def downgrade() -> None:
    for table in ("auditlabel", "auditanswer", "auditrun"):
        op.drop_table(table)
