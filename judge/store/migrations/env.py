"""Alembic's environment for FairJudge's store.

``judge.store.engine`` runs it in-process and hands over its own connection, already inside
the transaction it will commit, through ``config.attributes["connection"]``: that is how an
in-memory SQLite database (one connection, ``StaticPool``) gets migrated, and how the lock
taken before migrating covers the whole upgrade. Run by the ``alembic`` command (see
``alembic.ini`` beside this file) it opens its own connection to ``-x url=...``.

Batch mode (``render_as_batch``) lets one migration script ALTER tables on SQLite too.

The migrations create and change every table, the domain's (``judge/store/tables.py``) and the
server's (``server/tables.py``); the scripts name tables by their names, not by these modules.
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel
from sqlmodel.sql.sqltypes import AutoString

# The schema is the domain's tables and the server's: register both on SQLModel.metadata, so
# that autogenerate compares the whole database. This script is Alembic's, loaded from its path
# (no package imports it), the one place that names both.
import server.tables  # noqa: F401
from judge.store import pairwise_tables, tables  # noqa: F401

config = context.config


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Write SQLModel's string type as plain ``sa.String()`` in generated migrations.

    A migration must not depend on how a later SQLModel spells its types; ``AutoString`` is
    ``VARCHAR`` without a length on SQLite and PostgreSQL.
    """
    if type_ == "type" and isinstance(obj, AutoString):
        return "sa.String()"
    return False


def run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        render_as_batch=True,
        render_item=render_item,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    # Revision 0002 reads rows to fill in the new columns, which needs a live database.
    raise SystemExit("FairJudge's migrations need a database connection; --sql is not supported")

given: Connection | None = config.attributes.get("connection")
if given is not None:
    run(given)
else:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("give the database with -x url=URL (a SQLAlchemy URL)")
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            run(connection)
    finally:
        engine.dispose()
