"""Answers stopped at the token limit are flagged 'truncated'.

An answer whose call ended with ``finish_reason = 'length'`` now gets the flag ``truncated``
(generation ranks the flags error > empty > refusal > truncated > ok). The previous release
stored such answers as ``ok``; this revision re-flags exactly those rows, so reports of old
runs count and mark their cut answers too. Empty answers and refusals that hit the limit keep
their flag, as generation would give them now. No column changes.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# The table as this revision knows it, not the application's model, which moves on.
response = sa.table(
    "response",
    sa.column("flag", sa.String()),
    sa.column("finish_reason", sa.String()),
)


def upgrade() -> None:
    op.execute(
        response.update()
        .where(response.c.flag == "ok", response.c.finish_reason == "length")
        .values(flag="truncated")
    )


def downgrade() -> None:
    # The previous release knew no 'truncated': it called every such answer 'ok'.
    op.execute(response.update().where(response.c.flag == "truncated").values(flag="ok"))
