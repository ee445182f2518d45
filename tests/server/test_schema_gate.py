"""The server never migrates by itself: on a database behind the code's migrations the app
and ``fairjudge serve`` refuse to start and name the command that upgrades it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine

from judge.errors import SchemaError
from judge.store.engine import alembic_config, head_revision, make_engine, revision_at
from server import create_app
from tests.support.factories import FAIRJUDGE, free_port, make_settings, write_config


def behind(url: str) -> str:
    """Bring a new database to the newest revision, then one revision back."""
    make_engine(url).dispose()
    previous = f"{int(head_revision()) - 1:04d}"
    with create_engine(url).begin() as conn:
        command.downgrade(alembic_config(conn), previous)
    assert revision_at(url) == previous
    return previous


def test_the_app_refuses_a_database_behind_the_code(db_url: str) -> None:
    previous = behind(db_url)
    settings = make_settings("http://127.0.0.1:9/v1", db_url)
    with pytest.raises(SchemaError, match="run `fairjudge db upgrade`") as raised:
        create_app({"SETTINGS": settings})
    assert f"at schema revision {previous}" in str(raised.value)


def test_serve_refuses_then_db_upgrade_lets_it_start(tmp_path: Path, db_url: str) -> None:
    behind(db_url)
    config = write_config(tmp_path / "c.toml", "http://127.0.0.1:9/v1", db_url)
    base = [*FAIRJUDGE, "--config", str(config)]
    port = str(free_port())
    refused = subprocess.run(
        [*base, "serve", "--port", port], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 1
    assert "run `fairjudge db upgrade`" in refused.stderr
    current = subprocess.run([*base, "db", "current"], capture_output=True, text=True)
    assert "behind" in current.stdout
    upgraded = subprocess.run([*base, "db", "upgrade"], capture_output=True, text=True)
    assert f"to {head_revision()}" in upgraded.stdout, upgraded.stderr
    assert revision_at(db_url) == head_revision()
