"""A run's row from start to end, for every kind of run: found by its identity or made
(``get_or_create_run``), committed before any call (``commit_run``), marked running by the
holder of its lease (``start_run``), and its outcome stored when it ends (``finish_run``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from judge.errors import NotFoundError
from judge.store.engine import session_scope
from judge.store.tables import RunBase, utcnow
from judge.vocab import RunStatus

AnyRun = TypeVar("AnyRun", bound=RunBase)


def get_or_create_run(
    session: Session,
    table: type[AnyRun],
    identity: Mapping[str, Any],
    *,
    fields: Mapping[str, Any],
    same: Callable[[AnyRun], bool] | None = None,
    new: bool = False,
) -> AnyRun:
    """The newest run of ``table`` whose ``identity`` columns hold these values (and that
    ``same`` accepts: a comparison SQL cannot make, such as two spellings of one server's
    URL), to resume it; else, or with ``new``, a new run of ``identity`` and ``fields``
    (added and flushed, so it has its id)."""
    if not new:
        candidates = session.exec(
            select(table)
            .where(*(getattr(table, name) == value for name, value in identity.items()))
            .order_by(col(table.id).desc())
        )
        for existing in candidates:
            if same is None or same(existing):
                return existing
    run = table(**identity, **fields)
    session.add(run)
    session.flush()
    return run


def commit_run(engine: Engine, get: Callable[[Session], RunBase]) -> int:
    """The id of the run ``get`` finds or makes (``get_or_create_run``), in a transaction of
    its own that is committed before any call. Where a unique key guards a run's identity
    (judge runs), two processes that make it at once both get the one row: the loser's insert
    fails and it looks again, finding the winner's."""
    try:
        return _committed_id(engine, get)
    except IntegrityError:
        return _committed_id(engine, get)


def _committed_id(engine: Engine, get: Callable[[Session], RunBase]) -> int:
    with session_scope(engine) as session:
        run = get(session)
        if run.id is None:  # get_or_create_run flushes: a found or new row has its id
            raise ValueError(f"a {run.run_kind} run was given back without being stored")
        return run.id


def start_run(session: Session, table: type[AnyRun], run_id: int) -> AnyRun:
    """The run, marked running with its earlier status line cleared (a resumed run says
    again how it ended when it ends). Called by the holder of its lease (``run_lease``)."""
    run = _get_run(session, table, run_id)
    run.status, run.status_detail = RunStatus.RUNNING, None
    return run


def _get_run(session: Session, table: type[AnyRun], run_id: int) -> AnyRun:
    run = session.get(table, run_id)
    if run is None:
        raise NotFoundError(
            f"{table.run_kind} run {run_id} was deleted while this command worked on it"
        )
    return run


Outcome = tuple[RunStatus, str | None]
"""How a run ended: finished (no detail), or incomplete or unusable with the line saying
why."""


def finish_run(
    engine: Engine,
    table: type[AnyRun],
    run_id: int,
    outcome: Callable[[Session, AnyRun], Outcome],
) -> Outcome:
    """Store how the run ended, as ``outcome`` reads it from the stored results, and when;
    give it back."""
    with session_scope(engine) as session:
        run = _get_run(session, table, run_id)
        run.status, run.status_detail = ended = outcome(session, run)
        run.finished_at = utcnow()
    return ended
