"""Shared fixtures: a real temporary SQLite store, the scripted stub endpoint, and the real
embedded model server (started once per test session on a free port)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from judge.config import ROOT, Settings
from judge.embedded import EmbeddedServer
from judge.store import make_engine
from tests.stub_openai import StubServer

SAMPLE = ROOT / "datasets" / "fairmonitor_sample.jsonl"
SHARED_DATA = ROOT.parent / "shared" / "data"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fairjudge.db'}"


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


def make_settings(
    base_url: str, db_url: str, *, model: str = "stub-model", **endpoint: Any
) -> Settings:
    """Settings whose model under test and judge are both the endpoint at ``base_url``."""
    ep = {
        "base_url": base_url,
        "model": model,
        "structured_output": "json_object_schema",
        "timeout_s": 5,
        "max_retries": 2,
        "max_backoff_s": 0.2,
        "concurrency": 4,
        **endpoint,
    }
    return Settings.model_validate(
        {
            "database_url": db_url,
            "endpoints": {"test": ep},
            "generation": {"endpoint": "test", "max_tokens": 32},
            "judge": {"endpoint": "test"},
        }
    )


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture(scope="session")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """The real llama-cpp-python server with SmolLM2-135M, as `make install` sets it up."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed; run make install")
    from judge.config import EmbeddedConfig

    config = EmbeddedConfig(port=free_port(), n_threads=2)
    server = EmbeddedServer(config, tmp_path_factory.mktemp("state"))
    server.start()
    yield server
    server.stop()


PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database on the machine's server, dropped afterwards."""
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    name = f"fairjudge_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        pytest.skip(f"PostgreSQL is not reachable on 127.0.0.1:5432 ({exc.orig})")
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
