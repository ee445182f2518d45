"""Human ratings belong to their campaign or import batch.

``humanrating`` gets a ``scope`` column and its unique key becomes (generation run, item,
rubric, rater, scope) instead of (generation run, item, rubric, rater): two campaigns over
the same answers no longer overwrite each other's ratings.

Existing rows: a rating with a campaign keeps it and gets the scope ``campaign:<id>``; a
rating without one (imported from a CSV file) gets ``import:default``, the batch that
``fairjudge ratings import`` still uses unless told another (so a later import of changed
scores is refused, as before, unless replacing). No row is added or removed;
``ratingchange`` keeps pointing at the same ids.

SQLite cannot drop the old (unnamed) unique constraint in place, so the table is copied
(Alembic's batch mode, from the schema as of revision 0010 written out below). FairJudge runs
SQLite with foreign keys enforced, and dropping the old table would break the
``ratingchange`` rows that point at it: they are set aside in a temporary table during the
copy and put back unchanged (same ids) after it.

Downgrading refuses when two scopes hold a rating of the same item, rubric and rater (the old
key cannot hold both); delete one campaign's ratings first.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

OLD_KEY = ("generation_run_id", "item_id", "rubric", "rater")
NEW_KEY = (*OLD_KEY, "scope")
NAME = "uq_humanrating_scope"
LEGACY = "import:default"


def _table(key: tuple[str, ...] | None) -> sa.Table:
    """``humanrating`` as revisions 0001 and 0005 made it, without ``scope``, with the unique
    ``key`` (unnamed, as revision 0001 made it) or none: batch mode copies the rows into this
    shape, then applies the operations given inside the batch."""
    meta = sa.MetaData()
    sa.Table("generationrun", meta, sa.Column("id", sa.Integer(), primary_key=True))
    sa.Table("item", meta, sa.Column("id", sa.Integer(), primary_key=True))
    unique = [sa.UniqueConstraint(*key)] if key else []
    return sa.Table(
        "humanrating",
        meta,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("generation_run_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("rubric", sa.String(), nullable=False),
        sa.Column("rater", sa.String(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=True),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.Column("annotation_id", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lead_time_s", sa.Float(), nullable=True),
        sa.Column("withdrawn_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        *unique,
        sa.ForeignKeyConstraint(["generation_run_id"], ["generationrun.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.Index("ix_humanrating_generation_run_id", "generation_run_id"),
        sa.Index("ix_humanrating_item_id", "item_id"),
        sa.Index("ix_humanrating_campaign_id", "campaign_id"),
    )


def _fill_scope() -> None:
    op.execute(
        sa.text(
            "UPDATE humanrating SET scope = 'campaign:' || CAST(campaign_id AS VARCHAR) "
            "WHERE campaign_id IS NOT NULL"
        )
    )
    op.execute(
        sa.text("UPDATE humanrating SET scope = :default WHERE campaign_id IS NULL").bindparams(
            default=LEGACY
        )
    )


def _old_key_name(bind: sa.engine.Connection) -> str | None:
    for constraint in sa.inspect(bind).get_unique_constraints("humanrating"):
        if tuple(constraint["column_names"]) == OLD_KEY:
            return constraint["name"]
    return None


def _set_history_aside() -> None:
    op.execute(sa.text("CREATE TEMP TABLE _ratingchange_0011 AS SELECT * FROM ratingchange"))
    op.execute(sa.text("DELETE FROM ratingchange"))


def _put_history_back() -> None:
    op.execute(sa.text("INSERT INTO ratingchange SELECT * FROM _ratingchange_0011"))
    op.execute(sa.text("DROP TABLE _ratingchange_0011"))


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _set_history_aside()
        with op.batch_alter_table(
            "humanrating", copy_from=_table(None), recreate="always"
        ) as batch:
            batch.add_column(sa.Column("scope", sa.String(), nullable=False, server_default=""))
            batch.create_unique_constraint(NAME, list(NEW_KEY))
        _put_history_back()
    else:
        old = _old_key_name(bind)
        if old is not None:
            op.drop_constraint(old, "humanrating", type_="unique")
        op.add_column(
            "humanrating", sa.Column("scope", sa.String(), nullable=False, server_default="")
        )
        op.create_unique_constraint(NAME, "humanrating", list(NEW_KEY))
    _fill_scope()


def downgrade() -> None:
    bind = op.get_bind()
    twice = bind.execute(
        sa.text(
            "SELECT COUNT(*) FROM (SELECT 1 FROM humanrating GROUP BY "
            "generation_run_id, item_id, rubric, rater HAVING COUNT(*) > 1) AS doubled"
        )
    ).scalar_one()
    if twice:
        raise RuntimeError(
            f"{twice} ratings exist in several campaigns or import batches; revision 0010 "
            "keeps one per item, rubric and rater: delete the extra ones before downgrading"
        )
    if bind.dialect.name == "sqlite":
        _set_history_aside()
        # The copy leaves ``scope`` behind and has the old key again.
        with op.batch_alter_table("humanrating", copy_from=_table(OLD_KEY), recreate="always"):
            pass
        _put_history_back()
    else:
        op.drop_constraint(NAME, "humanrating", type_="unique")
        op.drop_column("humanrating", "scope")
        op.create_unique_constraint(None, "humanrating", list(OLD_KEY))
