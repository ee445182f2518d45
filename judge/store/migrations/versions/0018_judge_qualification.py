"""Judge qualifications (issue 42).

``judgequalification``: one row per ``fairjudge judge-audit qualify`` of a judge
configuration for one rubric: the configuration it covers, the evidence, the rule and its
outcome. A new table: no existing row changes.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judgequalification",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge_run_id", sa.Integer(), nullable=False),
        sa.Column("generation_run_id", sa.Integer(), nullable=False),
        sa.Column("base_url", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("prompt_variant", sa.String(), nullable=False),
        sa.Column("template_hash", sa.String(), nullable=False),
        sa.Column("rubric", sa.String(), nullable=False),
        sa.Column("scale", sa.String(), nullable=False),
        sa.Column("temperature", sa.Float(), nullable=False),
        sa.Column("epsilon", sa.Float(), nullable=False),
        sa.Column("n_ratings", sa.Integer(), nullable=False),
        sa.Column("n_raters", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.Column("rule", sa.JSON(), nullable=True),
        sa.Column("evidence", sa.JSON(), nullable=True),
        sa.Column("ratings_through", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["judge_run_id"], ["judgerun.id"]),
        sa.ForeignKeyConstraint(["generation_run_id"], ["generationrun.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_judgequalification_judge_run_id", "judgequalification", ["judge_run_id"])
    op.create_index("ix_judgequalification_model", "judgequalification", ["model"])
    op.create_index("ix_judgequalification_rubric", "judgequalification", ["rubric"])


def downgrade() -> None:
    for name in ("rubric", "model", "judge_run_id"):
        op.drop_index(f"ix_judgequalification_{name}", table_name="judgequalification")
    op.drop_table("judgequalification")
