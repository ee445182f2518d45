"""Run leases; a generation run with failed answers is 'incomplete' with a detail line.

Adds the ``runlease`` table (which process works on a run) and ``generationrun.status_detail``.
A generation run the previous release ended as ``error`` (some answers failed) becomes
``incomplete`` with the line ``generate`` itself now writes for such a run.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# The tables as this revision knows them, not the application's models, which move on.
generationrun = sa.table(
    "generationrun",
    sa.column("id", sa.Integer()),
    sa.column("status", sa.String()),
    sa.column("status_detail", sa.Text()),
)
response = sa.table(
    "response",
    sa.column("run_id", sa.Integer()),
    sa.column("flag", sa.String()),
)


def upgrade() -> None:
    op.create_table(
        "runlease",
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("token", sa.String(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "run_id"),
    )
    with op.batch_alter_table("generationrun") as batch:
        batch.add_column(sa.Column("status_detail", sa.Text(), nullable=True))
    _mark_incomplete_runs()


def _mark_incomplete_runs() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(response.c.run_id, response.c.flag, sa.func.count())
        .join(generationrun, generationrun.c.id == response.c.run_id)
        .where(generationrun.c.status == "error")
        .group_by(response.c.run_id, response.c.flag)
    ).all()
    totals: dict[int, int] = {}
    failed: dict[int, int] = {}
    for run_id, flag, n in rows:
        totals[run_id] = totals.get(run_id, 0) + n
        if flag == "error":
            failed[run_id] = failed.get(run_id, 0) + n
    for run_id, n in sorted(failed.items()):
        bind.execute(
            generationrun.update()
            .where(generationrun.c.id == run_id)
            .values(status="incomplete", status_detail=_detail(n, totals[run_id]))
        )


def _detail(failed: int, total: int) -> str:
    # Worded as judge.answers.collect.incomplete_detail words it.
    return (
        f"{failed} of {total} answers missing (failed calls: {failed}); "
        "run the same generate command again to retry them"
    )


def downgrade() -> None:
    # The previous release called a generation run with failed answers 'error'.
    op.execute(
        generationrun.update().where(generationrun.c.status == "incomplete").values(status="error")
    )
    with op.batch_alter_table("generationrun", recreate="never") as batch:
        batch.drop_column("status_detail")
    op.drop_table("runlease")
