"""``ModelClient._post`` against openai's own ``post`` (the path it replaced, the independent
source here): for the same reply from the scripted stub, the same body reaches the server and
the same exception comes back, class, status and message alike, so retries (which read the
class) and the stored reasons (which read the message) are unchanged."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest

from judge.config import EndpointConfig
from judge.models.client import ModelClient
from tests.support.factories import free_port
from tests.support.stub_openai import StubServer

MESSAGES = [{"role": "system", "content": "You grade."}, {"role": "user", "content": "Grade."}]


def _client(base_url: str, timeout_s: float = 30.0) -> ModelClient:
    return ModelClient(
        "t", EndpointConfig(base_url=base_url, model="stub-model", timeout_s=timeout_s)
    )


def _body(client: ModelClient) -> dict[str, Any]:
    return client.chat_body(MESSAGES, temperature=0.0, max_tokens=16, seed=3)


def _openai_post(client: ModelClient, body: dict[str, Any]) -> httpx2.Response:
    return client._client.post("/chat/completions", body=body, cast_to=httpx2.Response)


def _raised(call: Any) -> BaseException:
    with pytest.raises(openai.APIError) as caught:
        call()
    return caught.value


def test_a_reply_and_the_body_sent_are_openais() -> None:
    with StubServer() as stub:
        client = _client(stub.base_url)
        body = _body(client)
        ours, theirs = client._post(body).json(), _openai_post(client, body).json()
        sent = stub.state.bodies
    assert ours["choices"] == theirs["choices"]  # the stub answers a body by its content
    assert sent[0] == sent[1] == body  # both posted exactly the body given


@pytest.mark.parametrize("status", [400, 401, 404, 429, 500, 503])
def test_an_error_status_raises_what_openai_raises(status: int) -> None:
    with StubServer(responder=lambda _: status) as stub:
        client = _client(stub.base_url)
        body = _body(client)
        ours, theirs = (
            _raised(lambda: client._post(body)),
            _raised(lambda: _openai_post(client, body)),
        )
    assert type(ours) is type(theirs)
    assert isinstance(ours, openai.APIStatusError) and isinstance(theirs, openai.APIStatusError)
    assert ours.status_code == theirs.status_code == status
    assert str(ours) == str(theirs)  # e.g. "Error code: 500 - {'error': {...}}"
    assert ours.body == theirs.body


def test_a_refused_connection_raises_what_openai_raises() -> None:
    client = _client(f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    body = _body(client)
    ours, theirs = _raised(lambda: client._post(body)), _raised(lambda: _openai_post(client, body))
    assert type(ours) is type(theirs) is openai.APIConnectionError
    assert str(ours) == str(theirs)


def test_a_timeout_raises_what_openai_raises() -> None:
    with StubServer(latency=2.0) as stub:  # every reply 2 s late, the client waits 0.3 s
        client = _client(stub.base_url, timeout_s=0.3)
        body = _body(client)
        ours, theirs = (
            _raised(lambda: client._post(body)),
            _raised(lambda: _openai_post(client, body)),
        )
    assert type(ours) is type(theirs) is openai.APITimeoutError
    assert str(ours) == str(theirs)
