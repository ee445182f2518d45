"""Template stores: SQLite files built once per test session and copied into each test.

A freshly migrated store runs every Alembic revision (about 0.3 s on these machines, 30x a
file copy), and importing the sample, answering it and judging it through the stub takes
seconds more; many tests need exactly that state and nothing else. So the session builds each
state once, in its own folder (one per xdist worker, as ``tmp_path_factory`` gives), and a
test gets a copy of the file: its own database, as isolated as one it built itself.

Three templates, each built from the one before:

* ``empty``: migrated to the newest revision, no rows;
* ``sample``: the shipped sample (72 items) imported as dataset ``sample``;
* ``judged``: the sample answered and judged through a scripted stub with the settings of
  ``make_settings`` (the fixtures' defaults), either its 18 S1 items (``limit=18``: the first
  in the file) or all 72.

The runs in a judged template were made at a stub that was stopped once they were stored, as
the fixtures these templates replace stopped theirs: its URL is kept in the runs (run
identity includes the server), so a test that wants to resume or extend these runs must make
its own at a live stub instead of copying.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import Engine

from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from server import usecases
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

SAMPLE_DATASET = "sample"
"""The name the templates import the sample under (the fixtures' choice)."""


@dataclass(frozen=True)
class Judged:
    """A judged template: the file, the ids of its generation run and judge run, and the
    stopped stub's URL they were made at (what a config beside a copy names as endpoint)."""

    path: Path
    generation_run_id: int
    judge_run_id: int
    base_url: str


def _settle(path: Path, engine: Engine) -> None:
    """Close ``engine`` and fold SQLite's write-ahead log into the file, so that the file
    alone is the whole database and a plain copy of it is consistent."""
    engine.dispose()
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size:
        raise RuntimeError(f"{wal} still holds pages after a checkpoint; the template is unsafe")


def build_empty(path: Path) -> Path:
    """A store at ``path`` migrated to the newest revision, with no rows."""
    _settle(path, make_engine(f"sqlite:///{path}"))
    return path


def build_sample(path: Path, empty: Path, items: Path = SAMPLE) -> Path:
    """A copy of ``empty`` at ``path`` with the sample (or ``items``, a part of it) imported
    as dataset ``sample``."""
    engine = make_engine(copy_store(empty, path))
    with session_scope(engine) as session:
        import_items(session, items, SAMPLE_DATASET)
    _settle(path, engine)
    return path


def build_judged(path: Path, sample: Path, *, limit: int | None) -> Judged:
    """A copy of ``sample`` at ``path`` whose first ``limit`` items (all with None) are
    answered and then judged with the default rubrics, through a stub stopped afterwards."""
    url = copy_store(sample, path)
    engine = make_engine(url)
    with StubServer() as stub:
        settings = make_settings(stub.base_url, url)
        gen = usecases.generate(
            engine, settings, usecases.GenerateRequest(dataset=SAMPLE_DATASET, limit=limit)
        )
        jud = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
    _settle(path, engine)
    return Judged(path, gen.run_id, jud.run_id, stub.base_url)


def copy_store(template: Path, target: Path) -> str:
    """Copy the template's file to ``target`` (which must not exist yet); its URL."""
    if target.exists():
        raise FileExistsError(f"{target} exists; a template is copied only into a new file")
    shutil.copyfile(template, target)
    return f"sqlite:///{target}"


def restore(template: Path, engine: Engine) -> None:
    """Make the SQLite store behind ``engine`` hold exactly the template's rows (SQLite's
    backup, which is safe while other connections to the target exist); the engine stays
    usable and opens fresh connections."""
    target = engine.url.database
    if engine.dialect.name != "sqlite" or not target:
        raise ValueError("restore copies into a SQLite file store only")
    engine.dispose()
    with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(target)) as into:
        source.backup(into)


def sqlite_path(url: str) -> Path | None:
    """The file a ``sqlite:///`` URL names, or None for any other database (or in-memory)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or url == prefix or ":memory:" in url:
        return None
    return Path(url[len(prefix) :])
