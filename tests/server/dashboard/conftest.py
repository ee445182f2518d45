"""A store with one generation run and one judge run made against the scripted stub, the
app over it, a member's key, and a client signed in with it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from server import create_app, usecases
from server.auth import create_key
from tests.server.dashboard.helpers import S1_ITEMS, Key, Store, sign_in
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """The 18 S1 items answered and judged once per module; the stub keeps serving, so jobs
    started by the tests can run against it."""
    db_url = f"sqlite:///{tmp_path_factory.mktemp('dashboard') / 'fairjudge.db'}"
    engine = make_engine(db_url)
    with StubServer() as stub:
        settings = make_settings(stub.base_url, db_url)
        with session_scope(engine) as session:
            import_items(session, SAMPLE, "sample")
        gen = usecases.generate(engine, settings, "sample", limit=S1_ITEMS)
        jud = usecases.judge(engine, settings, gen.run_id)
        yield Store(engine, settings, gen.run_id, jud.run_id)
    engine.dispose()


@pytest.fixture
def app(store: Store) -> Flask:
    return create_app({"SETTINGS": store.settings, "TESTING": True, "SECRET_KEY": "test-secret"})


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def member(store: Store) -> Key:
    name = f"member-{uuid.uuid4().hex[:8]}"
    _, raw = create_key(store.engine, name, "member")
    return Key(name, raw)


@pytest.fixture
def signed_in(client: FlaskClient, member: Key) -> FlaskClient:
    reply = sign_in(client, member.raw)
    assert reply.status_code == 302, reply.text
    return client
