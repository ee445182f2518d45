"""The OpenAI Batch API, through the ``openai`` package (with ``judge.models.client``, the
only modules that import it): upload a JSONL file of chat-completion requests, create a batch
from it, poll it, and read its output and error files back into ``Completion``s.

Each request line carries our call's cache key as its ``custom_id``, so every answer goes
back to the call it answers and into the call cache under the key a live call would have.
Nothing here touches the store; ``judge.models.batching`` records each step before it is
taken and resumes an interrupted batch.

Two steps are not safe to repeat blindly: an upload and a batch creation whose reply was lost
(a timeout, a dropped connection) may have happened at the provider. Before such a step is
tried again, the provider is asked whether it happened: an uploaded file is found by the
unique name it was given, a batch by the input file it was made from (``find_file``,
``find_batch``). So a retry never sends the same calls twice.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import openai

from judge.config import EndpointConfig
from judge.errors import EndpointError
from judge.models.client import (
    FATAL,
    MAX_RETRY_AFTER_S,
    RETRYABLE,
    Completion,
    ModelClient,
    read_completion,
    retry_after_seconds,
)

T = TypeVar("T")

CHAT_URL = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
"""The only window OpenAI offers; a batch not done by then expires with what it finished."""
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
"""Batch statuses after which nothing more happens (validating, in_progress, finalizing and
cancelling are on the way)."""
SHOWN_RAW = 2000
"""Characters of an unreadable output line kept with the call it names."""

_CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*"([^"\\]{1,200})"')


@dataclass(frozen=True)
class BatchState:
    """A batch as the provider last described it."""

    id: str
    status: str
    input_file_id: str
    output_file_id: str | None
    error_file_id: str | None
    total: int
    completed: int
    failed: int
    errors: tuple[str, ...] = ()
    """Why the whole batch failed (validation errors), one line each."""

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


@dataclass(frozen=True)
class LineResult:
    """What the output or error file says about one call: a completion, or why there is
    none (``raw``: the line as it came, when it could not be read)."""

    completion: Completion | None
    failure: str | None = None
    raw: str | None = None


@dataclass
class ReadLines:
    """Lines of an output or error file read back: results by call key, and lines that name
    no call of the batch (unreadable, or a custom_id we never sent)."""

    results: dict[str, LineResult] = field(default_factory=dict)
    stray: list[str] = field(default_factory=list)


def chat_body(
    client: ModelClient,
    messages: list[dict[str, str]],
    *,
    sample_index: int,
    temperature: float,
    max_tokens: int,
    schema: dict[str, Any] | None = None,
    top_logprobs: int | None = None,
) -> dict[str, Any]:
    """The /v1/chat/completions body of one call, as ``ModelClient.complete`` sends it when
    ``judge.models.cache`` makes the call live (the sample index is the seed)."""
    return client.chat_body(
        messages,
        temperature=temperature,
        max_tokens=max_tokens,
        schema=schema,
        seed=sample_index,
        top_logprobs=top_logprobs,
    )


def request_line(key: str, body: dict[str, Any]) -> str:
    """One line of a batch input file: the call's body, named by its cache key."""
    line = {"custom_id": key, "method": "POST", "url": CHAT_URL, "body": body}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def read_lines(data: bytes, wanted: Mapping[str, bool]) -> ReadLines:
    """Read an output or error file. ``wanted`` maps the batch's call keys to whether the
    call asked for log-probabilities. A line that cannot be read but names one of our keys
    becomes that call's failure with the raw text kept; a key never named gets no result
    (the caller lists it as missing). Nothing is guessed."""
    read = ReadLines()
    for raw in data.decode("utf-8", errors="replace").splitlines():
        if not raw.strip():
            continue
        key, result = _read_line(raw, wanted)
        if key is None or key not in wanted:
            read.stray.append(raw[:SHOWN_RAW])
        elif key not in read.results or read.results[key].completion is None:
            read.results[key] = result
    return read


def _read_line(raw: str, wanted: Mapping[str, bool]) -> tuple[str | None, LineResult]:
    kept = raw[:SHOWN_RAW]
    try:
        line = json.loads(raw)
    except ValueError:
        line = None
    if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
        found = _CUSTOM_ID.search(raw)
        key = found.group(1) if found else None
        return key, LineResult(None, "the batch's output line for this call is unreadable", kept)
    key = line["custom_id"]
    error, response = line.get("error"), line.get("response")
    if error:
        return key, LineResult(None, f"the batch reported an error: {_error_text(error)}")
    if not isinstance(response, dict):
        return key, LineResult(None, "the batch's output line has no response", kept)
    status, body = response.get("status_code"), response.get("body")
    if status != 200:
        message = _error_text(body.get("error") if isinstance(body, dict) else body)
        return key, LineResult(None, f"HTTP {status}: {message}")
    completion = _completion(body, logprobs=bool(wanted.get(key)))
    if completion is None:
        return key, LineResult(None, "the batch's output line holds no chat completion", kept)
    return key, LineResult(completion)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        return f"{code}: {message}" if code else str(message)
    return str(error)[:300]


