"""Cached prompt tokens kept per call.

``cached_prompt_tokens`` on the call cache, answers, judgments, audit answers and item-writing
calls: of a call's prompt tokens, those the provider served from its prompt cache (a reply's
``usage.prompt_tokens_details.cached_tokens``), priced at the endpoint's
``cached_input_price_per_mtok``. Every existing row gets 0: nothing was counted as cached.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

CALL_TABLES = ("callcache", "response", "judgment", "auditanswer", "itemgenerationcall")


def upgrade() -> None:
    for table in CALL_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("cached_prompt_tokens", sa.Integer(), nullable=False, server_default="0")
            )


def downgrade() -> None:
    # Dropped in place (SQLite 3.35+ and PostgreSQL), as 0016 does.
    for table in CALL_TABLES:
        with op.batch_alter_table(table, recreate="never") as batch:
            batch.drop_column("cached_prompt_tokens")
