"""Baseline: the tables as the last release before migrations created them with create_all.

A database made by that release has exactly these tables and no ``alembic_version`` table;
``judge.store.engine`` stamps it at this revision and upgrades it from here. The types are
SQLAlchemy's own (``String`` for SQLModel's ``AutoString``, ``DateTime(timezone=True)`` for
its ``UTCDateTime``) so this file means the same whatever SQLModel later becomes.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _usage() -> list[sa.Column[Any]]:
    """Token counts and latency, kept for every model call's row."""
    return [
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "dataset",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_dataset_name", "dataset", ["name"], unique=True)

    op.create_table(
        "callcache",
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("finish_reason", sa.String(), nullable=True),
        *_usage(),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("key"),
    )

    op.create_table(
        "item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("stage", sa.String(), nullable=False),
        sa.Column("factor", sa.String(), nullable=False),
        sa.Column("scenario", sa.String(), nullable=False),
        sa.Column("fields", sa.JSON(), nullable=True),
        sa.Column("content_hash", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dataset_id", "key"),
        sa.ForeignKeyConstraint(["dataset_id"], ["dataset.id"]),
    )
    op.create_index("ix_item_dataset_id", "item", ["dataset_id"])

    op.create_table(
        "generationrun",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("endpoint_name", sa.String(), nullable=False),
        sa.Column("base_url", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("temperature", sa.Float(), nullable=False),
        sa.Column("max_tokens", sa.Integer(), nullable=False),
        sa.Column("template_version", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        _timestamp("created_at"),
        _timestamp("finished_at", nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.ForeignKeyConstraint(["dataset_id"], ["dataset.id"]),
    )
    op.create_index("ix_generationrun_dataset_id", "generationrun", ["dataset_id"])

    op.create_table(
        "response",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("part", sa.String(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("raw_text", sa.Text(), nullable=True),
        sa.Column("flag", sa.String(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("finish_reason", sa.String(), nullable=True),
        *_usage(),
        sa.Column("cache_key", sa.String(), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "item_id", "part"),
        sa.ForeignKeyConstraint(["run_id"], ["generationrun.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
    )
    op.create_index("ix_response_item_id", "response", ["item_id"])
    op.create_index("ix_response_run_id", "response", ["run_id"])

    op.create_table(
        "judgerun",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("generation_run_id", sa.Integer(), nullable=False),
        sa.Column("endpoint_name", sa.String(), nullable=False),
        sa.Column("base_url", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("prompt_variant", sa.String(), nullable=False),
        sa.Column("temperature", sa.Float(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("aggregation", sa.String(), nullable=False),
        sa.Column("max_tokens", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        _timestamp("created_at"),
        _timestamp("finished_at", nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("generation_run_id", "config_hash"),
        sa.ForeignKeyConstraint(["generation_run_id"], ["generationrun.id"]),
    )
    op.create_index("ix_judgerun_generation_run_id", "judgerun", ["generation_run_id"])

    op.create_table(
        "judgment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge_run_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("rubric", sa.String(), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("score", sa.Integer(), nullable=True),
        sa.Column("explanation", sa.Text(), nullable=True),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("raw_output", sa.Text(), nullable=True),
        sa.Column("repair_output", sa.Text(), nullable=True),
        sa.Column("template_version", sa.String(), nullable=False),
        sa.Column("prompt_hash", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=True),
        *_usage(),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("cache_key", sa.String(), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("judge_run_id", "item_id", "rubric", "sample_index"),
        sa.ForeignKeyConstraint(["judge_run_id"], ["judgerun.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
    )
    op.create_index("ix_judgment_item_id", "judgment", ["item_id"])
    op.create_index("ix_judgment_judge_run_id", "judgment", ["judge_run_id"])

    op.create_table(
        "humanrating",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("generation_run_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("rubric", sa.String(), nullable=False),
        sa.Column("rater", sa.String(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=True),
        sa.Column("source", sa.String(), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("generation_run_id", "item_id", "rubric", "rater"),
        sa.ForeignKeyConstraint(["generation_run_id"], ["generationrun.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
    )
    op.create_index("ix_humanrating_generation_run_id", "humanrating", ["generation_run_id"])
    op.create_index("ix_humanrating_item_id", "humanrating", ["item_id"])


def downgrade() -> None:
    for table in (
        "humanrating",
        "judgment",
        "judgerun",
        "response",
        "generationrun",
        "item",
        "callcache",
        "dataset",
    ):
        op.drop_table(table)  # dropping a table drops its indexes too