def _completion(body: Any, *, logprobs: bool) -> Completion | None:
    """A chat completion body read as the live client reads one (None: it is not one); a
    batch has no latency per call."""
    return read_completion(body, logprobs=logprobs, latency_s=0.0, attempts=1)


class BatchApi:
    """The files and batches routes of one endpoint (``batch = true`` in its config)."""

    def __init__(self, name: str, config: EndpointConfig) -> None:
        self.name = name
        self.config = config
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key(),
            timeout=config.timeout_s,
            max_retries=0,  # the count here is the true count, as in ModelClient
        )

    def upload(self, filename: str, content: bytes) -> str:
        """Upload a batch input file under ``filename`` (unique per batch); its file id. A
        retry first looks for the file, in case the lost reply's upload happened."""
        created = self._calling(
            f"uploading batch input {filename}",
            lambda: (
                self._client.files.create(
                    file=(filename, content, "application/jsonl"), purpose="batch"
                ).id
            ),
            recover=lambda: self.find_file(filename),
        )
        return created

    def find_file(self, filename: str) -> str | None:
        """The id of an uploaded batch input file of this name, if there is one."""

        def look() -> str | None:
            for item in self._client.files.list(purpose="batch"):
                if item.filename == filename:
                    return item.id
            return None

        return self._calling(f"listing batch files (looking for {filename})", look)

    def create(self, input_file_id: str, metadata: dict[str, str]) -> BatchState:
        """Create a batch from an uploaded file; a retry first looks for a batch made from
        that file, in case the lost reply's creation happened."""
        return self._calling(
            f"creating a batch from {input_file_id}",
            lambda: _state(
                self._client.batches.create(
                    input_file_id=input_file_id,
                    endpoint="/v1/chat/completions",
                    completion_window="24h",
                    metadata=metadata,
                )
            ),
            recover=lambda: self.find_batch(input_file_id),
        )

    def find_batch(self, input_file_id: str, *, since: float | None = None) -> BatchState | None:
        """The batch made from ``input_file_id``, if any (the newest first; batches created
        before ``since``, seconds since the epoch, are not looked through)."""

        def look() -> BatchState | None:
            for batch in self._client.batches.list(limit=100):
                if batch.input_file_id == input_file_id:
                    return _state(batch)
                if since is not None and batch.created_at < since:
                    return None
            return None

        return self._calling(f"listing batches (looking for {input_file_id})", look)

    def retrieve(self, batch_id: str) -> BatchState:
        return self._calling(
            f"reading batch {batch_id}", lambda: _state(self._client.batches.retrieve(batch_id))
        )

    def content(self, file_id: str) -> bytes:
        return self._calling(
            f"downloading file {file_id}", lambda: self._client.files.content(file_id).content
        )

    def _calling(
        self, what: str, step: Callable[[], T], *, recover: Callable[[], T | None] | None = None
    ) -> T:
        """``step`` with transient failures retried (``max_retries``, Retry-After honoured);
        before each retry ``recover`` may find that the step took effect after all."""
        attempts = 0
        while True:
            attempts += 1
            try:
                return step()
            except FATAL as exc:
                raise EndpointError(
                    f"endpoint {self.name!r} refused {what} ({type(exc).__name__}: "
                    f"{exc.message}); check the API key, and that the endpoint offers the "
                    "Batch API (/v1/files, /v1/batches)"
                ) from None
            except RETRYABLE as exc:
                if attempts > self.config.max_retries:
                    raise EndpointError(
                        f"endpoint {self.name!r}: {what} failed {attempts} times "
                        f"({type(exc).__name__}); run the same command again to go on"
                    ) from None
                asked = retry_after_seconds(exc)
                backoff = min(self.config.max_backoff_s, 0.5 * 2 ** (attempts - 1))
                time.sleep(min(asked, MAX_RETRY_AFTER_S) if asked is not None else backoff)
                if recover is not None:
                    found = recover()
                    if found is not None:
                        return found
            except openai.APIStatusError as exc:
                raise EndpointError(
                    f"endpoint {self.name!r} refused {what}: HTTP {exc.status_code}: {exc.message}"
                ) from None
            except openai.APIError as exc:
                raise EndpointError(
                    f"endpoint {self.name!r}: {what} failed ({type(exc).__name__}: {exc})"
                ) from None


def _state(batch: Any) -> BatchState:
    counts = getattr(batch, "request_counts", None)
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    return BatchState(
        id=batch.id,
        status=str(batch.status),
        input_file_id=batch.input_file_id,
        output_file_id=getattr(batch, "output_file_id", None),
        error_file_id=getattr(batch, "error_file_id", None),
        total=getattr(counts, "total", 0) or 0,
        completed=getattr(counts, "completed", 0) or 0,
        failed=getattr(counts, "failed", 0) or 0,
        errors=tuple(
            f"{getattr(e, 'code', None)}: {getattr(e, 'message', None)}"
            + (f" (line {e.line})" if getattr(e, "line", None) is not None else "")
            for e in errors
        ),
    )
