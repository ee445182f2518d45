"""What a job's readers see: the CLI's ``fairjudge jobs`` and ``jobs show``, the dashboard's
job list and job page. One read model, so that the two cannot disagree: state, progress of
the job's run (done of total), the worker(s) on it and whether they still beat, its parts
(done, running, left) when Celery workers split it, attempts and the last error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sqlmodel import col, select

from server.tables import Job, JobPart
from server.usecases.jobs import get_job, list_jobs, live_workers

if TYPE_CHECKING:
    from sqlmodel import Session

__all__ = ["JobWork", "job_detail", "job_overview", "job_work"]


@dataclass(frozen=True)
class JobWork:
    """Who works on a job and, for a split job, where its parts stand."""

    workers: list[str] = field(default_factory=list)
    """host:pid of each worker on the job now (its parts' workers, for a split job), with
    ' (silent)' after one whose heartbeat stopped."""
    parts: int = 0
    """Parts of a split job (0: not split)."""
    parts_done: int = 0
    parts_running: int = 0
    parts_left: int = 0
    """Parts neither done nor running (queued, or failed and to be sent again)."""
    part_error: str | None = None
    """The last error a part stored (the job's own ``error`` names the part that failed)."""


def job_work(session: Session, job_ids: list[int], *, silent_after_s: float) -> dict[int, JobWork]:
    """Each job's workers and parts, read in two queries for any number of jobs."""

    if not job_ids:
        return {}
    live = live_workers(session, silent_after_s=silent_after_s)

    def shown(worker: str) -> str:
        return worker if worker in live else f"{worker} (silent)"

    found: dict[int, dict[str, Any]] = {}
    for job_id, status, worker in session.execute(
        select(Job.id, Job.status, Job.worker).where(col(Job.id).in_(job_ids))
    ):
        on = [shown(worker)] if status == "running" and worker else []
        found[int(job_id)] = {"workers": on, "errors": []}
    counts: dict[int, dict[str, int]] = {}
    part_workers: dict[int, list[str]] = {}
    for job_id, status, worker, error in session.execute(
        select(JobPart.job_id, JobPart.status, JobPart.worker, JobPart.error)
        .where(col(JobPart.job_id).in_(job_ids))
        .order_by(col(JobPart.job_id), col(JobPart.number))
    ):
        tally = counts.setdefault(int(job_id), {"done": 0, "running": 0, "left": 0})
        tally[status if status in ("done", "running") else "left"] += 1
        if status == "running" and worker and shown(worker) not in part_workers.get(job_id, []):
            part_workers.setdefault(int(job_id), []).append(shown(worker))
        if error:
            found[int(job_id)]["errors"].append(error)
    out = {}
    for job_id, seen in found.items():
        if job_id not in counts:
            out[job_id] = JobWork(workers=seen["workers"])
            continue
        tally = counts[job_id]
        out[job_id] = JobWork(
            workers=sorted(part_workers.get(job_id, [])),
            parts=sum(tally.values()),
            parts_done=tally["done"],
            parts_running=tally["running"],
            parts_left=tally["left"],
            part_error=seen["errors"][-1] if seen["errors"] else None,
        )
    return out


def job_overview(
    session: Session,
    *,
    silent_after_s: float,
    status: str | None = None,
    kind: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Jobs newest first, as ``fairjudge jobs`` shows them: state, worker (and whether it
    still beats), progress, parts done of all (jobs split between Celery workers), attempts
    and the last error."""
    rows, _ = list_jobs(session, status=status, kind=kind, limit=limit)
    work = job_work(session, [j.id for j in rows if j.id], silent_after_s=silent_after_s)
    live = live_workers(session, silent_after_s=silent_after_s)
    out = []
    for job in rows:
        worker_state = None
        if job.status == "running" and job.worker:
            worker_state = "beating" if job.worker in live else "silent"
        w = work.get(job.id or 0, JobWork())
        out.append(
            {
                "id": job.id,
                "kind": job.kind,
                "status": job.status,
                "worker": job.worker,
                "worker_state": worker_state,
                "workers": w.workers,
                "done": job.done,
                "total": job.total,
                "parts_done": w.parts_done if w.parts else None,
                "parts_running": w.parts_running if w.parts else None,
                "parts_left": w.parts_left if w.parts else None,
                "parts": w.parts or None,
                "attempts": job.attempts,
                "error": job.error,
                "created_at": job.created_at.isoformat(),
            }
        )
    return out


def job_detail(session: Session, job_id: int, *, silent_after_s: float) -> dict[str, Any]:
    """One job as ``fairjudge jobs show`` and the dashboard's job page show it: its row, who
    works on it (``JobWork``) and each part."""

    job = get_job(session, job_id)
    work = job_work(session, [job_id], silent_after_s=silent_after_s)[job_id]
    parts = session.exec(
        select(JobPart).where(col(JobPart.job_id) == job_id).order_by(col(JobPart.number))
    ).all()
    return {
        "id": job.id,
        "kind": job.kind,
        "status": job.status,
        "params": job.params,
        "worker": job.worker,
        "done": job.done,
        "total": job.total,
        "attempts": job.attempts,
        "error": job.error,
        "result": job.result,
        "work": asdict(work),
        "parts": [
            {
                "number": p.number,
                "items": len(p.item_ids),
                "status": p.status,
                "worker": p.worker,
                "done": p.done,
                "total": p.total,
                "attempts": p.attempts,
                "error": p.error,
            }
            for p in parts
        ],
    }
