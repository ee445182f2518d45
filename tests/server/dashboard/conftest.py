"""Three stores: one generation run and one judge run of the 18 S1 items made against the
scripted stub (``store``, ``app``, ``member``, ``signed_in``: the sign-in, overview and job
tests), two such runs of their own (``two_runs``: the figures kept per run, fresh and
stale; tests/support/two_runs.py), and the whole loop (``loop_template``, ``loop_app``: every
page, against the API: 48 of the sample's items, every stage)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.engine import Engine

from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from server import create_app, usecases
from server.auth import create_key
from tests.server.dashboard.helpers import S1_ITEMS, Key, Store, sign_in
from tests.server.dashboard.loop_store import Loop, build_loop, copy_loop, small_sample
from tests.support import stores
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer
from tests.support.two_runs import TwoRuns
from tests.support.two_runs import two_runs as make_two_runs


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
        gen = usecases.generate(
            engine, settings, usecases.GenerateRequest(dataset="sample", limit=S1_ITEMS)
        )
        jud = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
        yield Store(engine, settings, gen.run_id, jud.run_id)
    engine.dispose()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, empty_template: Path) -> Iterator[TwoRuns]:
    """Runs ``a`` and ``b`` in a store of the module's own (its tests add ratings)."""
    with make_two_runs(tmp_path_factory.mktemp("two-runs"), empty_template, "two-admin") as made:
        yield made


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


# -- the whole loop: sample judged in both orders, ratings, a counterfactual, an award audit --


@pytest.fixture(scope="session")
def loop_template(tmp_path_factory: pytest.TempPathFactory, empty_template: Path) -> Loop:
    """The loop over 48 of the sample's 72 items (loop_store.py's ``small_sample``: every
    stage, every section and kind of link of its pages), built once per session; tests copy
    it. Each figure its pages compute costs in proportion to the store's size, and no test
    of it checks the size."""
    folder = tmp_path_factory.mktemp("loop")
    items = small_sample(folder / "items.jsonl", SAMPLE)
    sample = stores.build_sample(folder / "sample.db", empty_template, items)
    return build_loop(folder / "loop.db", sample, items)


@dataclass(frozen=True)
class LoopApp:
    """The app over a module's copy of the loop store, a signed-in member's client and the
    keys of a member and an admin."""

    loop: Loop
    engine: Engine
    app: Flask
    member: Key
    admin: Key

    def client(self, key: Key | None = None) -> FlaskClient:
        """A client signed in with ``key`` (the member's by default)."""
        client = self.app.test_client()
        reply = sign_in(client, (key or self.member).raw)
        assert reply.status_code == 302, reply.text
        return client


@pytest.fixture(scope="module")
def loop_app(tmp_path_factory: pytest.TempPathFactory, loop_template: Loop) -> Iterator[LoopApp]:
    loop = copy_loop(loop_template, tmp_path_factory.mktemp("loop-copy"))
    url = f"sqlite:///{loop.path}"
    engine = make_engine(url)
    # The stub the runs were made at is stopped: pages only read, nothing calls a model.
    settings = make_settings("http://127.0.0.1:9/v1", url)
    app = create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "test-secret"})
    keys = []
    for role in ("member", "admin"):
        name = f"{role}-{uuid.uuid4().hex[:8]}"
        keys.append(Key(name, create_key(engine, name, role)[1]))
    yield LoopApp(loop, engine, app, keys[0], keys[1])
    engine.dispose()
