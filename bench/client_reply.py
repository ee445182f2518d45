"""The client's CPU per call for reading a chat completion's reply two ways, in one process
against the scripted stub (no latency), one thread, 3,000 calls each after 100 to warm up:

- ``typed``: openai's ``post`` building its ``ChatCompletion`` model from the reply, read by
  attribute (how ``ModelClient.complete`` read replies before 2026-11-28);
- ``plain``: ``post`` returning the HTTP reply, read as JSON by ``read_completion`` (how it
  reads them now, and how a batch's output lines are read).

Each is timed twice, alternating, so a machine that warms up or slows down shows in the pair.

    python -m bench.client_reply
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
from openai.types.chat import ChatCompletion

from bench.wire import Stub
from judge.config import EndpointConfig
from judge.models.client import ModelClient, read_completion

CALLS = 3000


def bench_client_reply(calls: int = CALLS) -> dict[str, Any]:
    stub = Stub(0.0)
    try:
        config = EndpointConfig(
            base_url=stub.url, model="stub-model", structured_output="json_object_schema"
        )
        client = ModelClient("bench", config)
        messages = [
            {"role": "system", "content": "You grade answers. " * 50},
            {"role": "user", "content": "An answer to grade. " * 100},
        ]
        body = client.chat_body(messages, temperature=0.0, max_tokens=300, seed=0, schema={})
        post = client._client.post  # what ModelClient.complete calls

        def typed() -> Any:
            reply = post("/chat/completions", body=body, cast_to=ChatCompletion)
            choice = reply.choices[0]
            return choice.message.content, choice.finish_reason, reply.usage

        def plain() -> Any:
            reply = post("/chat/completions", body=body, cast_to=httpx.Response)
            return read_completion(reply.json(), logprobs=False, latency_s=0.0, attempts=1)

        runs: dict[str, list[float]] = {"typed": [], "plain": []}
        ways: list[tuple[str, Callable[[], Any]]] = [("typed", typed), ("plain", plain)]
        for name, way in ways * 2:
            for _ in range(100):
                way()
            start = time.process_time()
            for _ in range(calls):
                way()
            runs[name].append(round(1000 * (time.process_time() - start) / calls, 3))
    finally:
        stub.stop()
    return {"calls": calls, "cpu_ms_per_call": runs}


if __name__ == "__main__":
    print(json.dumps(bench_client_reply(), indent=2))
