"""Figures computed ahead, off the job slots (``server.usecases.figures`` keeps them).

A ``Warmer`` per process computes judge runs' pages on a thread of its own, never inside
a job's slot, and one process at a time per run (``server.usecases.figures.CLAIM``): when
a job ends its worker only names the runs it touched (``warm_after_job``), and the one
warmer that holds a store's watch (``WATCH_CLAIM``) also looks at the store (every
``WATCH_EVERY_S``) for runs whose rows changed by any other path (``ratings import``, a CLI
``judge``, a campaign pull, an API post) and computes their pages again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from server.usecases.dashboard import BOOKKEEPING, run_version, store_version
from server.usecases.figures import version_text, warm_claimed

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.config import Settings

log = logging.getLogger("fairjudge.figures")

WATCH_RUNS = 20
"""How many judge runs the warmer watches for writes (those with kept figures, most recently
computed first, and the newest runs): a bound on what one look at the store costs."""
WATCH_EVERY_S = 2.0
"""How often the warmer looks at the store for runs whose rows changed: one statement when
nothing changed (the store's version), a few per watched run when something did."""
WATCH_CLAIM = "figures-watch"
"""The lease (``judge.runs.run_lease``, run id 0: the store) the one process that watches a
store holds: of every worker's warmer, only its holder looks at the store; the others
compute only what they are asked (a job that ended) and take the watch over when its holder
dies (at once on the same host, after ``judge.runs.LEASE_SECONDS`` elsewhere)."""
ELECT_EVERY_S = 5.0
"""How often a warmer that does not watch tries to take the watch over."""
FULL_LOOK_S = 30.0
"""How often the watch fingerprints the whole store (``store_version``: counts, times and
in-place statuses of every table); between, a look is one cheap statement (``change_marks``:
each table's highest id and rows, read from its primary key)."""
SETTLE_S = 3.0
"""A run whose rows changed is computed again once its version has stayed the same this
long and no live process holds its judge or generation lease (a run being written is not
recomputed at every look)."""
NICE = 0
"""How much lower than the process's the warmer thread's CPU priority is (Linux: per
thread). 0: a thread of its own is what keeps warming off the job slots; a niced thread in a
process with a GIL can hold it while descheduled (the job threads then wait all the same),
and on a busy machine it makes the pages later still."""


def runs_kept(engine: Engine, limit: int = WATCH_RUNS) -> list[int]:
    """Judge runs that have kept figures, most recently computed first."""
    from sqlalchemy import func
    from sqlmodel import Session, col, select

    from server.tables import DashboardFigure

    with Session(engine) as session:
        rows = session.exec(
            select(DashboardFigure.judge_run_id, func.max(DashboardFigure.computed_at))
            .where(col(DashboardFigure.judge_run_id).is_not(None))
            .group_by(col(DashboardFigure.judge_run_id))
            .order_by(func.max(DashboardFigure.computed_at).desc())
            .limit(limit)
        ).all()
    return [int(run) for run, _ in rows if run is not None]


def runs_of_result(result: Any) -> list[int]:
    """The judge runs a job's result names: the run it judged (``judge_run_id``), the run
    whose checks it added to (``checked_judge_run_id``), a sweep's runs (``judge_run_ids``)."""
    if not isinstance(result, dict):
        return []
    named = [result.get("checked_judge_run_id"), result.get("judge_run_id")]
    named += list(result.get("judge_run_ids") or [])
    return [r for r in named if isinstance(r, int) and not isinstance(r, bool)]


def change_marks(session: Session) -> tuple[Any, ...]:
    """A cheap look at whether the store changed: per table that a figure reads, its highest
    id and its rows, in one statement answered from the primary keys. In-place edits escape
    it; ``store_version`` catches them every ``FULL_LOOK_S``."""
    from sqlalchemy import func, select
    from sqlmodel import SQLModel

    import judge.store.tables  # noqa: F401  (registers every table on the metadata)
    import server.tables  # noqa: F401  (and the server's own)

    columns: list[Any] = []
    for table in SQLModel.metadata.sorted_tables:
        if table.name in BOOKKEEPING:
            continue
        columns.append(select(func.count()).select_from(table).scalar_subquery())
        if "id" in table.c:
            columns.append(select(func.max(table.c.id)).scalar_subquery())
    return tuple(session.execute(select(*columns)).one())


def stale_runs(engine: Engine, settings: Settings, runs: Iterable[int]) -> list[int]:
    """Of ``runs``, those with kept figures none of which is at the run's version now."""
    from sqlmodel import Session, col, select

    from server.tables import DashboardFigure

    stale = []
    with Session(engine) as session:
        for run_id in runs:
            kept = set(
                session.exec(
                    select(DashboardFigure.version).where(
                        col(DashboardFigure.judge_run_id) == run_id
                    )
                )
            )
            if kept and version_text(run_version(session, run_id), settings) not in kept:
                stale.append(run_id)
    return stale


class Warmer:
    """Computes judge runs' pages ahead on a thread of its own (``NICE``: its priority): the
    runs it is asked for (``ask``: a job that ended), and the runs whose rows changed by any
    other path, found by watching the store every ``watch_s`` (``None``: only when asked)."""

    def __init__(self, engine: Engine, settings: Settings, *, watch_s: float | None) -> None:
        self.engine, self.settings, self.watch_s = engine, settings, watch_s
        self._asked: dict[int, None] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._store: tuple[Any, ...] | None = None
        self._marks: tuple[Any, ...] | None = None
        self._full_at = 0.0
        self._seen: dict[int, str] = {}
        self._settling: dict[int, tuple[str, float]] = {}
        self._holder: str | None = None  # the watch's lease token, while this one watches
        self._tried = -ELECT_EVERY_S
        self.busy = threading.Event()
        """Set while it computes (for tests and the bench)."""
        self._thread = threading.Thread(target=self._loop, name="figures-warmer", daemon=True)
        self._thread.start()

    def ask(self, runs: Iterable[int]) -> None:
        """Compute these runs' pages soon; returns at once."""
        with self._lock:
            self._asked.update(dict.fromkeys(runs))
        self._wake.set()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        _lower_priority()
        watch = ExitStack()  # holds the watch's lease while this warmer is the one watching
        try:
            while not self._stop.is_set():
                self._wake.wait(self.watch_s)
                self._wake.clear()
                if self._stop.is_set():
                    return
                with self._lock:
                    runs, self._asked = list(self._asked), {}
                try:
                    if self.watch_s is not None and self._elected(watch):
                        runs += self._changed()
                except Exception as exc:  # the store is busy or going away: look again later
                    log.warning("dashboard figures: could not look for changed runs: %s", exc)
                if runs:
                    self.busy.set()
                    try:
                        self._warm(list(dict.fromkeys(runs)))
                    finally:
                        self.busy.clear()
        finally:
            watch.close()

    def _elected(self, watch: ExitStack) -> bool:
        """Whether this warmer watches the store: it holds ``WATCH_CLAIM`` (checked at each
        look: a lease that lapsed and was taken over is given up), else it tries to take it
        every ``ELECT_EVERY_S``."""
        from sqlmodel import Session

        from judge.runs import RunBusyError, run_lease
        from judge.store.tables import RunLease

        if self._holder is not None:
            with Session(self.engine) as session:
                held = session.get(RunLease, (WATCH_CLAIM, 0))
            if held is not None and held.token == self._holder:
                return True
            log.info("dashboard figures: the store's watch was taken over by another process")
            self._holder = None
            watch.close()
        if time.monotonic() - self._tried < ELECT_EVERY_S:
            return False
        self._tried = time.monotonic()
        try:
            me = watch.enter_context(run_lease(self.engine, WATCH_CLAIM, 0))
        except RunBusyError:
            return False
        self._holder = me.token
        log.info("dashboard figures: process %d watches the store for writes", os.getpid())
        return True

    def _changed(self) -> list[int]:
        """Runs whose rows changed since the last look, runs new since then, and runs kept
        at an old version, among the watched ones, once each has settled (``SETTLE_S``);
        nothing when the store is unchanged (``change_marks``, and ``store_version`` every
        ``FULL_LOOK_S``)."""
        from sqlmodel import Session, col, select

        from judge.store.tables import JudgeRun

        with Session(self.engine) as session:
            marks = change_marks(session)
            full = time.monotonic() - self._full_at >= FULL_LOOK_S
            now = store_version(session) if full else self._store
            if marks == self._marks and now == self._store and not self._settling:
                if full:
                    self._full_at = time.monotonic()
                return []
            if now is None:  # the first look: the whole store's fingerprint too
                now = store_version(session)
            first = self._store is None
            newest = session.exec(
                select(JudgeRun.id).order_by(col(JudgeRun.id).desc()).limit(WATCH_RUNS)
            ).all()
            watched = list(dict.fromkeys([*runs_kept(self.engine), *newest]))
            changed, seen = [], {}
            for run_id in watched:
                if run_id is None:
                    continue
                version = version_text(run_version(session, run_id), self.settings)
                # A run first seen after the first look is new (a CLI judge, an import):
                # its pages too. At the first look, only runs kept at an old version.
                if self._seen.get(run_id, None if not first else version) == version:
                    seen[run_id] = version
                    self._settling.pop(run_id, None)
                elif self._settled(session, run_id, version):
                    changed.append(run_id)
                    seen[run_id] = version
            settling = set(self._settling)
        stale = [r for r in stale_runs(self.engine, self.settings, watched) if r not in settling]
        found = list(dict.fromkeys([*changed, *stale]))
        # Only a look that got this far counts as seen: one that raised (a busy store) is
        # made again at the next look instead of taking the store as unchanged.
        self._store, self._marks = now, marks
        if full or first:
            self._full_at = time.monotonic()
        self._seen.update(seen)
        return found

    def _settled(self, session: Session, run_id: int, version: str) -> bool:
        """Whether a run whose rows changed is to be computed now: its version has stayed
        ``version`` for ``SETTLE_S`` and no live process holds its judge or generation lease
        (one being written is left until then)."""
        from judge.runs import lease_holder
        from judge.store.tables import JudgeRun

        now = time.monotonic()
        at_version, since = self._settling.get(run_id, (None, now))
        if at_version != version:
            self._settling[run_id] = (version, now)
            return False
        run = session.get(JudgeRun, run_id)
        writing = run is not None and (
            lease_holder(session, "judge", run_id) is not None
            or lease_holder(session, "generation", run.generation_run_id) is not None
        )
        if writing or now - since < SETTLE_S:
            return False
        self._settling.pop(run_id, None)
        return True

    def _warm(self, runs: list[int]) -> None:
        from sqlmodel import Session

        from judge.store.tables import JudgeRun

        for run_id in runs:
            try:
                with Session(self.engine) as session:
                    if session.get(JudgeRun, run_id) is None:
                        continue
                took = warm_claimed(self.engine, self.settings, run_id)
                if took is not None:
                    log.info(
                        "dashboard figures of judge run %s computed ahead (pid %d): %s",
                        run_id, os.getpid(), took,
                    )  # fmt: skip
            except Exception as exc:
                log.warning("dashboard figures of judge run %s not computed ahead: %s", run_id, exc)


def _lower_priority() -> None:
    """Lower this thread's CPU priority by ``NICE`` (Linux schedules threads one by one)."""
    if not NICE:
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + NICE)
    except (AttributeError, OSError) as exc:  # not Linux, or not allowed: the same priority
        log.info("dashboard figures computed at the process's own priority (%s)", exc)


