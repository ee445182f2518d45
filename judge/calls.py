"""Cached, concurrent model calls: the layer between the runners and ``judge.client``.

The cache key is the hash of (model, messages, parameters, sample index), so a rerun of an
interrupted or finished run pays only for calls that never completed. Workers only call the
model and read the cache; every database write happens on the calling thread, in batches.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from judge.client import CallFailed, Completion, ModelClient
from judge.prompts import sha256
from judge.tables import CallCache

T = TypeVar("T")
R = TypeVar("R")


def cache_key(
    model: str, messages: list[dict[str, str]], params: dict[str, Any], sample_index: int
) -> str:
    """Content hash of one call; identical inputs give identical keys on any machine.

    >>> cache_key("m", [{"role": "user", "content": "hi"}], {"temperature": 0}, 0)[:12]
    '1e4ae2ba6d4b'
    """
    payload = {"model": model, "messages": messages, "params": params, "sample": sample_index}
    return sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")))


@dataclass
class CallOutcome:
    """What one logical call produced: a completion or a failure, and any new cache rows."""

    completion: Completion | None
    failure: CallFailed | None
    cached: bool
    key: str
    new_rows: list[CallCache] = field(default_factory=list)

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
    run are remembered in memory.
    """

    def __init__(self, engine: Engine, model: str) -> None:
        self.engine = engine
        self._rows: dict[str, CallCache] = {}
        self._lock = threading.Lock()
        with Session(engine) as session:
            self._known = set(session.exec(select(CallCache.key).where(CallCache.model == model)))

    def get(self, key: str) -> CallCache | None:
        with self._lock:
            row = self._rows.get(key)
        if row is not None or key not in self._known:
            return row
        with Session(self.engine) as session:
            return session.get(CallCache, key)

    def remember(self, row: CallCache) -> None:
        with self._lock:
            self._rows[row.key] = row


def cached_complete(
    client: ModelClient,
    cache: CallCacheView,
    messages: list[dict[str, str]],
    *,
    sample_index: int,
    temperature: float,
    max_tokens: int,
    schema: dict[str, Any] | None = None,
) -> CallOutcome:
    """Return the cached completion for these inputs, or call the model once (with retries)."""
    params = {
        "temperature": temperature,
        "max_tokens": max_tokens,
        "response_format": client.response_format(schema),
    }
    key = cache_key(client.model, messages, params, sample_index)
    hit = cache.get(key)
    if hit is not None:
        done = Completion(
            hit.text,
            hit.finish_reason,
            hit.prompt_tokens,
            hit.completion_tokens,
            hit.latency_s,
            attempts=0,
        )
        return CallOutcome(done, None, cached=True, key=key)
    # Samples beyond the first get their own seed so endpoints that honour it vary them.
    seed = sample_index if sample_index > 0 else None
    try:
        done = client.complete(
            messages, temperature=temperature, max_tokens=max_tokens, schema=schema, seed=seed
        )
    except CallFailed as failure:
        return CallOutcome(None, failure, cached=False, key=key)
    row = CallCache(
        key=key,
        model=client.model,
        text=done.text,
        finish_reason=done.finish_reason,
        prompt_tokens=done.prompt_tokens,
        completion_tokens=done.completion_tokens,
        latency_s=done.latency_s,
    )
    cache.remember(row)
    return CallOutcome(done, None, cached=False, key=key, new_rows=[row])


def run_concurrently(
    tasks: Iterable[T],
    work: Callable[[T], R],
    *,
    concurrency: int,
) -> Iterator[R]:
    """Run ``work`` over ``tasks`` with at most ``concurrency`` in flight; yield as they finish.

    Only a bounded window of tasks is submitted at a time, so an interrupt leaves little
    work in flight and memory stays flat for any number of tasks.
    """
    pending: set[Future[R]] = set()
    window = max(2 * concurrency, concurrency + 4)
    iterator = iter(tasks)
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        try:
            for task in iterator:
                pending.add(pool.submit(work, task))
                if len(pending) >= window:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield future.result()
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()
        except BaseException:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise


@dataclass(frozen=True)
class RunSummary:
    """What one pass over a run did: tasks attempted, paid calls, cache hits, HTTP requests,
    and the resulting rows counted by their flag or status."""

    run_id: int
    tasks: int
    model_calls: int
    cached: int
    http_attempts: int
    flags: dict[str, int]


def store_results(
    engine: Engine,
    run_id: int,
    tasks: list[T],
    work: Callable[[T], tuple[Any, list[CallOutcome]]],
    *,
    concurrency: int,
    label: Callable[[Any], str],
    progress: Callable[[int, int], None] | None = None,
) -> RunSummary:
    """Run ``work`` over ``tasks`` concurrently and store each result row with its new cache
    rows as it arrives; an interrupt commits what has arrived before it propagates."""
    flags: dict[str, int] = {}
    calls = cached = attempts = finished = 0
    with Session(engine, expire_on_commit=False) as session:
        writer = BatchWriter(session)
        try:
            for row, outcomes in run_concurrently(tasks, work, concurrency=concurrency):
                for outcome in outcomes:
                    cached += outcome.cached
                    calls += not outcome.cached
                    attempts += outcome.attempts
                writer.add(row, outcomes)
                flags[label(row)] = flags.get(label(row), 0) + 1
                finished += 1
                if progress:
                    progress(finished, len(tasks))
        finally:
            writer.flush()
    return RunSummary(run_id, len(tasks), calls, cached, attempts, flags)


class BatchWriter:
    """Adds rows on the calling thread and commits every ``every`` results or ``seconds``.

    New cache rows are plain inserts (no per-row SELECT); a key written meanwhile by another
    process makes the batch fall back to merging, so a race loses nothing.
    """

    def __init__(self, session: Session, *, every: int = 200, seconds: float = 1.0) -> None:
        self.session = session
        self.every = every
        self.seconds = seconds
        self._pending: list[Any] = []
        self._cache_keys: set[str] = set()
        self._count = 0
        self._last = time.monotonic()

    def add(self, row: Any, outcomes: Iterable[CallOutcome] = ()) -> None:
        """Queue one result row and the cache rows its calls produced."""
        for outcome in outcomes:
            for new in outcome.new_rows:
                if new.key not in self._cache_keys:
                    self._cache_keys.add(new.key)
                    self._pending.append(new)
        self._pending.append(row)
        self._count += 1
        if self._count >= self.every or time.monotonic() - self._last > self.seconds:
            self.flush()

    def flush(self) -> None:
        self.session.add_all(self._pending)
        try:
            self.session.commit()
        except IntegrityError:
            self.session.rollback()
            for row in self._pending:
                self.session.merge(row)
            self.session.commit()
        self._pending.clear()
        self._count = 0
        self._last = time.monotonic()
