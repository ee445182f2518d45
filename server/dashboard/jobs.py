"""Jobs of every kind: the list (kept live), a form that starts any kind, one job's page
(kept live until it ends), cancel and resume."""

from __future__ import annotations

import functools
from typing import Any

from flask import redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from judge.errors import FairJudgeError
from server.auth import require_role
from server.dashboard import bp, job_form, pages
from server.dashboard.access import check_csrf, current_key, login_required
from server.dashboard.web import engine, settings
from server.db import get_session
from server.errors import status_for
from server.jobs import queue
from server.usecases.job_view import JobWork, job_detail, job_work
from server.usecases.transport import transport_choices


def choices() -> dict[str, job_form.Choices]:
    """What the form's selects offer, by request field, read from the store when drawn."""
    from server import usecases
    from server.usecases import audits, campaigns
    from server.usecases.datasets import list_datasets

    session = get_session()
    runs = functools.cache(lambda: usecases.list_runs(session))
    return {
        "generation_run_id": lambda: [
            (str(r.id), f"{r.id}: {r.dataset}, {r.model} ({r.answers} answers, {r.status})")
            for r in runs().generation_runs
        ],
        "judge_run_id": lambda: [
            (
                str(r.id),
                f"{r.id}: {r.model} judging generation run {r.generation_run} "
                f"({r.scored} scored, {r.status})",
            )
            for r in runs().judge_runs
        ],
        "endpoint": lambda: [(name, name) for name in sorted(settings().endpoints)],
        "dataset": lambda: [
            (d.name, f"{d.name} ({d.items} items)") for d in list_datasets(engine())
        ],
        "campaign": lambda: [
            (c["name"], f"{c['name']} ({c['kind']})") for c in campaigns.list_campaigns(session)
        ],
        "run_id": lambda: [
            (str(r["id"]), f"{r['id']}: award on {r['model']} ({r['status']})")
            for r in audits.list_runs(session, "award")
        ],
        "transport": lambda: transport_choices(settings()),
    }


def _work(ids: list[int]) -> dict[int, JobWork]:
    """The listed jobs' workers and parts (the read model ``fairjudge jobs`` shows)."""
    silent = settings().server.job_lease_s
    return job_work(get_session(), ids, silent_after_s=silent)


def _detail(job_id: int) -> dict[str, Any]:
    silent = settings().server.job_lease_s
    return job_detail(get_session(), job_id, silent_after_s=silent)


@bp.get("/jobs")
@login_required
def jobs() -> ResponseReturnValue:
    page = pages.job_list(
        get_session(), kind=request.args.get("kind"), status=request.args.get("status")
    )
    return render_template(
        "dashboard/jobs.html", page=page, kinds=list(job_form.JOB_REQUESTS),
        work=_work([j.id for j in page.jobs if j.id]),
    )  # fmt: skip


@bp.get("/live/jobs")
@login_required
def jobs_live() -> ResponseReturnValue:
    """The job list alone, fetched every 2 s and swapped in."""
    page = pages.job_list(
        get_session(), kind=request.args.get("kind"), status=request.args.get("status")
    )
    return render_template(
        "dashboard/_jobs_table.html", page=page, work=_work([j.id for j in page.jobs if j.id])
    )


def _form(
    kind: str,
    sent: object,
    error: str | None = None,
    status: int = 200,
    *,
    figure: job_form.Figure | None = None,
) -> ResponseReturnValue:
    form = job_form.job_form(kind, settings(), sent, choices())  # type: ignore[arg-type]
    page = render_template("dashboard/new_job.html", form=form, error=error, figure=figure)
    return page, status


@bp.get("/jobs/new")
@login_required
def new_job() -> ResponseReturnValue:
    return _form(request.args.get("kind", "judge"), request.args)


@bp.post("/jobs/new")
@login_required
def start_job() -> ResponseReturnValue:
    check_csrf()
    key = current_key()
    require_role(key, "member")  # members and admins start jobs
    kind = request.form.get("kind", "judge")
    try:
        made = job_form.parse(kind, request.form, choices())
        gate = job_form.gate(kind, made, request.form)
        job = queue.submit(engine(), kind, made, created_by=key.name, settings=settings(), **gate)
    except job_form.ConfirmationNeeded as exc:  # the figure, and a button that accepts it
        return _form(kind, request.form, figure=job_form.Figure.asking_for(exc))
    except FairJudgeError as exc:  # the form comes back with what was sent and why not
        return _form(kind, request.form, str(exc), status_for(exc))
    return redirect(url_for("dashboard.job", job_id=job.id))


@bp.post("/jobs/new/dry-run")
@login_required
def job_dry_run() -> ResponseReturnValue:
    """The form again with what its job would send and cost; nothing queued."""
    check_csrf()
    require_role(current_key(), "member")
    kind = request.form.get("kind", "judge")
    try:
        made = job_form.parse(kind, request.form, choices())
        ask = job_form.gate(kind, made, request.form)["ask"]
        figure = job_form.dry_run_figure(engine(), settings(), kind, made, ask=ask)
    except FairJudgeError as exc:
        return _form(kind, request.form, str(exc), status_for(exc))
    return _form(kind, request.form, figure=figure)


@bp.get("/jobs/<int:job_id>")
@login_required
def job(job_id: int) -> ResponseReturnValue:
    page = pages.job_page(get_session(), job_id)
    return render_template("dashboard/job.html", page=page, detail=_detail(job_id))


@bp.get("/live/jobs/<int:job_id>")
@login_required
def job_live(job_id: int) -> ResponseReturnValue:
    """The job's status block alone, fetched every second until the job ends."""
    page = pages.job_page(get_session(), job_id)
    return render_template("dashboard/_job_status.html", page=page, detail=_detail(job_id))


@bp.post("/jobs/<int:job_id>/<any(cancel, resume):action>")
@login_required
def job_action(job_id: int, action: str) -> ResponseReturnValue:
    check_csrf()
    require_role(current_key(), "member")
    job_id = pages.row_id("job", job_id)
    if action == "cancel":
        queue.cancel_job(engine(), job_id)
    else:
        queue.resume_job(engine(), job_id, settings=settings())
    return redirect(url_for("dashboard.job", job_id=job_id))
