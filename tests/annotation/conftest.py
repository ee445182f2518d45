"""Fixtures shared by the annotation tests."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from judge.data.datasets import import_items
from judge.store.engine import session_scope
from server import usecases
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer


@pytest.fixture
def judged(engine: Engine, db_url: str, stub: StubServer) -> tuple[int, int]:
    """The 18 S1 sample items answered and judged (ICS) through the stub endpoint; the ids of
    the generation run and the judge run."""
    settings = make_settings(stub.base_url, db_url)
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    gen = usecases.generate(engine, settings, "sample", limit=18)
    jud = usecases.judge(engine, settings, gen.run_id)
    return gen.run_id, jud.run_id
