"""A pass over a run cut short (Ctrl-C, SIGTERM, a cancelled job, closing the generator)
ends at once, without waiting for calls still in flight, and stores the results that had
already arrived (judge/runs.py; the whole commands: tests/server/cli/test_interrupt.py).

Calls in flight are played by work functions that block on an event. Each test releases
them a few seconds later whatever happens, so code that waits for them (the bug these tests
pin: Python joins a ThreadPoolExecutor's threads before it lets the pass end) finishes late
and fails the timing assertion instead of hanging the suite.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, select
from sqlalchemy.engine import Engine

from judge.models.cache import CallOutcome
from judge.runs import ResultWriter, run_concurrently, store_results
from judge.store.interrupts import interrupts_held

BOUND_S = 1.0  # an interrupted pass must end this soon; the blocked calls wait RELEASE_S
RELEASE_S = 4.0

Result = tuple[dict[str, Any] | None, list[CallOutcome]]


@pytest.fixture(autouse=True)
def python_sigint_handler() -> Iterator[None]:
    """These tests interrupt this process with SIGINT: Python's own handler must take it. An
    in-process ``server.cli.main()`` earlier in the session (tests/server/cli) installs the
    command's handler, whose backstop would end the test session 20 s later."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def table_engine(tmp_path: Path) -> Iterator[tuple[Table, Engine]]:
    """A one-table SQLite store: one row per finished task (its number and a flag)."""
    engine = create_engine(f"sqlite:///{tmp_path / 'runs.db'}")
    table = Table(
        "result",
        MetaData(),
        Column("task", Integer, primary_key=True),
        Column("flag", String, nullable=False),
    )
    table.metadata.create_all(engine)
    yield table, engine
    engine.dispose()


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set after RELEASE_S (or at the test's end): what the blocked calls wait for."""
    event = threading.Event()
    timer = threading.Timer(RELEASE_S, event.set)
    timer.start()
    yield event
    event.set()
    timer.cancel()


def stored(table: Table, engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return sorted(conn.execute(select(table.c.task)).scalars())


def row(task: int) -> Result:
    return {"task": task, "flag": "ok"}, []


@pytest.mark.timeout(30)
def test_ctrl_c_while_calls_are_in_flight_ends_the_pass_at_once(
    table_engine: tuple[Table, Engine], release: threading.Event
) -> None:
    table, engine = table_engine
    blocked = {0, 1}  # two calls that do not come back (a slow or dead endpoint)
    rest_stored = threading.Event()
    signalled: list[float] = []

    def work(task: int) -> Result:
        if task in blocked:
            release.wait()
        return row(task)

    def progress(done: int, total: int) -> None:
        if done == total - len(blocked):
            rest_stored.set()

    def interrupt() -> None:
        # Once every other task is stored the main thread can only be waiting for the two
        # blocked calls: Ctrl-C lands there, inside the concurrent runner.
        rest_stored.wait()
        signalled.append(time.monotonic())
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        store_results(
            engine, table, 1, list(range(10)), work, concurrency=3, label="flag",
            progress=progress,
        )  # fmt: skip
    ended = time.monotonic()
    assert signalled and ended - signalled[0] < BOUND_S, ended - signalled[0]
    assert not release.is_set()  # it ended while the calls were still blocked
    # The eight tasks that were not blocked finished and are stored; the two are not.
    assert stored(table, engine) == list(range(2, 10))


@pytest.mark.timeout(30)
def test_results_that_arrived_before_the_interrupt_are_stored(
    table_engine: tuple[Table, Engine], release: threading.Event
) -> None:
    table, engine = table_engine
    first_stored = threading.Event()
    returned: list[int] = []
    lock = threading.Lock()

    def work(task: int) -> Result:
        if task:  # tasks 1-3 finish only after task 0's result is stored, while its
            first_stored.wait()  # progress callback (where the interrupt lands) runs
        with lock:
            returned.append(task)
        return row(task)

    def progress(done: int, total: int) -> None:
        first_stored.set()
        deadline = time.monotonic() + RELEASE_S
        while len(returned) < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.2)  # from a worker's return to its result on the queue: microseconds
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store_results(
            engine, table, 1, [0, 1, 2, 3], work, concurrency=4, label="flag",
            progress=progress,
        )  # fmt: skip
    # Task 0 was stored before the interrupt; 1-3 had come back (paid for) but were not yet
    # stored: they are stored on the way out, not paid again by the rerun.
    assert stored(table, engine) == [0, 1, 2, 3]


@pytest.mark.timeout(30)
def test_closing_the_runner_early_does_not_wait_for_calls_in_flight(
    release: threading.Event,
) -> None:
    def work(task: int) -> int:
        if task:
            release.wait()
        return task

    batches = run_concurrently(range(6), work, concurrency=3)
    assert next(batches) == [0]  # tasks 1 and 2 are now blocked in their calls
    start = time.monotonic()
    batches.close()  # what a cancelled job or an exception in the caller's loop does
    assert time.monotonic() - start < BOUND_S
    assert not release.is_set()


def test_the_runner_gives_every_result_once_and_passes_errors_on() -> None:
    # 20 tasks at concurrency 4: every result once, in some order (the window and the
    # batching must neither drop nor repeat one).
    got = [
        r for batch in run_concurrently(range(20), lambda t: t * t, concurrency=4) for r in batch
    ]
    assert sorted(got) == [t * t for t in range(20)]

    def fails_on_3(task: int) -> int:
        if task == 3:
            raise ValueError("task 3 failed")
        return task

    with pytest.raises(ValueError, match="task 3 failed"):
        for _ in run_concurrently(range(10), fails_on_3, concurrency=2):
            pass


def test_an_interrupt_during_a_transaction_takes_effect_after_it() -> None:
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            signal.raise_signal(signal.SIGINT)
            reached.append("end of the block")
    assert reached == ["end of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


@pytest.mark.timeout(30)
def test_ctrl_c_while_a_write_waits_for_the_lock_commits_it_and_frees_the_lock(
    table_engine: tuple[Table, Engine], tmp_path: Path
) -> None:
    """Another connection holds SQLite's write lock; Ctrl-C comes while the writer waits for
    it, then the lock is freed. Raised inside the driver, the interrupt made SQLAlchemy drop
    the connection without a rollback, its open INSERT keeping the lock, so the cleanup that
    follows (storing what arrived, freeing the lease) waited 30 s (found by this test)."""
    table, engine = table_engine
    other = sqlite3.connect(tmp_path / "runs.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")

    def interrupt_then_unlock() -> None:
        time.sleep(0.3)  # let the writer get into its wait for the lock
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        other.rollback()

    threading.Thread(target=interrupt_then_unlock, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        with engine.connect() as conn:
            ResultWriter(conn, table).add_all([row(1), row(2)])
    # The batch was committed whole before the interrupt took effect, and nothing holds the
    # lock now: a third connection gets it at once.
    assert stored(table, engine) == [1, 2]
    third = sqlite3.connect(tmp_path / "runs.db", timeout=0.5, isolation_level=None)
    third.execute("BEGIN IMMEDIATE")
    third.rollback()
    third.close()
    other.close()
