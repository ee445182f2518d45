"""Judge trust: derived answer sets, judging in both orders, score probabilities.

- ``generationrun.derived_from`` and ``derivation``: a run whose answers are copies of
  another run's with sensitive words swapped (``fairjudge judge-audit counterfactual``); the
  derivation records the swap kinds, the swap list's hash and what was skipped.
- ``judgerun.swap_order``: the pairwise rubrics were judged with their two texts in both
  orders (``fairjudge judge --swap-order``).
- ``judgment.position``: for such a run, 'given' or 'swapped' (None for a rubric that
  compares no pair); ``score_probs`` and ``expected_score``: the probability of each score
  level read from the score token's log-probabilities (``--aggregation logprob``);
  ``callcache.logprobs``: the token log-probabilities a call returned, so a cached call
  gives them back.

Existing rows keep their values: no derivation, no order swap, no probabilities.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN without a table copy (see 0005): existing rows get NULL or the default.
    # ``derived_from`` carries no foreign key for that reason (SQLite adds one only by copying
    # the table); the code that writes it takes the id from a run it has just read.
    with op.batch_alter_table("generationrun", recreate="never") as batch:
        batch.add_column(sa.Column("derived_from", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("derivation", sa.JSON(), nullable=True))
    op.create_index("ix_generationrun_derived_from", "generationrun", ["derived_from"])
    with op.batch_alter_table("judgerun", recreate="never") as batch:
        batch.add_column(
            sa.Column("swap_order", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("judgment", recreate="never") as batch:
        batch.add_column(sa.Column("position", sa.String(), nullable=True))
        batch.add_column(sa.Column("score_probs", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("expected_score", sa.Float(), nullable=True))
    with op.batch_alter_table("callcache", recreate="never") as batch:
        batch.add_column(sa.Column("logprobs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("callcache", recreate="never") as batch:
        batch.drop_column("logprobs")
    with op.batch_alter_table("judgment", recreate="never") as batch:
        for name in ("expected_score", "score_probs", "position"):
            batch.drop_column(name)
    with op.batch_alter_table("judgerun", recreate="never") as batch:
        batch.drop_column("swap_order")
    op.drop_index("ix_generationrun_derived_from", "generationrun")
    with op.batch_alter_table("generationrun", recreate="never") as batch:
        batch.drop_column("derivation")
        batch.drop_column("derived_from")
