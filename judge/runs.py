"""Running many model calls of one run concurrently, storing each result durably as it
arrives, and keeping a second process off a run that one is already working on.

Workers only call the model and read the cache; every database write happens on the calling
thread (``ResultWriter``): the results that have arrived are inserted in one transaction on
one connection, then their slots are freed. A call starts only while fewer than
``concurrency`` calls are started and not yet committed, so a process killed at any moment
(``kill -9``) leaves at most ``concurrency`` paid calls unstored: a rerun pays for those and
nothing else. An interrupt (Ctrl-C, SIGTERM) does better: the workers are stopped without
waiting for the calls in flight, the results that have come back are stored, and the run's
lease is freed, so the process ends at once and the same command can be run again.

Rows travel as plain dicts and are written with SQLAlchemy Core ``INSERT``s (one statement
per table per commit), not as ORM objects: at 160 results a second the ORM's unit of work
was a quarter of the client's CPU (docs/performance.md).

Every kind of run (generation, judge, audit: ``RunBase`` tables) goes through one lifecycle
(``judge.store.lifecycle``): ``get_or_create_run`` finds the run of the same identity (so
asking again resumes it) or makes one, ``commit_run`` stores it at once and gives its id,
``start_run`` marks it running under its lease, and ``finish_run`` writes the outcome
(finished, or incomplete and why) and the time. Each stage passes in only what is its own:
the columns that identify its runs and how its outcome is read from its results.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import Any, TypeVar
from uuid import uuid4

from sqlalchemy import Table, delete, insert, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from judge.errors import FairJudgeError
from judge.models.cache import CallOutcome
from judge.progress import Progress, begin
from judge.store.interrupts import interrupts_held
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
    work in flight and memory stays flat for any number of tasks. However the generator
    ends (done, an error, an interrupt, ``close()``), its workers are stopped without
    waiting for the calls they are in (see ``_Workers``).
    """
    run = _Run(tasks, work, concurrency)
    try:
        while (batch := run.next_batch()) is not None:
            yield batch
    finally:
        run.stop()


_END: Any = object()

WAIT_SLICE_S = 0.1
"""How long the calling thread blocks at a time while it waits for a result: the longest an
interrupt can go unseen."""


class _Workers:
    """``n`` daemon threads calling ``work`` on the tasks put to them; each outcome
    (``(True, result)`` or ``(False, exception)``) goes on ``done``.

    Not a ``ThreadPoolExecutor``: Python joins its threads when the interpreter exits,
    whatever ``shutdown(wait=False)`` said, so one call in flight (an HTTP call may run to
    its timeout, times its retries) would hold an interrupted command open for minutes.
    These threads are abandoned instead: once stopped, one busy in a call ends after it,
    and a process that exits does not wait for them. Workers only call models and read
    the cache, so abandoning them loses nothing stored.
    """

    def __init__(self, work: Callable[[Any], Any], n: int) -> None:
        self._work, self._n = work, n
        self._todo: SimpleQueue[Any] = SimpleQueue()
        self.done: SimpleQueue[tuple[bool, Any]] = SimpleQueue()
        self._stopped = threading.Event()
        self._threads = 0

    def submit(self, task: Any) -> None:
        if self._threads < self._n:  # started as needed, like ThreadPoolExecutor's
            threading.Thread(target=self._loop, name="run-worker", daemon=True).start()
            self._threads += 1
        self._todo.put(task)

    def stop(self) -> None:
        """Start no more tasks; idle workers end now, busy ones after their call."""
        self._stopped.set()
        for _ in range(self._threads):
            self._todo.put(_END)

    def _loop(self) -> None:
        while True:
            task = self._todo.get()
            if task is _END or self._stopped.is_set():
                return
            try:
                outcome: tuple[bool, Any] = (True, self._work(task))
            except BaseException as exc:  # handed to the calling thread, raised there
                outcome = (False, exc)
            self.done.put(outcome)


