"""The one module that owns the database engine, sessions and the schema's version.

SQLite (the default) runs in WAL mode so a reader never blocks the writer; any SQLAlchemy
URL works (``postgresql+psycopg://...`` for PostgreSQL). The schema is Alembic's
(``judge/store/migrations``): ``make_engine`` brings any database to the newest revision, and
a database created by the release before migrations (tables, no ``alembic_version``) is taken
as revision 0001 and upgraded from there.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, inspect, make_url, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import (
    ArgumentError,
    DataError,
    DBAPIError,
    IntegrityError,
    NoSuchModuleError,
    ProgrammingError,
)
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, create_engine

from judge.errors import SchemaError, StoreError
from judge.store import pairwise_tables, tables  # noqa: F401  (registers the tables)

if TYPE_CHECKING:  # Alembic is imported only to migrate: it adds ~0.2 s to a process start.
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).with_name("migrations")
BASELINE = "0001"
"""The revision a database made by the release before migrations is at."""
BASELINE_TABLES = frozenset(
    [
        "dataset",
        "item",
        "callcache",
        "generationrun",
        "response",
        "judgerun",
        "judgment",
        "humanrating",
    ]
)
# Any constant works; it keeps two processes from migrating one PostgreSQL database at once.
_PG_LOCK_KEY = 0x4661_6972_4A75_6467


@dataclass(frozen=True)
class Upgrade:
    """What ``upgrade`` found and left: revisions, None for "no ``alembic_version`` table"."""

    before: str | None
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def make_engine(url: str, *, migrate: bool = True) -> Engine:
    """An engine for ``url`` with the schema at the newest revision; SQLite gets WAL and
    foreign keys. A database already at the newest revision is only read (no lock).

    With ``migrate=False`` (the server) a database behind the code is not upgraded: it
    raises SchemaError naming ``fairjudge db upgrade``, so that a schema change happens when
    someone asks for it, not as a side effect of a restart.

    A malformed URL, a missing driver or a database that cannot be reached raises StoreError
    naming the URL with its password masked."""
    engine = _create(url)
    try:
        with _opening(url):
            if migrate:
                _bring_to_head(engine)
            else:
                _check_head(engine, url)
    except BaseException:
        engine.dispose()
        raise
    return engine


def masked(url: str) -> str:
    """``url`` with any password replaced by ``***`` (also when it does not parse)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL at all: mask what looks like user:password@
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


@contextmanager
def _opening(url: str) -> Iterator[None]:
    """Turns the errors of opening the database at ``url`` into one StoreError."""
    try:
        yield
    except (ArgumentError, NoSuchModuleError, ImportError, ValueError) as exc:
        if isinstance(exc, NoSuchModuleError):
            reason = f"unknown database kind {url.split(':', 1)[0]!r}"
        elif isinstance(exc, ImportError):
            reason = f"its driver {exc.name or ''} is not installed"
        else:
            reason = "not a database URL"
        raise StoreError(
            f"cannot use database_url {masked(url)}: {reason}; give a URL such as "
            "sqlite:///fairjudge.db or postgresql+psycopg://USER@HOST/DB (config or --db)"
        ) from exc
    except DBAPIError as exc:
        if isinstance(exc, (IntegrityError, ProgrammingError, DataError)):
            raise
        lines = str(exc.orig).strip().splitlines() or [type(exc.orig).__name__]
        raise StoreError(
            f"cannot open the database {masked(url)}: {lines[0]}; check database_url "
            "(config or --db) and that the database server is running"
        ) from exc


def upgrade(url: str) -> Upgrade:
    """Bring the database at ``url`` to the newest revision (for ``fairjudge db upgrade``)."""
    engine = _create(url)
    try:
        with _opening(url):
            before = current_revision(engine)
            _bring_to_head(engine)
        return Upgrade(before=before, after=head_revision())
    finally:
        engine.dispose()


def revision_at(url: str) -> str | None:
    """The revision of the database at ``url`` (None: not set up), changing nothing."""
    engine = _create(url)
    try:
        with _opening(url):
            return current_revision(engine)
    finally:
        engine.dispose()


def current_revision(engine: Engine) -> str | None:
    """The revision stored in the database; None when it has no ``alembic_version`` table
    (empty, or made by the release before migrations)."""
    with engine.connect() as conn:
        return _stored_revision(conn)


