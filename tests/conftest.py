"""Shared fixtures: a real temporary SQLite store, the scripted stub endpoint, and the real
embedded model server (started once per test session on a free port)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from judge.models.embedded import EmbeddedServer
from judge.store.engine import make_engine
from tests.support.factories import SAMPLE, SHARED_DATA, free_port, make_settings
from tests.support.stub_openai import StubServer

__all__ = ["SAMPLE", "SHARED_DATA", "free_port", "make_settings"]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fairjudge.db'}"


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


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
