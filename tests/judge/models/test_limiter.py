"""The endpoint quota inside one process: what the quota is keyed on, slots given back on
every way a call ends, none held through a backoff, ``requests_per_minute`` without Redis,
and Redis unreachable at start and mid-run. The tests across processes are in
test_limiter_processes.py."""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path

import pytest

from judge.config import EndpointConfig
from judge.config_server import WorkersConfig
from judge.errors import EndpointError
from judge.models.client import CallFailed, ModelClient
from judge.models.limiter import (
    LocalLimiter,
    QuotaUnavailable,
    RedisLimiter,
    limiter_for,
    local_limiter,
)
from tests.judge.models.conftest import REDIS_URL
from tests.support.factories import free_port, make_settings
from tests.support.stub_openai import StubServer

ASK = [{"role": "user", "content": "Is the essay fair?"}]


def _endpoint(base_url: str, **fields: object) -> EndpointConfig:
    return EndpointConfig.model_validate(
        {"base_url": base_url, "model": "stub-model", "check_model": False, **fields}
    )


def test_two_names_for_one_server_and_model_share_one_quota(quota_prefix: str) -> None:
    limiter = RedisLimiter(REDIS_URL, prefix=quota_prefix)
    # The same server written two ways (host case, default port, trailing slash).
    a = _endpoint("http://LOCALHOST:80/v1/")
    b = _endpoint("http://localhost/v1")
    other_model = _endpoint("http://localhost/v1", model="another-model")
    with limiter.hold(a):
        assert limiter.in_use(b) == 1
        assert limiter.in_use(other_model) == 0
    assert limiter.in_use(b) == 0


def test_every_way_a_call_ends_gives_its_slot_back(quota_prefix: str) -> None:
    limiter = RedisLimiter(REDIS_URL, prefix=quota_prefix)
    seen_in_flight: list[int] = []
    status = {"reply": "fine"}

    def responder(messages: list[dict[str, str]]) -> str | int:
        seen_in_flight.append(limiter.in_use(endpoint))  # while the call is out
        return 503 if status["reply"] == "503" else 401 if status["reply"] == "401" else "fine"

    with StubServer(responder=responder) as stub:
        endpoint = _endpoint(stub.base_url, concurrency=2, max_retries=1, max_backoff_s=0.05)
        client = ModelClient("quota", endpoint, limiter=limiter)
        assert client.complete(ASK, temperature=0.0, max_tokens=8).text == "fine"
        assert limiter.in_use(endpoint) == 0
        status["reply"] = "503"  # retried once, then failed for good
        with pytest.raises(CallFailed) as failed:
            client.complete(ASK, temperature=0.0, max_tokens=8)
        assert failed.value.attempts == 2
        assert limiter.in_use(endpoint) == 0
        status["reply"] = "401"  # a refused key: an EndpointError, not retried
        with pytest.raises(EndpointError):
            client.complete(ASK, temperature=0.0, max_tokens=8)
        assert limiter.in_use(endpoint) == 0
    # One slot held during each of the four attempts (1 + 2 + 1), by the attempt itself.
    assert seen_in_flight == [1, 1, 1, 1]
    with pytest.raises(ValueError), limiter.hold(endpoint):
        raise ValueError("any error inside the block")
    assert limiter.in_use(endpoint) == 0


def test_a_call_sleeping_through_retry_after_holds_no_slot(quota_prefix: str) -> None:
    limiter = RedisLimiter(REDIS_URL, prefix=quota_prefix)
    # The stub's judge fault: a 429 with Retry-After 0.3 s first, then a grade.
    ask = [
        {"role": "system", "content": "You grade answers."},
        {"role": "user", "content": "#fault:rate_limited_once grade this"},
    ]
    with StubServer() as stub:
        endpoint = _endpoint(stub.base_url, concurrency=1)
        client = ModelClient("quota", endpoint, limiter=limiter)
        done = []
        call = threading.Thread(
            target=lambda: done.append(client.complete(ask, temperature=0.0, max_tokens=8))
        )
        call.start()
        while stub.state.requests < 1:
            time.sleep(0.005)
        time.sleep(0.1)  # a third of the way into the 0.3 s the server asked for
        during_backoff = limiter.in_use(endpoint)
        call.join()
    assert during_backoff == 0
    assert done[0].attempts == 2