@cache
def head_revision() -> str:
    """The newest revision, read off the file names without loading Alembic.

    Migrations are ``versions/NNNN_slug.py`` with revision id ``NNNN``, each revising the one
    before (``alembic revision --rev-id NNNN``); a test checks that against Alembic's view.
    """
    return max(path.name.split("_", 1)[0] for path in (MIGRATIONS / "versions").glob("*.py"))


def alembic_config(conn: Connection | None = None) -> Config:
    """Alembic's configuration for FairJudge's migrations, in code (no alembic.ini needed);
    with ``conn``, the migrations run on that connection, inside its transaction."""
    from alembic.config import Config

    config = Config()
    # set_main_option interpolates like ConfigParser: a literal % must be doubled.
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    config.set_main_option("file_template", "%%(rev)s_%%(slug)s")
    if conn is not None:
        config.attributes["connection"] = conn
    return config


def _create(url: str) -> Engine:
    with _opening(url):
        return _create_engine(url)


def _create_engine(url: str) -> Engine:
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        if url in ("sqlite://", "sqlite:///:memory:"):
            kwargs["poolclass"] = StaticPool
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "handle_error", partial(_read_only, masked(url)))
    return engine


READ_ONLY = ("attempt to write a readonly database", "read-only transaction")
"""What SQLite and PostgreSQL say when a write reaches a database that may only be read."""


def _read_only(url: str, context: Any) -> None:
    """A write refused because the database is read-only becomes a StoreError that says so
    (not a crash): a read-only file, a ``mode=ro`` SQLite URL, a PostgreSQL standby."""
    text = str(context.original_exception)
    if any(marker in text for marker in READ_ONLY):
        raise StoreError(
            f"the database {url} is read-only, so nothing could be written; point the config "
            "or --db at a database this user may write"
        ) from None


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # Turning a new file to WAL can meet "database is locked" at once, without the busy
    # timeout, while another connection is setting it up; it is tried again for 10 s.
    for attempt in range(100):
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 99:
                raise
            time.sleep(0.1)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _check_head(engine: Engine, url: str) -> None:
    revision = current_revision(engine)
    if revision != head_revision():
        at = f"at schema revision {revision}" if revision else "not set up (no schema revision)"
        raise SchemaError(
            f"the database {masked(url)} is {at} and this FairJudge needs revision "
            f"{head_revision()}: run `fairjudge db upgrade` (with the same --config or --db), "
            "then start the server again"
        )


def _bring_to_head(engine: Engine) -> None:
    with engine.connect() as conn:
        if _stored_revision(conn) == head_revision():  # the common case: Alembic not loaded
            return
        conn.rollback()
        _lock_for_migration(conn)
        # Read again under the lock: another process may have migrated in the meantime.
        revision = _stored_revision(conn)
        if revision != head_revision():
            _migrate(conn, revision)
        conn.commit()


def _lock_for_migration(conn: Connection) -> None:
    """Start the transaction that the whole upgrade runs in, holding off other migrators."""
    if conn.dialect.name == "sqlite":
        # pysqlite would not open a transaction before DDL; BEGIN IMMEDIATE opens one and
        # takes the write lock now (another process waits up to the 30 s busy timeout).
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})


def _migrate(conn: Connection, revision: str | None) -> None:
    from alembic import command

    config = alembic_config(conn)
    if revision is None:
        present = BASELINE_TABLES & set(inspect(conn).get_table_names())
        if present == BASELINE_TABLES:  # made by the release before migrations
            command.stamp(config, BASELINE)
        elif present:
            missing = ", ".join(sorted(BASELINE_TABLES - present))
            raise SchemaError(
                f"the database has some of FairJudge's tables but not {missing} and no "
                "alembic_version table, so its schema is unknown; use a new database_url"
            )
    elif revision not in {script.revision for script in _script().walk_revisions()}:
        raise SchemaError(
            f"the database is at schema revision {revision!r}, which this version of "
            f"FairJudge does not know (newest: {head_revision()!r}); upgrade FairJudge"
        )
    command.upgrade(config, "head")


def _stored_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


@cache
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on any exception."""
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
