"""The server: API keys, background jobs, registered rubrics, imported answers.

Adds the ``apikey``, ``job`` and ``rubric`` tables; gives ``generationrun`` its source
(generated or imported), ``response`` an imported answer's own metadata, ``judgerun`` the
rubric set it applied, and ``judgment`` the version and hash of the rubric it used. Existing
runs were generated and judged with the built-in FairMonitor rubrics, which is what the new
columns' defaults say; existing judgments leave the rubric version and hash empty (unknown).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "rubric",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("text_hash", sa.String(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=True),
        sa.Column("source", sa.Text(), nullable=True),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", "version"),
    )
    op.create_index("ix_rubric_name", "rubric", ["name"])

    op.create_table(
        "apikey",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("prefix", sa.String(), nullable=False),
        sa.Column("key_hash", sa.String(), nullable=False),
        _timestamp("created_at"),
        _timestamp("last_used_at", nullable=True),
        _timestamp("revoked_at", nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_apikey_name", "apikey", ["name"], unique=True)
    op.create_index("ix_apikey_key_hash", "apikey", ["key_hash"], unique=True)

    op.create_table(
        "job",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("worker", sa.String(), nullable=True),
        sa.Column("lease_expires_at", sa.Float(), nullable=True),
        sa.Column("created_by", sa.String(), nullable=True),
        _timestamp("created_at"),
        _timestamp("started_at", nullable=True),
        _timestamp("finished_at", nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_job_kind", "job", ["kind"])
    op.create_index("ix_job_status", "job", ["status"])

    # ADD COLUMN without a table copy (see 0005): the defaults fill existing rows.
    with op.batch_alter_table("generationrun", recreate="never") as batch:
        batch.add_column(
            sa.Column("source", sa.String(), nullable=False, server_default="generated")
        )
    with op.batch_alter_table("response", recreate="never") as batch:
        batch.add_column(sa.Column("extra", sa.JSON(), nullable=True))
    with op.batch_alter_table("judgerun", recreate="never") as batch:
        batch.add_column(
            sa.Column("rubric_set", sa.String(), nullable=False, server_default="fairmonitor")
        )
    with op.batch_alter_table("judgment", recreate="never") as batch:
        batch.add_column(sa.Column("rubric_version", sa.String(), nullable=True))
        batch.add_column(sa.Column("rubric_hash", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("judgment", recreate="never") as batch:
        batch.drop_column("rubric_hash")
        batch.drop_column("rubric_version")
    with op.batch_alter_table("judgerun", recreate="never") as batch:
        batch.drop_column("rubric_set")
    with op.batch_alter_table("response", recreate="never") as batch:
        batch.drop_column("extra")
    with op.batch_alter_table("generationrun", recreate="never") as batch:
        batch.drop_column("source")
    for table in ("job", "apikey", "rubric"):
        op.drop_table(table)