def test_without_redis_requests_per_minute_holds_within_the_process() -> None:
    # A "minute" of 0.5 s allowing 5 starts; 4 threads call for 1.2 s with no latency.
    limiter = LocalLimiter(window_s=0.5)
    with StubServer() as stub:
        endpoint = _endpoint(stub.base_url, concurrency=4, requests_per_minute=5)
        client = ModelClient("quota", endpoint, limiter=limiter)
        until = time.monotonic() + 1.2

        def loop() -> None:
            while time.monotonic() < until:
                client.complete(ASK, temperature=0.0, max_tokens=8)

        threads = [threading.Thread(target=loop) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # No 0.5 s window sees more than 5 arrivals (0.4 s at the stub: the trip from the
        # limiter to the stub varies by a few ms); windows open at 0, 0.5 and 1.0 s, so
        # 15 calls start in 1.2 s, and 10 at least however late the threads begin.
        assert stub.state.most_in_window(0.4) <= 5
        assert stub.state.requests >= 10


def test_a_client_without_a_limiter_uses_the_process_own() -> None:
    client = ModelClient("quota", _endpoint("http://127.0.0.1:9/v1"))
    assert client.limiter is local_limiter()


def test_the_quota_url_comes_from_the_settings() -> None:
    assert WorkersConfig(limiter_url="redis://a:6379/1").quota_url() == "redis://a:6379/1"
    both = WorkersConfig(limiter_url="redis://a:6379/1", broker_url="redis://b:6379/0")
    assert both.quota_url() == "redis://a:6379/1"
    assert WorkersConfig(broker_url="rediss://b:6380/0").quota_url() == "rediss://b:6380/0"
    assert WorkersConfig(broker_url="amqp://guest@b:5672//").quota_url() == ""
    assert WorkersConfig().quota_url() == ""


def test_redis_unreachable_at_start_is_one_clear_error(tmp_path: Path) -> None:
    from server.usecases.context import make_client

    port = free_port()  # nothing listens there
    url = f"redis://:s3cret-word@127.0.0.1:{port}/0"
    settings = make_settings("http://127.0.0.1:9/v1", f"sqlite:///{tmp_path / 'x.db'}")
    settings = settings.model_copy(update={"workers": WorkersConfig(limiter_url=url)})
    with pytest.raises(QuotaUnavailable) as refused:
        limiter_for(settings)
    message = str(refused.value)
    assert "\n" not in message
    assert f"cannot reach Redis at redis://:***@127.0.0.1:{port}/0" in message
    assert "s3cret" not in message
    with pytest.raises(QuotaUnavailable) as again:  # what every use case opens
        make_client(settings, "test")
    assert str(again.value) == message


class Relay:
    """A TCP relay to the machine's Redis that a test can cut and restore, as if Redis went
    away and came back."""

    def __init__(self) -> None:
        self.port = free_port()
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self._stop.clear()
        listener = socket.create_server(("127.0.0.1", self.port))
        listener.settimeout(0.05)
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        self._stop.set()
        time.sleep(0.1)  # the listener closes within one accept timeout
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while not self._stop.is_set():
                try:
                    near, _ = listener.accept()
                except TimeoutError:
                    continue
                far = socket.create_connection(("127.0.0.1", 6379))
                self._sockets += [near, far]
                for a, b in ((near, far), (far, near)):
                    threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass


def test_calls_wait_while_redis_is_away_then_go_on(
    quota_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    relay = Relay()
    relay.start()
    limiter = RedisLimiter(relay.url, prefix=quota_prefix)
    limiter.check()
    caplog.set_level(logging.WARNING, logger="judge.models.limiter")
    with StubServer() as stub:
        client = ModelClient("quota", _endpoint(stub.base_url), limiter=limiter)
        client.complete(ASK, temperature=0.0, max_tokens=8)
        relay.cut()
        done = []
        call = threading.Thread(
            target=lambda: done.append(client.complete(ASK, temperature=0.0, max_tokens=8))
        )
        call.start()
        time.sleep(1.5)
        sent_while_away = stub.state.requests
        relay.start()
        call.join(timeout=10)
        assert done, "the waiting call went on once Redis was back"
        assert sent_while_away == 1  # the first call only: nothing went out unmetered
        assert stub.state.requests == 2
        assert done[0].attempts == 1
    warned = [r.getMessage() for r in caplog.records]
    assert any(f"Redis at {relay.url}" in m and "unreachable" in m for m in warned), warned
    assert any("answers again" in m for m in warned), warned
    relay.cut()


def test_a_call_that_waits_too_long_for_redis_fails_unsent(quota_prefix: str) -> None:
    relay = Relay()
    relay.start()
    limiter = RedisLimiter(relay.url, prefix=quota_prefix, max_outage_s=0.5)
    limiter.check()
    relay.cut()
    with StubServer() as stub:
        client = ModelClient("quota", _endpoint(stub.base_url), limiter=limiter)
        with pytest.raises(CallFailed) as failed:
            client.complete(ASK, temperature=0.0, max_tokens=8)
        assert stub.state.requests == 0
    assert failed.value.attempts == 0
    assert f"Redis at {relay.url}" in failed.value.reason
    assert "the call was not sent" in failed.value.reason