class _Run:
    """The calling thread's side of ``run_concurrently``: keeps a window of tasks
    submitted, hands out results in batches, and after a stop gives the results that had
    already arrived (so an interrupted pass can still store them)."""

    def __init__(self, tasks: Iterable[Any], work: Callable[[Any], Any], concurrency: int):
        self._tasks = iter(tasks)
        self._workers = _Workers(work, concurrency)
        self._window = max(2 * concurrency, concurrency + 4)
        self._pending = 0
        self._exhausted = False

    def next_batch(self) -> list[Any] | None:
        """Every result that has arrived, waiting for one if none has; None when done."""
        while not self._exhausted and self._pending < self._window:
            task = next(self._tasks, _END)
            if task is _END:
                self._exhausted = True
                break
            self._workers.submit(task)
            self._pending += 1
        if not self._pending:
            return None
        batch = [self._result(self._next_outcome())]
        batch.extend(self.arrived())
        return batch

    def _next_outcome(self) -> tuple[bool, Any]:
        # Waiting in slices, not at once: a signal that comes between the last check of
        # the interpreter and the start of a blocking wait does not interrupt that wait,
        # so Ctrl-C would be seen only when the next result came (never, from an endpoint
        # that hangs). Between two slices Python runs the signal's handler.
        while True:
            try:
                return self._workers.done.get(timeout=WAIT_SLICE_S)
            except Empty:
                continue

    def arrived(self, *, drop_failures: bool = False) -> list[Any]:
        """The results that have arrived and were not handed out yet, without waiting; a
        task that raised raises here, or with ``drop_failures`` is left out."""
        batch: list[Any] = []
        while True:
            try:
                outcome = self._workers.done.get_nowait()
            except Empty:
                return batch
            if outcome[0] or not drop_failures:
                batch.append(self._result(outcome))

    def stop(self) -> None:
        self._workers.stop()

    def _result(self, outcome: tuple[bool, Any]) -> Any:
        self._pending -= 1
        ok, value = outcome
        if not ok:
            raise value
        return value


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
    call, the calling thread gives it back after the result's commit.

    The free slots are tokens in a ``SimpleQueue`` (C code) rather than a
    ``threading.Semaphore``, whose Python-level condition variable cost the calling thread
    about 0.1 ms per result given back at concurrency 32 (docs/performance.md)."""

    def __init__(self, n: int) -> None:
        self._free: SimpleQueue[None] = SimpleQueue()
        self.give_back(n)
        self.stopped = threading.Event()

    def take(self) -> None:
        while True:
            try:
                return self._free.get(timeout=0.1)
            except Empty:
                if self.stopped.is_set():
                    raise _Stopped from None

    def give_back(self, n: int = 1) -> None:
        for _ in range(n):
            self._free.put(None)


def store_results(
    engine: Engine,
    table: Table,
    run_id: int,
    tasks: list[T],
    work: Callable[[T], tuple[Row | None, list[CallOutcome]]],
    *,
    concurrency: int,
    label: str,
    progress: Progress | None = None,
    run_column: str | None = None,
    items: frozenset[int] | None = None,
) -> RunSummary:
    """Run ``work`` over ``tasks`` concurrently and insert each result row into ``table``
    with its new cache rows as it arrives, before the call that frees its slot may start.
    ``label`` names the column the summary counts rows by ('flag', 'status'). A task whose
    work gives no row (a cost budget stopped it) stores its paid calls in the cache only,
    and is counted as ``not_made``.

    However the pass ends early (Ctrl-C, SIGTERM, a cancelled job, an error), the workers
    are stopped first, then the results that had already arrived are stored, and only then
    does the exception go on: nothing waits for a call still in flight (docs/judging.md,
    "Interrupting a run").

    ``progress`` hears (done, total) over the whole run: with ``run_column`` (the column of
    ``table`` that holds the run's id), the rows the run already had when this pass began
    count as done, so a resumed run says 1,000/1,200 rather than starting again from 0/200;
    it hears that first, before any call (``judge.progress.begin``). With ``items`` (a part
    of a run split between workers) only the rows of those items count, so that the parts'
    progress adds up to the run's and a part sent again replaces its own count. A task the
    budget stopped is not done: a stopped pass never reaches its total."""
    before = 0 if run_column is None else _rows_of_run(engine, table, run_column, run_id, items)
    begin(progress, before, before + len(tasks))
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

    def count(batch: list[tuple[Row | None, list[CallOutcome]]]) -> None:
        nonlocal calls, cached, attempts, finished
        for row, outcomes in batch:
            for outcome in outcomes:
                cached += outcome.cached
                calls += not outcome.cached
                attempts += outcome.attempts
            name = NOT_MADE if row is None else row[label]
            flags[name] = flags.get(name, 0) + 1
            finished += row is not None

    run = _Run(tasks, gated, concurrency)
    writing: list[tuple[Row | None, list[CallOutcome]]] = []  # a batch not yet committed
    try:
        with engine.connect() as conn:
            writer = ResultWriter(conn, table)
            while (batch := run.next_batch()) is not None:
                writing = batch
                writer.add_all(batch)
                writing = []
                slots.give_back(len(batch))
                count(batch)
                if progress:
                    progress(before + finished, before + len(tasks))
    except BaseException:
        # Stop before anything else: a worker waiting for a slot, or about to start a call,
        # must not (the old order, stopping after the pool's exit, hung forever).
        slots.stopped.set()
        run.stop()
        _store_arrived(engine, table, writing, run)
        raise
    finally:
        slots.stopped.set()
        run.stop()
    return RunSummary(run_id, len(tasks), calls, cached, attempts, flags)


def _rows_of_run(
    engine: Engine, table: Table, run_column: str, run_id: int, items: frozenset[int] | None
) -> int:
    """The run's rows in ``table`` (of ``items`` only, when given)."""
    from sqlalchemy import func, select

    query = select(func.count()).select_from(table).where(table.c[run_column] == run_id)
    if items is not None:
        query = query.where(table.c.item_id.in_(sorted(items)))
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def _store_arrived(
    engine: Engine,
    table: Table,
    unsure: list[tuple[Row | None, list[CallOutcome]]],
    run: _Run,
) -> None:
    """Store what had come back when a pass was cut short: the batch whose transaction the
    interrupt broke (``unsure``: rolled back, or committed just before) and the results
    that had arrived since (paid calls: a rerun would pay for them again).

    On a fresh connection, the old one's state being unknown. A batch stored again meets
    the table's unique key (every results table has one), which says it was committed.
    Best effort: a failure here must not hide why the pass ended; a result being handed
    over at the very instant of an interrupt may be lost, as with ``kill -9`` (its call is
    paid again by the rerun)."""
    try:
        with engine.connect() as conn:
            writer = ResultWriter(conn, table)
            if unsure:
                try:
                    writer.add_all(unsure)
                except IntegrityError:  # it had been committed
                    pass
            arrived = run.arrived(drop_failures=True)
            if arrived:
                writer.add_all(arrived)
    except Exception:  # the database may be why the pass ended
        return


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
        cache_rows: dict[str, Mapping[str, Any]] = {}
        for row, outcomes in results:
            if row is not None:
                rows.append(row)
            for outcome in outcomes:
                for new in outcome.new_rows:
                    if new["key"] not in self._cache_keys:
                        cache_rows.setdefault(new["key"], new)
        with interrupts_held():
            try:
                with self.conn.begin():
                    self._insert(list(cache_rows.values()), rows)
            except IntegrityError:
                with self.conn.begin():
                    have = set(
                        self.conn.execute(
                            select(CallCache.key).where(col(CallCache.key).in_(list(cache_rows)))  # type: ignore[call-overload]
                        ).scalars()
                    )
                    self._insert([r for k, r in cache_rows.items() if k not in have], rows)
            # Only once committed: a batch rolled back may be stored again.
            self._cache_keys.update(cache_rows)

    def _insert(self, cache_rows: list[Mapping[str, Any]], rows: list[Row]) -> None:
        if cache_rows:
            self.conn.execute(self._insert_cache, cache_rows)
        if rows:
            self.conn.execute(self._insert_rows, rows)


@dataclass(frozen=True)
class RunPart:
    """One share of a run's items, for a run that several workers split between them
    (``server.jobs``' Celery tasks): the part's number and the items it covers. A part holds
    a lease of its own (``lease_kind``), so parts of one run go on side by side, and it leaves
    the run's status alone: whoever sees the last part end finishes the run."""

    number: int
    item_ids: frozenset[int]

    def lease_kind(self, kind: str) -> str:
        return f"{kind}#{self.number}"


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
    it from a heartbeat thread; raise ``RunBusyError`` at once if a live process holds it.
    However the block ends (an interrupt included), the heartbeat stops and the lease row
    is deleted, so the same command can be run again at once."""
    me = Holder.me()
    done = threading.Event()
    beat: threading.Thread | None = None
    try:
        # Inside the try: an interrupt that lands just after the lease row is written
        # must still free it.
        with interrupts_held():
            _claim(engine, kind, run_id, me, seconds)
        beat = threading.Thread(
            target=_heartbeat, args=(engine, kind, run_id, me, seconds, done), daemon=True
        )
        beat.start()
        yield me
    finally:
        done.set()
        if beat is not None and beat.is_alive():  # an interrupt may have come before it ran
            # Not waited for long: a beat still writing after our delete updates no row
            # (it matches on our token), so it cannot bring the lease back.
            beat.join(timeout=1)
        # No row of ours (refused, or never written): a no-op.
        with interrupts_held(), Session(engine) as session:
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


def lease_holder(session: Session, kind: str, run_id: int) -> RunLease | None:
    """The lease on one run as held now by a live process; None when it is free, lapsed, or
    its holder died on this host."""
    held = session.get(RunLease, (kind, run_id))
    if held is None or held.expires_at <= time.time() or not _alive(held.pid, held.host):
        return None
    return held


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


UNUSABLE_SHARE = 0.5
"""The default of ``[runs] max_unusable_share`` (``judge.config.RunsConfig``): a run whose
results are more than half unscored or failed ends ``unusable``."""


def unusable_detail(
    bad: Mapping[str, int], total: int, what: str, *, limit: float = UNUSABLE_SHARE
) -> str | None:
    """The status line of a run whose ``total`` results hold more than ``limit`` of bad ones
    (``bad``: their count by kind), or None when they are within it (or there are none).

    >>> unusable_detail({"parse_error": 10, "refusal": 2}, 12, "judgments unscored")[:58]
    '12 of 12 judgments unscored (parse_error: 10, refusal: 2),'
    >>> unusable_detail({"parse_error": 6}, 12, "judgments unscored") is None  # half: not more
    True
    """
    count = sum(bad.values())
    if not total or count <= limit * total:
        return None
    why = ", ".join(f"{kind}: {n:,}" for kind, n in sorted(bad.items()))
    return (
        f"{count:,} of {total:,} {what} ({why}), more than the {limit * 100:g} % "
        "[runs] max_unusable_share allows"
    )
