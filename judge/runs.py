"""Running many model calls of one run concurrently, storing each result durably as it
arrives, and keeping a second process off a run that one is already working on.

Workers only call the model and read the cache; every database write happens on the calling
thread (``ResultWriter``): the results that have arrived are inserted in one transaction on
one connection, then their slots are freed. A call starts only while fewer than
``concurrency`` calls are started and not yet committed, so a process killed at any moment
(``kill -9``) leaves at most ``concurrency`` paid calls unstored: a rerun pays for those and
nothing else.

Rows travel as plain dicts and are written with SQLAlchemy Core ``INSERT``s (one statement
per table per commit), not as ORM objects: at 160 results a second the ORM's unit of work
was a quarter of the client's CPU (docs/performance.md).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import Any, TypeVar
from uuid import uuid4

from sqlalchemy import Table, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from judge.errors import FairJudgeError
from judge.models.cache import CallOutcome
from judge.store.tables import CallCache, RunLease

T = TypeVar("T")
R = TypeVar("R")

Row = dict[str, Any]
"""One result row (a ``Response`` or a ``Judgment``) as column name -> value."""

NOT_MADE = "not_made"
"""``RunSummary.flags`` key: tasks left undone because a cost budget ran out."""


def run_concurrently(
    tasks: Iterable[T],
    work: Callable[[T], R],
    *,
    concurrency: int,
) -> Generator[list[R], None, None]:
    """Run ``work`` over ``tasks`` with at most ``concurrency`` in flight; yield the results
    in batches: each batch holds every result that had arrived when the caller asked.

    Only a bounded window of tasks is submitted at a time, so an interrupt leaves little
    work in flight and memory stays flat for any number of tasks. Finished futures arrive
    on a queue, so waiting costs the same for any window size.
    """
    arrived: SimpleQueue[Future[R]] = SimpleQueue()
    window = max(2 * concurrency, concurrency + 4)
    iterator = iter(tasks)
    pending = 0
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        try:
            exhausted = False
            while True:
                while not exhausted and pending < window:
                    task = next(iterator, _END)
                    if task is _END:
                        exhausted = True
                        break
                    future = pool.submit(work, task)  # type: ignore[arg-type]
                    future.add_done_callback(arrived.put)
                    pending += 1
                if not pending:
                    return
                batch = [arrived.get().result()]
                pending -= 1
                while True:
                    try:
                        batch.append(arrived.get_nowait().result())
                    except Empty:
                        break
                    pending -= 1
                yield batch
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


_END: Any = object()


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


class _Stopped(Exception):
    """A worker gave up waiting for a slot because the pass is over (an interrupt)."""


class _Slots:
    """At most ``n`` calls started and not yet committed: a worker takes a slot before its
    call, the calling thread gives it back after the result's commit."""

    def __init__(self, n: int) -> None:
        self._free = threading.Semaphore(n)
        self.stopped = threading.Event()

    def take(self) -> None:
        while not self._free.acquire(timeout=0.1):
            if self.stopped.is_set():
                raise _Stopped

    def give_back(self, n: int = 1) -> None:
        self._free.release(n)


def store_results(
    engine: Engine,
    table: Table,
    run_id: int,
    tasks: list[T],
    work: Callable[[T], tuple[Row | None, list[CallOutcome]]],
    *,
    concurrency: int,
    label: str,
    progress: Callable[[int, int], None] | None = None,
) -> RunSummary:
    """Run ``work`` over ``tasks`` concurrently and insert each result row into ``table``
    with its new cache rows as it arrives, before the call that frees its slot may start.
    ``label`` names the column the summary counts rows by ('flag', 'status'). A task whose
    work gives no row (a cost budget stopped it) stores its paid calls in the cache only,
    and is counted as ``not_made``."""
    flags: dict[str, int] = {}
    calls = cached = attempts = finished = 0
    slots = _Slots(concurrency)

    def gated(task: T) -> tuple[Row | None, list[CallOutcome]]:
        slots.take()
        try:
            return work(task)
        except BaseException:
            slots.give_back()
            raise

    batches = run_concurrently(tasks, gated, concurrency=concurrency)
    with engine.connect() as conn:
        writer = ResultWriter(conn, table)
        try:
            for batch in batches:
                writer.add_all(batch)
                slots.give_back(len(batch))
                for row, outcomes in batch:
                    for outcome in outcomes:
                        cached += outcome.cached
                        calls += not outcome.cached
                        attempts += outcome.attempts
                    name = NOT_MADE if row is None else row[label]
                    flags[name] = flags.get(name, 0) + 1
                finished += len(batch)
                if progress:
                    progress(finished, len(tasks))
        finally:
            slots.stopped.set()  # first, so workers waiting for a slot let the pool close
            batches.close()
    return RunSummary(run_id, len(tasks), calls, cached, attempts, flags)


