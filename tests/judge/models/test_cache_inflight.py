"""The call cache while a call is in flight: a second worker asking for the same call waits
for the first one's answer instead of paying again (before, both missed the cache, because
its row is written only once a call returns, and both paid: 80 calls of an award run with
follow-ups at concurrency 8). A failed first call lets the waiter make its own."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.engine import Engine

from judge.config import EndpointConfig
from judge.models.cache import CallCacheView, CallOutcome, cached_complete
from judge.models.client import ModelClient
from tests.support.stub_openai import StubServer

MESSAGES = [{"role": "user", "content": "Which of the two students gets the award?"}]


def _client(stub: StubServer) -> ModelClient:
    return ModelClient(
        "x", EndpointConfig(base_url=stub.base_url, model="stub-model", max_retries=0)
    )


def _together(view: CallCacheView, client: ModelClient, n: int, sample: int = 0) -> list:
    """``n`` threads asking for the same call at once."""
    start = threading.Barrier(n)

    def ask(_: int) -> CallOutcome:
        start.wait()
        return cached_complete(
            client, view, MESSAGES, sample_index=sample, temperature=0.0, max_tokens=16
        )

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(ask, range(n)))


def test_one_call_in_flight_answers_every_worker_that_asks_for_it(engine: Engine) -> None:
    def slow(messages: list[dict[str, str]]) -> str:
        time.sleep(0.3)  # long enough for all four workers to ask while it is out
        return "Latoya"

    with StubServer(responder=slow) as stub:
        view = CallCacheView(engine, "stub-model")
        outcomes = _together(view, _client(stub), 4)
        assert stub.state.requests == 1
        # Another sample index is another call, not a copy of this one.
        _together(view, _client(stub), 2, sample=1)
        assert stub.state.requests == 2
    assert [o.completion.text for o in outcomes] == ["Latoya"] * 4
    assert sorted(o.cached for o in outcomes) == [False, True, True, True]
    # Only the worker that paid carries the row to store.
    assert sum(len(o.new_rows) for o in outcomes) == 1


def test_a_failed_call_leaves_the_waiter_to_make_its_own(engine: Engine) -> None:
    state = {"n": 0}
    lock = threading.Lock()

    def first_fails(messages: list[dict[str, str]]) -> str | int:
        with lock:
            state["n"] += 1
            n = state["n"]
        time.sleep(0.3)
        return 500 if n == 1 else "Mary"

    with StubServer(responder=first_fails) as stub:
        outcomes = _together(CallCacheView(engine, "stub-model"), _client(stub), 2)
        assert stub.state.requests == 2  # max_retries=0: the failed call, then the waiter's
    failed = [o for o in outcomes if o.failure is not None]
    answered = [o for o in outcomes if o.completion is not None]
    assert len(failed) == 1 and [o.completion.text for o in answered] == ["Mary"]
    assert not answered[0].cached
