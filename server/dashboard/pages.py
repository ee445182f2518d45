"""What the overview and a job's page show, gathered in one call per page (no Flask here:
the views parse the request, call one of these and render its result). The other pages have
a module each (``run_page``, ``agreement_page``, ``checks_page``, ``datasets_page``,
``campaign_page``, ``audit_page``, ``job_form``).

The numbers come from the same use cases the JSON API serialises (``list_runs``, the job
queue, ``judgment_counts``), so a page and the API cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from judge.errors import NotFoundError
from server import usecases
from server.jobs import queue
from server.usecases.requests import MAX_ID

if TYPE_CHECKING:
    from server.usecases.jobs import Job
    from server.usecases.runs import RunListing

JOBS_SHOWN = 50
"""Jobs a list shows, newest first (the JSON API pages through the rest)."""
FINAL = ("finished", "failed", "cancelled")
"""Job statuses that no longer change: a page showing one stops polling."""
RESULT_LINKS = {
    "judge_run_id": "judge run",
    "checked_judge_run_id": "judge run",
    "audit_run_id": "audit run",
    "generation_run_id": "generation run",
    "dataset": "dataset",
}
"""Result fields of a job that name something the dashboard has a page for."""


def row_id(kind: str, value: int) -> int:
    """``value`` when it can be a row's id; else NotFoundError (a 404 page), where the
    database would fail to bind a number past 64 bits (a 500)."""
    if not 1 <= value <= MAX_ID:
        raise NotFoundError(f"no {kind} {value} (ids run from 1 to {MAX_ID})")
    return value


@dataclass(frozen=True)
class Overview:
    """Generation runs, judge runs and the newest jobs."""

    runs: RunListing
    jobs: list[Job]  # the newest JOBS_SHOWN
    jobs_total: int  # jobs in the store


def overview(session: Session) -> Overview:
    jobs, total = queue.list_jobs(session, limit=JOBS_SHOWN)
    return Overview(usecases.list_runs(session), jobs, total)


@dataclass(frozen=True)
class JobList:
    jobs: list[Job]
    total: int
    kind: str | None
    status: str | None


def job_list(session: Session, *, kind: str | None, status: str | None) -> JobList:
    jobs, total = queue.list_jobs(
        session, kind=kind or None, status=status or None, limit=JOBS_SHOWN
    )
    return JobList(jobs, total, kind, status)


@dataclass(frozen=True)
class JobPage:
    """One job, what its result names, and for a job that made judgments their counts."""

    job: Job
    final: bool
    judge_run_id: int | None
    judgments: dict[str, int]  # status (scored, unscored) -> count in the judge run
    results: list[tuple[str, str, Any]]  # (field, what it names, value) of the result


def job_page(session: Session, job_id: int) -> JobPage:
    from server.usecases.runs import judgment_counts

    job = queue.get_job(session, row_id("job", job_id))
    result = job.result or {}
    run_id = result.get("judge_run_id")
    judge_run = run_id if isinstance(run_id, int) else None
    judgments = judgment_counts(session, judge_run) if judge_run else {}
    named = [(k, RESULT_LINKS[k], result[k]) for k in RESULT_LINKS if result.get(k) is not None]
    return JobPage(job, job.status in FINAL, judge_run, judgments, named)
