"""The statements the job use cases send (``server/usecases/jobs.py`` and ``parts.py``): reads
and writes of the server's tables (``server/tables.py``), each a function named for what it
does, so that the use cases say what happens to a job and this module how it is stored.

Every function works inside the caller's session (or connection) and commits nothing: the use
case decides where a unit of work begins and ends. Two reads cover the domain's tables a split
job needs: the items a generation run answered, and the lease a run's part is held by.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy import func, update
from sqlalchemy.engine import Connection
from sqlmodel import Session, col, select

from judge.store.tables import Response, RunLease
from server.tables import Job, JobPart, WorkerBeat

# -- jobs ---------------------------------------------------------------------------------------


def page_jobs(
    session: Session, *, status: str | None, kind: str | None, limit: int, offset: int
) -> tuple[list[Job], int]:
    """Newest first: one page of the jobs with ``status`` and ``kind`` (None: any), and how
    many match in all."""
    query = select(Job)
    counted = select(func.count()).select_from(Job)
    for column, value in ((Job.status, status), (Job.kind, kind)):
        if value is not None:
            query = query.where(col(column) == value)
            counted = counted.where(col(column) == value)
    rows = session.exec(query.order_by(col(Job.id).desc()).offset(offset).limit(limit)).all()
    return list(rows), int(session.exec(counted).one())


def set_job_values(session: Session, job_id: int, **values: Any) -> None:
    """Write ``values`` into the job's row."""
    session.execute(update(Job).where(col(Job.id) == job_id).values(**values))


def cancel_requested(session: Session, job_id: int) -> bool:
    """Whether someone asked to cancel the job."""
    return bool(session.exec(select(Job.cancel_requested).where(Job.id == job_id)).one())


def clear_waiting_note(session: Session, job_id: int) -> None:
    """Clear the job's error when it is only a note that the job waits (``waiting: ...``)."""
    session.execute(
        update(Job)
        .where(col(Job.id) == job_id)
        .where(col(Job.error).like("waiting:%"))
        .values(error=None)
    )


def runnable_job_ids(session: Session, *, limit: int = 100, now: float | None = None) -> list[int]:
    """Queued and running jobs, oldest first, at most ``limit``; with ``now`` (seconds since
    the epoch), not the queued ones whose ``not_before`` is still to come (waiting for their
    batches at the provider)."""
    query = select(Job.id).where(col(Job.status).in_(("queued", "running")))
    if now is not None:
        query = query.where(
            (col(Job.status) != "queued")
            | col(Job.not_before).is_(None)
            | (col(Job.not_before) <= now)
        )
    rows = session.exec(query.order_by(col(Job.id)).limit(limit)).all()
    return [int(r) for r in rows if r is not None]


def waiting_job_counts(session: Session) -> dict[str, int]:
    """How many jobs are queued and how many running (a status with none is left out)."""
    return dict(
        session.exec(  # type: ignore[call-overload]
            select(Job.status, func.count())
            .where(col(Job.status).in_(("queued", "running")))
            .group_by(col(Job.status))
        ).all()
    )


def oldest_unstarted(session: Session) -> datetime | None:
    """When the oldest queued job that never started was created (None: no such job)."""
    return session.exec(
        select(func.min(Job.created_at)).where(
            col(Job.status) == "queued", col(Job.started_at).is_(None)
        )
    ).one()


def end_running_job(session: Session, job_id: int, **values: Any) -> bool:
    """Write ``values`` into the job's row if it is still running; whether it was (so of two
    callers ending it at once, one wins)."""
    done = session.execute(
        update(Job).where(col(Job.id) == job_id, col(Job.status) == "running").values(**values)
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]


def cancel_if_requested(session: Session, job_id: int, when: datetime) -> None:
    """A running job whose cancellation was asked for becomes cancelled."""
    session.execute(
        update(Job)
        .where(col(Job.id) == job_id, col(Job.status) == "running")
        .where(col(Job.cancel_requested).is_(True))
        .values(status="cancelled", finished_at=when)
    )


def queued_job_ids(session: Session) -> list[int]:
    rows = session.exec(select(Job.id).where(col(Job.status) == "queued")).all()
    return [int(j) for j in rows if j is not None]


def running_unsplit_jobs(session: Session) -> list[tuple[int, str | None]]:
    """(job, worker) of the running jobs that have no parts."""
    split = select(JobPart.job_id).distinct()
    rows = session.execute(
        select(Job.id, Job.worker).where(col(Job.status) == "running", col(Job.id).not_in(split))
    ).all()
    return [(int(j), worker) for j, worker in rows]


# -- parts of a split job -----------------------------------------------------------------------


def job_parts(session: Session, job_id: int) -> list[JobPart]:
    """The job's parts in order (none for a job that is not split)."""
    rows = session.exec(
        select(JobPart).where(col(JobPart.job_id) == job_id).order_by(col(JobPart.number))
    ).all()
    return list(rows)


def job_part(session: Session, job_id: int, number: int) -> JobPart | None:
    return session.exec(
        select(JobPart).where(col(JobPart.job_id) == job_id, col(JobPart.number) == number)
    ).first()