_WARMERS: dict[str, Warmer] = {}
_WARMERS_LOCK = threading.Lock()


def warmer(engine: Engine, settings: Settings, *, watch: bool = True) -> Warmer:
    """This process's warmer for the store ``engine`` opens (started on first use)."""
    name = _name(engine)
    with _WARMERS_LOCK:
        found = _WARMERS.get(name)
        if found is None or not found._thread.is_alive():
            found = Warmer(engine, settings, watch_s=WATCH_EVERY_S if watch else None)
            _WARMERS[name] = found
        return found


def close_warmer(engine: Engine, timeout: float = 1.0) -> None:
    """Stop this process's warmer for ``engine``'s store (a worker that stops); a page it is
    computing is finished on its daemon thread, nothing else is started."""
    with _WARMERS_LOCK:
        found = _WARMERS.pop(_name(engine), None)
    if found is not None:
        found.close(timeout)


def _name(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def warm_after_job(engine: Engine, settings: Settings, runs: Iterable[int]) -> None:
    """After a job: have this process's warmer compute the pages of the judge runs it
    touched (``runs``). Returns at once, so the job's slot is free for the next job; never
    raises: a figure that fails is computed, and its error shown, when its page opens."""
    try:
        warmer(engine, settings).ask(runs)
    except Exception as exc:  # a thread that cannot start: the pages can wait
        log.warning("dashboard figures not computed ahead: %s", exc)
