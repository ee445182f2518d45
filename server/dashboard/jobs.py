"""Start a judge job from a form, and watch a job until it ends."""

from __future__ import annotations

from flask import current_app, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from judge.errors import FairJudgeError
from server.auth import require_role
from server.dashboard import bp, pages
from server.dashboard.access import check_csrf, current_key, login_required
from server.db import get_session
from server.errors import status_for
from server.jobs import queue


@bp.get("/jobs/new")
@login_required
def new_job() -> ResponseReturnValue:
    form = pages.job_form(get_session(), current_app.config["SETTINGS"], request.args)
    return render_template("dashboard/new_job.html", form=form)


@bp.post("/jobs/new")
@login_required
def start_job() -> ResponseReturnValue:
    check_csrf()
    key = current_key()
    require_role(key, "member")  # members and admins start jobs
    try:
        judge = pages.judge_request(request.form)
        engine = current_app.extensions["fairjudge_engine"]
        settings = current_app.config["SETTINGS"]
        job = queue.submit(engine, "judge", judge, created_by=key.name, settings=settings)
    except FairJudgeError as exc:  # the form comes back with what was sent and why not
        form = pages.job_form(get_session(), current_app.config["SETTINGS"], request.form)
        page = render_template("dashboard/new_job.html", form=form, error=str(exc))
        return page, status_for(exc)
    return redirect(url_for("dashboard.job", job_id=job.id))


@bp.get("/jobs/<int:job_id>")
@login_required
def job(job_id: int) -> ResponseReturnValue:
    page = pages.job_page(get_session(), job_id)
    return render_template("dashboard/job.html", page=page)


@bp.get("/live/jobs/<int:job_id>")
@login_required
def job_live(job_id: int) -> ResponseReturnValue:
    """The job's status block alone, fetched every second until the job ends."""
    page = pages.job_page(get_session(), job_id)
    return render_template("dashboard/_job_status.html", page=page)
