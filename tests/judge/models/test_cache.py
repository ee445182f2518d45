"""The call cache: keyed by endpoint as well as model, and the sample index is the seed."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from judge.config import EndpointConfig
from judge.hashing import cache_key
from judge.models.cache import CallCacheView, cached_complete
from judge.models.client import ModelClient
from judge.store.tables import CallCache
from tests.support.stub_openai import StubServer

MESSAGES = [{"role": "user", "content": "Is a quiet student less able?"}]


def client_for(stub: StubServer) -> ModelClient:
    return ModelClient("x", EndpointConfig(base_url=stub.base_url, model="stub-model"))


def test_two_servers_with_the_same_model_name_do_not_share_answers(
    engine: Engine, tmp_path: Path
) -> None:
    with StubServer() as a, StubServer() as b:
        first = cached_complete(
            client_for(a),
            CallCacheView(engine, "stub-model"),
            MESSAGES,
            sample_index=0,
            temperature=0.0,
            max_tokens=16,
        )
        from sqlalchemy import insert

        with engine.begin() as conn:  # what judge.runs.ResultWriter does with a new cache row
            conn.execute(insert(CallCache.__table__), first.new_rows)  # type: ignore[attr-defined]
        # A fresh view of the same store: server A's answer is cached, server B's is not.
        view = CallCacheView(engine, "stub-model")
        again_a = cached_complete(
            client_for(a), view, MESSAGES, sample_index=0, temperature=0.0, max_tokens=16
        )
        on_b = cached_complete(
            client_for(b), view, MESSAGES, sample_index=0, temperature=0.0, max_tokens=16
        )
        assert again_a.cached and not on_b.cached
        assert (a.state.requests, b.state.requests) == (1, 1)
    assert first.key != on_b.key


def test_key_ignores_a_trailing_slash_but_not_the_host() -> None:
    params = {"temperature": 0}
    same = cache_key("http://h:1/v1/", "m", MESSAGES, params, 0)
    assert same == cache_key("http://h:1/v1", "m", MESSAGES, params, 0)
    assert same != cache_key("http://other:1/v1", "m", MESSAGES, params, 0)
    assert same != cache_key("http://h:1/v1", "m", MESSAGES, params, 1)


def test_the_sample_index_is_sent_as_the_seed_sample_0_included(engine: Engine) -> None:
    with StubServer() as stub:
        view = CallCacheView(engine, "stub-model")
        for sample in (0, 1, 2):
            cached_complete(
                client_for(stub),
                view,
                MESSAGES,
                sample_index=sample,
                temperature=0.7,
                max_tokens=16,
            )
        assert [body["seed"] for body in stub.state.bodies] == [0, 1, 2]