class ResultWriter:
    """Inserts result rows and the cache rows their calls produced, one transaction per
    batch, on one connection.

    New cache rows are plain inserts (no per-row SELECT); a key written meanwhile by another
    process makes the transaction fall back to inserting only the keys still missing, so a
    race loses nothing. With SQLite in WAL mode (``synchronous=NORMAL``) a commit is an
    append to the log without an fsync: durable once the process dies, cheap enough to do
    per batch (docs/judging.md).
    """

    def __init__(self, conn: Connection, table: Table) -> None:
        self.conn = conn
        self.table = table
        self._cache_keys: set[str] = set()
        # Built once: SQLAlchemy then finds their compiled form in its cache at once.
        self._insert_rows = insert(table)
        self._insert_cache = insert(CallCache.__table__)  # type: ignore[attr-defined]

    def add(self, row: Row, outcomes: Iterable[CallOutcome] = ()) -> None:
        """Store one result row and its new cache rows; durable when this returns."""
        self.add_all([(row, list(outcomes))])

    def add_all(self, results: Iterable[tuple[Row | None, Iterable[CallOutcome]]]) -> None:
        """Store result rows (None: none) and their new cache rows; durable when this
        returns."""
        rows: list[Row] = []
        cache_rows: list[Mapping[str, Any]] = []
        for row, outcomes in results:
            if row is not None:
                rows.append(row)
            for outcome in outcomes:
                for new in outcome.new_rows:
                    if new["key"] not in self._cache_keys:
                        self._cache_keys.add(new["key"])
                        cache_rows.append(new)
        try:
            with self.conn.begin():
                self._insert(cache_rows, rows)
        except IntegrityError:
            keys = [r["key"] for r in cache_rows]
            with self.conn.begin():
                have = set(
                    self.conn.execute(
                        select(CallCache.key).where(col(CallCache.key).in_(keys))  # type: ignore[call-overload]
                    ).scalars()
                )
                self._insert([r for r in cache_rows if r["key"] not in have], rows)

    def _insert(self, cache_rows: list[Mapping[str, Any]], rows: list[Row]) -> None:
        if cache_rows:
            self.conn.execute(self._insert_cache, cache_rows)
        if rows:
            self.conn.execute(self._insert_rows, rows)


class RunBusyError(FairJudgeError):
    """Another live process holds the run's lease."""


LEASE_SECONDS = 30.0
"""How long a lease outlives its last heartbeat: a process killed on another host blocks the
run this long at most (on the same host, a dead holder's lease is taken over at once)."""


@dataclass(frozen=True)
class Holder:
    """Who runs a run: this process's identity in the lease table."""

    pid: int
    host: str
    token: str

    @classmethod
    def me(cls) -> Holder:
        return cls(os.getpid(), socket.gethostname(), uuid4().hex)


@contextmanager
def run_lease(
    engine: Engine, kind: str, run_id: int, *, seconds: float = LEASE_SECONDS
) -> Iterator[Holder]:
    """Hold the lease on one run for the block (``kind``: 'generation' or 'judge'), renewing
    it from a heartbeat thread; raise ``RunBusyError`` at once if a live process holds it."""
    me = Holder.me()
    _claim(engine, kind, run_id, me, seconds)
    done = threading.Event()
    beat = threading.Thread(
        target=_heartbeat, args=(engine, kind, run_id, me, seconds, done), daemon=True
    )
    beat.start()
    try:
        yield me
    finally:
        done.set()
        beat.join(timeout=5)
        with Session(engine) as session:
            session.execute(delete(RunLease).where(*_mine(kind, run_id, me)))
            session.commit()


def _claim(engine: Engine, kind: str, run_id: int, me: Holder, seconds: float) -> None:
    for _ in range(5):  # another claimant may win a race between our read and our write
        with Session(engine) as session:
            now = time.time()
            held = session.get(RunLease, (kind, run_id))
            fields: dict[str, Any] = {"pid": me.pid, "host": me.host, "token": me.token}
            if held is None:
                session.add(RunLease(kind=kind, run_id=run_id, expires_at=now + seconds, **fields))
                try:
                    session.commit()
                    return
                except IntegrityError:
                    continue
            if held.expires_at > now and _alive(held.pid, held.host):
                # On this host the holder is certainly alive; elsewhere it may have died.
                left = held.expires_at - now
                lapse = "" if held.host == me.host else f"; if killed, it lapses in {left:.0f} s"
                raise RunBusyError(
                    f"{kind} run {run_id} is being run by process {held.pid} on host "
                    f"{held.host}: wait for it to finish, or stop it{lapse}"
                )
            taken = session.execute(
                update(RunLease)
                .where(*_mine(kind, run_id, held))
                .values(expires_at=now + seconds, **fields)
            )
            session.commit()
            if taken.rowcount == 1:  # type: ignore[attr-defined]
                return
    raise RunBusyError(f"{kind} run {run_id} is being claimed by other processes; try again")


def _heartbeat(
    engine: Engine,
    kind: str,
    run_id: int,
    me: Holder,
    seconds: float,
    done: threading.Event,
) -> None:
    while not done.wait(seconds / 3):
        try:
            with Session(engine) as session:
                session.execute(
                    update(RunLease)
                    .where(*_mine(kind, run_id, me))
                    .values(expires_at=time.time() + seconds)
                )
                session.commit()
        except Exception:  # a busy database: the next beat tries again well before expiry
            continue


def _mine(kind: str, run_id: int, holder: Holder | RunLease) -> list[Any]:
    return [
        col(RunLease.kind) == kind,
        col(RunLease.run_id) == run_id,
        col(RunLease.token) == holder.token,
    ]


def _alive(pid: int, host: str) -> bool:
    """False only when the holder certainly died: a missing process on this host."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