def set_part_values(session: Session, job_id: int, number: int, **values: Any) -> None:
    """Write ``values`` into one part's row."""
    session.execute(
        update(JobPart)
        .where(col(JobPart.job_id) == job_id, col(JobPart.number) == number)
        .values(**values)
    )


def requeue_parts(session: Session, job_id: int, numbers: Iterable[int], when: datetime) -> None:
    """The job's parts ``numbers`` that are not done: queued again, no worker, sent ``when``."""
    session.execute(
        update(JobPart)
        .where(col(JobPart.job_id) == job_id, col(JobPart.number).in_(list(numbers)))
        .where(col(JobPart.status) != "done")
        .values(status="queued", worker=None, sent_at=when)
    )


class JobState(NamedTuple):
    cancel_requested: bool
    status: str


def write_part_progress(
    conn: Connection, job_id: int, number: int, done: int, total: int
) -> JobState | None:
    """Store one part's done/total and the job's (the sums over its parts, taken inside the
    job's UPDATE); the job's state, read back by RETURNING (None: no such job). Two statements
    on a plain connection: an ORM session doing the same cost 4 ms of CPU a time, paid twice a
    second by every part running."""
    parts, jobs = JobPart.__table__, Job.__table__  # type: ignore[attr-defined]

    def summed(column: Any) -> Any:
        return (
            sa.select(func.coalesce(func.sum(column), 0))
            .where(parts.c.job_id == job_id)
            .scalar_subquery()
        )

    conn.execute(
        update(parts)
        .where(parts.c.job_id == job_id, parts.c.number == number)
        .values(done=done, total=total)
    )
    row = conn.execute(
        update(jobs)
        .where(jobs.c.id == job_id)
        .values(done=summed(parts.c.done), total=summed(parts.c.total))
        .returning(jobs.c.cancel_requested, jobs.c.status)
    ).first()
    return None if row is None else JobState(bool(row.cancel_requested), row.status)


def parts_not_done(session: Session, job_id: int) -> int:
    return int(
        session.exec(
            select(func.count())
            .select_from(JobPart)
            .where(col(JobPart.job_id) == job_id, col(JobPart.status) != "done")
        ).one()
    )


def part_sums(session: Session, job_id: int) -> tuple[int, int]:
    """The job's done and total, summed over its parts."""
    done, total = session.execute(
        select(
            func.coalesce(func.sum(JobPart.done), 0), func.coalesce(func.sum(JobPart.total), 0)
        ).where(col(JobPart.job_id) == job_id)
    ).one()
    return done, total


def running_parts(session: Session) -> list[tuple[int, int, str | None, datetime | None]]:
    """(job, part, worker, started) of the running parts of running jobs."""
    rows = session.execute(
        select(JobPart.job_id, JobPart.number, JobPart.worker, JobPart.started_at)
        .join(Job, col(Job.id) == col(JobPart.job_id))
        .where(col(Job.status) == "running", col(JobPart.status) == "running")
    ).all()
    return [(j, n, w, s) for j, n, w, s in rows]


def queued_parts_of_running_jobs(session: Session) -> list[tuple[int, int]]:
    rows = session.execute(
        select(JobPart.job_id, JobPart.number)
        .join(Job, col(Job.id) == col(JobPart.job_id))
        .where(col(Job.status) == "running", col(JobPart.status) == "queued")
    ).all()
    return [(int(j), int(n)) for j, n in rows]


# -- the domain's rows a split job reads --------------------------------------------------------


def answered_item_ids(session: Session, generation_run_id: int) -> list[int]:
    """The items the generation run holds answers for, in id order."""
    rows = session.exec(
        select(Response.item_id).where(col(Response.run_id) == generation_run_id).distinct()
    ).all()
    return sorted(int(r) for r in rows)


def lease_of(session: Session, kind: str, run_id: int | None) -> RunLease | None:
    """The lease of kind ``kind`` held on ``run_id`` (None: nobody holds it)."""
    return session.exec(
        select(RunLease).where(col(RunLease.kind) == kind, RunLease.run_id == run_id)
    ).first()


# -- workers' heartbeats ------------------------------------------------------------------------


def worker_beat_row(session: Session, worker: str) -> WorkerBeat | None:
    return session.exec(select(WorkerBeat).where(col(WorkerBeat.worker) == worker)).first()


def worker_beats(session: Session, *, running_only: bool = False) -> Sequence[WorkerBeat]:
    """Every worker's heartbeat row (``running_only``: those that did not stop)."""
    query = select(WorkerBeat)
    if running_only:
        query = query.where(col(WorkerBeat.stopped_at).is_(None))
    return session.exec(query).all()


def beat_times(session: Session) -> list[tuple[str, datetime, datetime | None]]:
    """(worker, last beat, stopped) of every worker, without loading the rows."""
    rows = session.execute(select(WorkerBeat.worker, WorkerBeat.beat_at, WorkerBeat.stopped_at))
    return [(w, b, s) for w, b, s in rows]
