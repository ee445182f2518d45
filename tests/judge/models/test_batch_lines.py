"""Reading a batch's output and error files back (``judge.models.batch.read_lines``): every
line goes to the call it names, an unreadable line that names a call fails that call with the
line kept, a line naming no call of ours is set aside, and nothing is guessed. The lines are
written here by hand in the shapes OpenAI's Batch API documents."""

from __future__ import annotations

import json
from typing import Any

from judge.models.batch import read_lines, request_line


def ok(key: str, content: str, **choice: Any) -> str:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
                **choice,
            }  # fmt: skip
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    }
    return json.dumps({"custom_id": key, "response": {"status_code": 200, "body": body}})


def test_each_line_is_read_into_its_calls_result() -> None:
    top = [{"token": "3", "logprob": -0.1}, {"token": "4", "logprob": -2.5}]
    logprobs = {"content": [{"token": "3", "logprob": -0.1, "top_logprobs": top}]}
    lines = [
        ok("a", '{"score": 3}'),
        json.dumps(
            {
                "custom_id": "b",
                "response": None,
                "error": {"code": "batch_expired", "message": "too late"},
            }
        ),  # fmt: skip
        json.dumps(
            {
                "custom_id": "c",
                "response": {"status_code": 500, "body": {"error": {"message": "boom"}}},
            }
        ),  # fmt: skip
        '{"custom_id": "d", "response": {"status_code": 200, "body": {"choi',
        ok("not-ours", "x"),
        "no JSON here at all",
        json.dumps({"custom_id": "e", "response": {"status_code": 200, "body": {"choices": []}}}),
        json.dumps({"custom_id": "a", "error": {"code": "server_error", "message": "late"}}),
        ok("f", "3", logprobs=logprobs),
        "",
    ]
    wanted = dict.fromkeys("abcdefg", False) | {"f": True}
    read = read_lines("\n".join(lines).encode(), wanted)

    a = read.results["a"].completion  # the answer, not the later error line for it
    assert a is not None
    assert (a.text, a.finish_reason, a.prompt_tokens, a.completion_tokens) == (
        '{"score": 3}',
        "stop",
        7,
        2,
    )
    assert a.logprobs is None  # not asked for
    assert read.results["b"].failure == "the batch reported an error: batch_expired: too late"
    assert read.results["c"].failure == "HTTP 500: boom"
    d = read.results["d"]
    assert d.completion is None and d.raw == lines[3]
    assert d.failure == "the batch's output line for this call is unreadable"
    assert read.results["e"].failure == "the batch's output line holds no chat completion"
    f = read.results["f"].completion
    assert f is not None and f.logprobs == [
        {"token": "3", "logprob": -0.1, "top": [["3", -0.1], ["4", -2.5]]}
    ]
    assert "g" not in read.results  # never named: the caller lists it as missing
    assert read.stray == [lines[4], lines[5]]


def test_a_request_line_names_its_call_by_key() -> None:
    line = json.loads(request_line("k1", {"model": "m", "messages": []}))
    assert line == {
        "custom_id": "k1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": []},
    }
