"""Unscored judgments keep their kind; a judge run can be 'incomplete' with a detail line.

Adds ``judgment.unscored_kind`` and ``judgerun.status_detail``. Rows written before this
revision only have the ``reason`` text, so the kind is read from it here: this data migration
is the one place allowed to look at reason prefixes (the code writes the kind from now on).
A finished run holding judgments that a rerun retries (failed calls, missing answers) becomes
``incomplete`` with the line the judge itself writes for such a run.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections import defaultdict

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# How the previous release worded each unscored reason, checked in this order (the first
# match wins): "unparsable after one repair: first reply: score 7 is outside the 1-5 scale"
# is 'unparsable', not 'off_scale'. "call failed during repair: ..." is 'call_failed'.
# A reason that matches none keeps a NULL kind rather than a guessed one.
_PREFIXES = (
    ("call failed", "call_failed"),
    ("answer part", "missing_answer"),
    ("unparsable after one repair", "unparsable"),
    ("empty reply", "empty_reply"),
    ("no score found", "no_score"),
    ("several different scores", "several_scores"),
)
_CONTAINS = (
    ("outside the", "off_scale"),
    ("is not a number", "not_a_number"),
    ("is not a whole number", "not_a_number"),
)
# The kinds a rerun of the judge command tries again (UnscoredKind.retry_on_rerun).
_RETRIED = ("call_failed", "missing_answer")

# The tables as this revision knows them, not the application's models, which move on.
judgment = sa.table(
    "judgment",
    sa.column("id", sa.Integer()),
    sa.column("judge_run_id", sa.Integer()),
    sa.column("status", sa.String()),
    sa.column("reason", sa.String()),
    sa.column("unscored_kind", sa.String()),
)
judgerun = sa.table(
    "judgerun",
    sa.column("id", sa.Integer()),
    sa.column("status", sa.String()),
    sa.column("status_detail", sa.Text()),
)


def upgrade() -> None:
    with op.batch_alter_table("judgerun") as batch:
        batch.add_column(sa.Column("status_detail", sa.Text(), nullable=True))
    with op.batch_alter_table("judgment") as batch:
        batch.add_column(sa.Column("unscored_kind", sa.String(), nullable=True))
    _backfill_unscored_kind()
    _mark_incomplete_runs()


def _backfill_unscored_kind() -> None:
    reason = judgment.c.reason
    # substr() compares case-sensitively on both SQLite and PostgreSQL (LIKE does not).
    whens = [(sa.func.substr(reason, 1, len(prefix)) == prefix, kind) for prefix, kind in _PREFIXES]
    whens += [(reason.contains(part, autoescape=True), kind) for part, kind in _CONTAINS]
    op.execute(
        judgment.update()
        .where(judgment.c.status == "unscored", reason.is_not(None))
        .values(unscored_kind=sa.case(*whens, else_=sa.null()))
    )


def _mark_incomplete_runs() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(judgment.c.judge_run_id, judgment.c.unscored_kind, sa.func.count())
        .join(judgerun, judgerun.c.id == judgment.c.judge_run_id)
        .where(judgerun.c.status == "finished")
        .group_by(judgment.c.judge_run_id, judgment.c.unscored_kind)
    ).all()
    totals: defaultdict[int, int] = defaultdict(int)
    missing: defaultdict[int, dict[str, int]] = defaultdict(dict)
    for run_id, kind, n in rows:
        totals[run_id] += n
        if kind in _RETRIED:
            missing[run_id][kind] = n
    for run_id, kinds in sorted(missing.items()):
        why = ", ".join(f"{kind}: {n}" for kind, n in sorted(kinds.items()))
        detail = (
            f"{sum(kinds.values())} of {totals[run_id]} judgments missing ({why}); "
            "run the same judge command again to retry them"
        )
        bind.execute(
            judgerun.update()
            .where(judgerun.c.id == run_id)
            .values(status="incomplete", status_detail=detail)
        )


def downgrade() -> None:
    # The previous release knew only 'running' and 'finished'; it called such runs finished.
    op.execute(judgerun.update().where(judgerun.c.status == "incomplete").values(status="finished"))
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): copying judgerun to a new table, as
    # batch mode would, fails while judgments reference it with foreign keys on.
    with op.batch_alter_table("judgment", recreate="never") as batch:
        batch.drop_column("unscored_kind")
    with op.batch_alter_table("judgerun", recreate="never") as batch:
        batch.drop_column("status_detail")
