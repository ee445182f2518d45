"""``/api/v1/jobs``: background work (generation, judging, campaign pulls) and its progress."""

from __future__ import annotations

from typing import Any

from flask import current_app, g

from server.api import blueprint, dump, page
from server.db import get_session
from server.jobs import queue
from server.schemas import DryRunOut, JobCreate, JobOut, JobPath, JobQuery, Page

bp = blueprint("jobs", __name__, "jobs")


def _engine():  # type: ignore[no-untyped-def]
    return current_app.extensions["fairjudge_engine"]


def queue_job(kind: str, params: dict[str, Any], *, confirm: bool) -> Any:
    """Queue a job for the request's key. A member's job over ``[server] confirm_calls`` or
    ``confirm_cost`` needs ``confirm``; the 403 says the dry run's figure and the field."""
    from server.usecases.gates import ConfirmationNeeded

    admin = g.key.role == "admin"
    try:
        return queue.submit(
            _engine(),
            kind,
            params,
            created_by=g.key.name,
            settings=current_app.config["SETTINGS"],
            gated=not (admin or confirm),
        )
    except ConfirmationNeeded as exc:
        raise ConfirmationNeeded(exc.kind, exc.size, exc.over).add_note_to_message(
            'for a member key: send the request again with "confirm": true to queue it '
            "anyway (POST /api/v1/jobs/dry-run gives the whole estimate), or use an admin key"
        ) from None


@bp.post("/jobs", responses={201: JobOut})
def create_job(body: JobCreate) -> Any:
    """Queue a job; the worker starts it within a second or so when a slot is free.

    A member key's job that can call a model (every kind but pull) over the server's
    ``confirm_calls`` or ``confirm_cost`` is refused (403, with its dry run's figure) unless
    ``confirm`` is true; an admin key's is queued."""
    job = queue_job(body.kind, body.params, confirm=body.confirm)
    return dump(JobOut, job), 201


@bp.post("/jobs/dry-run", responses={200: DryRunOut})
def dry_run(body: JobCreate) -> Any:
    """What a job would send and cost, live and at the batch price; nothing sent or queued.

    For a judge, generate, audit, audit-classify, counterfactual, item-plan, item-generate or
    judge-pairs job (a pull calls no model): the CLI's `--dry-run` of `judge`, `generate`,
    `audit SUITE run`, `checks counterfactual`, `dataset plan` and `judge-pairs`, and the same
    estimate for a classification of an award run's follow-ups and for one cell's items."""
    from server.usecases.gates import dry_run as estimate

    return estimate(_engine(), current_app.config["SETTINGS"], body.kind, body.params)


@bp.get("/jobs", responses={200: Page[JobOut]})
def list_jobs(query: JobQuery) -> Any:
    """Jobs, newest first, optionally by status and kind."""
    rows, total = queue.list_jobs(
        get_session(), status=query.status, kind=query.kind, limit=query.limit, offset=query.offset
    )
    return page(JobOut, rows, total, query.limit, query.offset)


@bp.get("/jobs/<int:job_id>", responses={200: JobOut})
def get_job(path: JobPath) -> Any:
    """One job: status, progress (done of total), its run's counts, tokens and their cost so
    far (live and at the batch price), the result or the last error, and its parts when
    Celery workers split it."""
    from server.usecases.parts import part_rows
    from server.usecases.runs import job_counts

    session = get_session()
    job = queue.get_job(session, path.job_id)
    settings = current_app.config["SETTINGS"]
    parts = [
        {**p.model_dump(exclude={"item_ids"}), "items": len(p.item_ids)}
        for p in part_rows(_engine(), path.job_id)
    ]
    return {
        **dump(JobOut, job),
        "parts": parts,
        "counts": job_counts(session, job.result, settings),
    }


@bp.post("/jobs/<int:job_id>/cancel", responses={200: JobOut})
def cancel_job(path: JobPath) -> Any:
    """Cancel a job: at once if queued, at its next progress step if running."""
    return dump(JobOut, queue.cancel_job(_engine(), path.job_id))


@bp.post("/jobs/<int:job_id>/resume", responses={200: JobOut})
def resume_job(path: JobPath) -> Any:
    """Queue a failed or cancelled job again; it continues from what is stored."""
    settings = current_app.config["SETTINGS"]
    return dump(JobOut, queue.resume_job(_engine(), path.job_id, settings=settings))
