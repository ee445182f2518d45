"""What the Batch API tests share: settings and a config file for an endpoint marked
``batch = true`` with prices, a store holding the sample (SQLite or PostgreSQL), the stored
judgments and answers read back by item key, and the input files a stub received."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.config import Settings
from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Item, Judgment, Response
from tests.support import stores
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_batch import BatchStub

PRICES = {"input_price_per_mtok": 2.0, "output_price_per_mtok": 8.0, "batch_discount": 0.5}
"""Per million tokens; half price through the Batch API."""


def batch_settings(base_url: str, db_url: str, **endpoint: Any) -> Settings:
    """``make_settings`` with the endpoint offering the Batch API, at ``PRICES``."""
    return make_settings(base_url, db_url, **{"batch": True, **PRICES, **endpoint})


def write_batch_config(path: Path, base_url: str, db_url: str) -> Path:
    """A config file for ``tests.support.batch_command``: the stub as the batch judge."""
    path.write_text(f"""
database_url = "{db_url}"
state_dir = "{path.parent / "state"}"
[endpoints.test]
base_url = "{base_url}"
model = "stub-model"
structured_output = "json_object_schema"
concurrency = 4
max_retries = 1
max_backoff_s = 0.1
batch = true
input_price_per_mtok = 2.0
output_price_per_mtok = 8.0
batch_discount = 0.5
[generation]
endpoint = "test"
max_tokens = 32
[judge]
endpoint = "test"
""")
    return path


JudgmentKey = tuple[str, str, int]
"""(item key, rubric, sample index)."""


def judgments_by_key(engine: Engine, run_id: int) -> dict[JudgmentKey, Judgment]:
    """A judge run's judgments by (item key, rubric, sample index)."""
    with Session(engine) as session:
        rows = session.exec(
            select(Judgment, Item).join(Item).where(Judgment.judge_run_id == run_id)  # type: ignore[arg-type]
        ).all()
        session.expunge_all()
    found: dict[JudgmentKey, Judgment] = {}
    for judgment, item in rows:
        key = (item.key, judgment.rubric, judgment.sample_index)
        assert key not in found, f"two judgments for {key}"
        found[key] = judgment
    return found


def sample_store(request: pytest.FixtureRequest, path: Path, kind: str = "sqlite") -> Engine:
    """A fresh store holding the sample, disposed at the test's end: ``kind`` "sqlite" (a
    copy of the session's template at ``path``) or "postgres" (a new database with the
    sample imported)."""
    if kind == "sqlite":
        engine = make_engine(stores.copy_store(request.getfixturevalue("sample_template"), path))
    else:
        engine = make_engine(str(request.getfixturevalue("pg_url")))
        with session_scope(engine) as session:
            import_items(session, SAMPLE, stores.SAMPLE_DATASET)
    request.addfinalizer(engine.dispose)
    return engine


def url_of(engine: Engine) -> str:
    """The engine's database URL, password included (what a config names)."""
    return engine.url.render_as_string(hide_password=False)


AnswerKey = tuple[str, str]
"""(item key, answer part)."""


def answers_by_key(engine: Engine, run_id: int) -> dict[AnswerKey, Response]:
    """A generation run's answers by (item key, part)."""
    with Session(engine) as session:
        rows = session.exec(
            select(Response, Item).join(Item).where(Response.run_id == run_id)  # type: ignore[arg-type]
        ).all()
        session.expunge_all()
    found: dict[AnswerKey, Response] = {}
    for response, item in rows:
        key = (item.key, response.part)
        assert key not in found, f"two answers for {key}"
        found[key] = response
    return found


def batch_inputs(stub: BatchStub) -> list[list[dict[str, Any]]]:
    """The lines of every batch input file the stub received, in upload order."""
    with stub.state.lock:
        files = [f for f in stub.state.files.values() if f.purpose == "batch"]
    return [[json.loads(line) for line in f.content.decode().splitlines()] for f in files]
