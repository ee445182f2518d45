"""A queued job's "not before" time.

``not_before`` on jobs: seconds since the epoch before which no worker takes the job. A job
whose calls went out through the Batch API sets it when it goes back to the queue to wait
for the provider, so that it holds no worker slot meanwhile (server/jobs/running.py).
Nullable, no default: every existing job may run at once, as before.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("not_before", sa.Float(), nullable=True))


def downgrade() -> None:
    # Dropped in place (SQLite 3.35+ and PostgreSQL), as 0016 drops its column: copying
    # the job table would break the foreign key of its parts.
    with op.batch_alter_table("job", recreate="never") as batch:
        batch.drop_column("not_before")
