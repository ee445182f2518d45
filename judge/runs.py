"""Running many model calls of one run concurrently and storing each result as it arrives.

Workers only call the model and read the cache; every database write happens on the calling
thread, in batches (``BatchWriter``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from judge.models.cache import CallOutcome

T = TypeVar("T")
R = TypeVar("R")


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
