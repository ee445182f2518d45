"""The call cache: a finished model call is never paid for twice.

The cache key is the hash of (model, messages, parameters, sample index), so a rerun of an
interrupted or finished run pays only for calls that never completed. Workers only call the
model and read the cache; rows are written by the caller (``judge.runs``). A call that asks
for log-probabilities has ``top_logprobs`` among its parameters, so its key differs from the
same call without them; a call without them keeps the key it always had.

A row reaches the store only after its call returns, so two workers asking for the same key
at once would both miss and both pay (an award run at concurrency 8 paid 80 calls twice
this way). ``cached_complete`` therefore lets one worker make a call that is in flight and
has the others wait for its answer (docs/audits.md).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.hashing import KeyHasher, cache_key
from judge.models.client import CallFailed, Completion, ModelClient
from judge.store.tables import CallCache, utcnow

CacheRow = dict[str, Any]
"""A ``CallCache`` row as column name -> value (written with a Core insert by judge.runs)."""


@dataclass
class CallOutcome:
    """What one logical call produced: a completion or a failure, and any new cache rows."""

    completion: Completion | None
    failure: CallFailed | None
    cached: bool
    key: str
    new_rows: list[CacheRow] = field(default_factory=list)
    refused: bool = False  # the gate (a cost budget) did not let the call go out

    @property
    def attempts(self) -> int:
        """HTTP requests this call made (0 when it came from the cache)."""
        if self.failure is not None:
            return self.failure.attempts
        return self.completion.attempts if self.completion else 0


class CallCacheView:
    """Thread-safe read access to the call cache of one model.

    The keys already cached for the model are loaded once, so a miss costs no database round
    trip; a hit is read from the store with a short session of its own. Calls made during the
    run are remembered in memory. ``claim`` and ``release`` keep a second worker from making
    a call that is already in flight.
    """

    def __init__(self, engine: Engine, model: str) -> None:
        self.engine = engine
        self._rows: dict[str, CacheRow] = {}
        self._flying: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        with Session(engine) as session:
            self._known = set(session.exec(select(CallCache.key).where(CallCache.model == model)))

    def get(self, key: str) -> Completion | None:
        """The cached completion for ``key`` (``attempts`` 0), or None."""
        with self._lock:
            row = self._rows.get(key)
        if row is not None:
            return _completion(row)
        if key not in self._known:
            return None
        with Session(self.engine) as session:
            stored = session.get(CallCache, key)
            return None if stored is None else _completion(stored.model_dump())

    def has(self, key: str) -> bool:
        """Whether a call with this key is cached (no read of its row)."""
        with self._lock:
            return key in self._rows or key in self._known

    def remember(self, row: CacheRow) -> None:
        with self._lock:
            self._rows[row["key"]] = row

    def claim(self, key: str) -> threading.Event | None:
        """None: the caller now makes the call for ``key`` and must ``release`` it; else an
        event that is set once the worker making it is done (already set when its answer
        is in memory), after which the caller looks in the cache again."""
        with self._lock:
            if key in self._rows:
                done = threading.Event()
                done.set()
                return done
            flying = self._flying.get(key)
            if flying is None:
                self._flying[key] = threading.Event()
            return flying

    def release(self, key: str) -> None:
        """The call for ``key`` is over (answered, failed or not made): wake its waiters."""
        with self._lock:
            flying = self._flying.pop(key, None)
        if flying is not None:
            flying.set()


def _completion(row: CacheRow) -> Completion:
    return Completion(
        row["text"],
        row["finish_reason"],
        row["prompt_tokens"],
        row["completion_tokens"],
        row["latency_s"],
        attempts=0,
        logprobs=row["logprobs"],
        cached_prompt_tokens=row.get("cached_prompt_tokens", 0),
    )


def call_key(
    client: ModelClient,
    messages: list[dict[str, str]],
    *,
    sample_index: int,
    temperature: float,
    max_tokens: int,
    schema: dict[str, Any] | None = None,
    top_logprobs: int | None = None,
) -> str:
    """The cache key of one call (what ``cached_complete`` looks up)."""
    params: dict[str, Any] = {
        "temperature": temperature,
        "max_tokens": max_tokens,
        "response_format": client.response_format(schema),
    }
    if top_logprobs is not None:  # only then: every key cached before logprobs stays valid
        params["top_logprobs"] = top_logprobs
    return cache_key(client.config.base_url, client.model, messages, params, sample_index)


class CallKeys:
    """``call_key`` for many calls with the same settings (one per prompt of a design): each
    messages list is serialised and hashed once for all its sample indexes (the repeats of a
    design share one list, one after another; ``judge.hashing.KeyHasher``)."""

    def __init__(
        self, client: ModelClient, *, temperature: float, max_tokens: int,
        schema: dict[str, Any] | None = None, top_logprobs: int | None = None,
    ) -> None:  # fmt: skip
        self._client = client
        self._params: dict[str, Any] = {
            "temperature": temperature,
            "max_tokens": max_tokens,
            "response_format": client.response_format(schema),
        }
        if top_logprobs is not None:  # as call_key: only then
            self._params["top_logprobs"] = top_logprobs
        self._last: list[dict[str, str]] | None = None
        self._hasher: KeyHasher | None = None

    def __call__(self, messages: list[dict[str, str]], sample_index: int) -> str:
        if messages is not self._last or self._hasher is None:
            config = self._client.config
            self._hasher = KeyHasher(config.base_url, self._client.model, messages, self._params)
            self._last = messages
        return self._hasher.key(sample_index)


class CallGate(Protocol):
    """Decides, just before a call that the cache cannot answer, whether it may go out (a
    cost budget: ``judge --max-cost``), and hears what it cost afterwards."""

    def open(self, messages: list[dict[str, str]], max_tokens: int) -> float | None:
        """What the call holds (e.g. its worst-case cost), or None: do not call."""

    def close(self, held: float, done: Completion | None) -> None:
        """The call ended (``done`` None: it failed); release ``held``."""


def cached_complete(
    client: ModelClient,
    cache: CallCacheView,
    messages: list[dict[str, str]],
    *,
    sample_index: int,
    temperature: float,
    max_tokens: int,
    schema: dict[str, Any] | None = None,
    top_logprobs: int | None = None,
    gate: CallGate | None = None,
) -> CallOutcome:
    """Return the cached completion for these inputs, or call the model once (with retries).

    ``top_logprobs`` asks for token log-probabilities (see ``ModelClient.complete``). A
    ``gate`` that refuses a call that is not cached gives an outcome with ``refused`` set
    and neither a completion nor a failure.

    While another worker makes the same call (same key), this one waits for its answer
    instead of paying for it again; if that call failed or was not made, this one makes it.
    """
    key = call_key(
        client, messages, sample_index=sample_index, temperature=temperature,
        max_tokens=max_tokens, schema=schema, top_logprobs=top_logprobs,
    )  # fmt: skip
    while True:
        hit = cache.get(key)
        if hit is not None:
            return CallOutcome(hit, None, cached=True, key=key)
        flying = cache.claim(key)
        if flying is None:
            break
        flying.wait()
    try:
        return _call(client, cache, messages, key, sample_index=sample_index,
                     temperature=temperature, max_tokens=max_tokens, schema=schema,
                     top_logprobs=top_logprobs, gate=gate)  # fmt: skip
    finally:
        cache.release(key)


def _call(
    client: ModelClient,
    cache: CallCacheView,
    messages: list[dict[str, str]],
    key: str,
    *,
    sample_index: int,
    temperature: float,
    max_tokens: int,
    schema: dict[str, Any] | None,
    top_logprobs: int | None,
    gate: CallGate | None,
) -> CallOutcome:
    """The call ``cached_complete`` could not answer from the cache; its row is remembered
    before the caller releases the key, so the waiters find it."""
    held = gate.open(messages, max_tokens) if gate is not None else 0.0
    if held is None:
        return CallOutcome(None, None, cached=False, key=key, refused=True)
    # The sample index is the seed, so endpoints that honour it vary samples reproducibly.
    seed = sample_index
    try:
        done = client.complete(
            messages,
            temperature=temperature,
            max_tokens=max_tokens,
            schema=schema,
            seed=seed,
            top_logprobs=top_logprobs,
        )
    except CallFailed as failure:
        if gate is not None:
            gate.close(held, None)
        return CallOutcome(None, failure, cached=False, key=key)
    if gate is not None:
        gate.close(held, done)
    row: CacheRow = {
        "key": key,
        "model": client.model,
        "text": done.text,
        "finish_reason": done.finish_reason,
        "prompt_tokens": done.prompt_tokens,
        "cached_prompt_tokens": done.cached_prompt_tokens,
        "completion_tokens": done.completion_tokens,
        "latency_s": done.latency_s,
        "created_at": utcnow(),
        "logprobs": done.logprobs,  # always present: judge.runs inserts every column
    }
    cache.remember(row)
    return CallOutcome(done, None, cached=False, key=key, new_rows=[row])
