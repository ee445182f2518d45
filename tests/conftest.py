"""Shared fixtures: a real temporary SQLite store (a copy of a template built once per
session, see tests/support/stores.py), the scripted stub endpoint, and the real embedded
model server (started once per test session on a free port)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from judge.models.embedded import EmbeddedServer
from judge.store.engine import make_engine
from tests.support import stores
from tests.support.factories import SAMPLE, SHARED_DATA, free_port, make_settings
from tests.support.stub_openai import StubServer

__all__ = ["SAMPLE", "SHARED_DATA", "free_port", "make_settings"]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fairjudge.db'}"


@pytest.fixture
def engine(db_url: str, empty_template: Path) -> Iterator[Engine]:
    """The store at ``db_url``: a copy of the empty migrated template (the file is new to
    the test, so it is the test's own)."""
    path = stores.sqlite_path(db_url)
    if path is not None and not path.exists():
        stores.copy_store(empty_template, path)
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def migrated_db_url(db_url: str, empty_template: Path) -> str:
    """``db_url`` with the store already there: a copy of the empty migrated template (for
    fixtures that open the store themselves and never look at how it was made)."""
    path = stores.sqlite_path(db_url)
    assert path is not None, "db_url names a SQLite file"
    if not path.exists():  # else ``engine`` copied the same template there first
        stores.copy_store(empty_template, path)
    return db_url


@pytest.fixture(scope="session")
def empty_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store migrated to the newest revision, no rows: built once, copied by ``engine``."""
    return stores.build_empty(tmp_path_factory.mktemp("templates") / "empty.db")


@pytest.fixture(scope="session")
def sample_template(tmp_path_factory: pytest.TempPathFactory, empty_template: Path) -> Path:
    """The empty template with the shipped sample imported as dataset ``sample``."""
    return stores.build_sample(tmp_path_factory.mktemp("templates") / "sample.db", empty_template)


@pytest.fixture(scope="session")
def judged_s1_template(
    tmp_path_factory: pytest.TempPathFactory, sample_template: Path
) -> stores.Judged:
    """The sample's 18 S1 items answered and judged through the stub (``limit=18``)."""
    path = tmp_path_factory.mktemp("templates") / "judged_s1.db"
    return stores.build_judged(path, sample_template, limit=18)


@pytest.fixture(scope="session")
def judged_sample_template(
    tmp_path_factory: pytest.TempPathFactory, sample_template: Path
) -> stores.Judged:
    """All 72 sample items answered and judged through the stub."""
    path = tmp_path_factory.mktemp("templates") / "judged_sample.db"
    return stores.build_judged(path, sample_template, limit=None)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture(scope="session")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """The real llama-cpp-python server with SmolLM2-135M, as `make install` sets it up."""
    if importlib.util.find_spec("llama_cpp") is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("llama-cpp-python is not installed; `make install` must install it in CI")
        pytest.skip("llama-cpp-python is not installed; run make install")
    from judge.config import EmbeddedConfig

    config = EmbeddedConfig(port=free_port(), n_threads=2)
    server = EmbeddedServer(config, tmp_path_factory.mktemp("state"))
    server.start()
    yield server
    server.stop()


PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database on the machine's server, dropped afterwards.

    Without a reachable server the test is skipped on a developer's machine but fails in CI
    (``CI=true``), where PostgreSQL is always started: a skip there would hide a broken setup.
    """
    import os
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    name = f"fairjudge_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        why = f"PostgreSQL is not reachable on 127.0.0.1:5432 ({exc.orig})"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{why}; CI must run the PostgreSQL tests")
        pytest.skip(why)
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


# Tests that share a session's server (started once per process) run in one xdist worker, so
# that `pytest -n N` starts one Label Studio and one embedded model, not N of each.
SERVER_GROUPS = {"labelstudio": "labelstudio", "embedded": "embedded"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist's ``--dist loadgroup``: a test that uses a session server (its fixture or
    its marker) joins that server's group; any other test joins its module's group, so a
    module-scoped fixture is built once, as without xdist."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue  # a group the test chose itself
        names = set(getattr(item, "fixturenames", ())) | {m.name for m in item.iter_markers()}
        group = next((g for key, g in SERVER_GROUPS.items() if key in names), None)
        item.add_marker(pytest.mark.xdist_group(group or item.nodeid.split("::", 1)[0]))
