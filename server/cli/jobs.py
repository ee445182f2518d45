"""``fairjudge jobs``: background jobs (the server's worker, or Celery workers): list them,
show one with its parts, queue one, cancel or resume one."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, err, json_option, out, table

if TYPE_CHECKING:
    from server.cli import Context


@click.group(invoke_without_command=True)
@click.option("--status", help="Only jobs in this state (queued, running, finished, ...).")
@click.option("--kind", help="Only jobs of this kind (judge, generate, audit, ...).")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@json_option
@click.pass_context
def jobs(
    click_ctx: click.Context, status: str | None, kind: str | None, limit: int, as_json: bool
) -> None:
    """Jobs, newest first: state, worker (and whether it still beats), progress, parts done
    (a job split between Celery workers), attempts and the last error. A job whose worker
    stopped beating is sent again by the other workers; `jobs resume ID` requeues a failed
    or cancelled one."""
    if click_ctx.invoked_subcommand is not None:
        return
    ctx: Context = click_ctx.obj
    from sqlmodel import Session

    from server.usecases.job_view import job_overview

    settings = ctx.settings()
    with Session(ctx.engine()) as session:
        rows = job_overview(
            session,
            silent_after_s=settings.server.job_lease_s,
            status=status,
            kind=kind,
            limit=limit,
        )
    emit(rows, as_json, lambda r: table("Jobs", [_line(j) for j in r]))


def _line(job: dict[str, Any]) -> dict[str, Any]:
    progress = f"{job['done']}/{job['total']}" if job["total"] is not None else str(job["done"])
    worker = job["worker"] or ""
    if job["worker_state"] == "silent":
        worker += " (silent)"
    parts = f"{job['parts_done']}/{job['parts']}" if job["parts"] else ""
    error = (job["error"] or "")[:60]
    return {
        "id": job["id"],
        "kind": job["kind"],
        "status": job["status"],
        "worker": worker,
        "progress": progress,
        "parts": parts,
        "attempts": job["attempts"],
        "last error": error,
    }


@jobs.command("show")
@click.argument("job_id", type=int)
@json_option
@click.pass_obj
def jobs_show(ctx: Context, job_id: int, as_json: bool) -> None:
    """One job: its parameters, state, result, and its parts when Celery workers split it."""
    from sqlmodel import Session

    from server.usecases.job_view import job_detail

    silent_after_s = ctx.settings().server.job_lease_s
    with Session(ctx.engine()) as session:
        data = job_detail(session, job_id, silent_after_s=silent_after_s)

    def render(d: dict[str, Any]) -> None:
        head = {k: v for k, v in d.items() if k not in ("params", "result", "parts", "work")}
        table(f"Job {job_id}", [head])
        if work_line := _work_line(d["work"]):
            out().print(work_line, highlight=False)
        out().print(f"params: {json.dumps(d['params'], sort_keys=True)}", highlight=False)
        if d["result"]:
            out().print(f"result: {json.dumps(d['result'], sort_keys=True)}", highlight=False)
        if d["parts"]:
            table("Parts", d["parts"])

    emit(data, as_json, render)


def _work_line(work: dict[str, Any]) -> str:
    """Who works on the job and where its parts stand, e.g. 'parts: 3 done, 2 running, 3
    left; workers: a:12, b:40 (silent)'."""
    said = []
    if work["parts"]:
        said.append(
            f"parts: {work['parts_done']} done, {work['parts_running']} running, "
            f"{work['parts_left']} left"
        )
    if work["workers"]:
        said.append("workers: " + ", ".join(work["workers"]))
    return "; ".join(said)


@jobs.command("submit")
@click.argument("kind")
@click.argument("params", default="{}")
@json_option
@click.pass_obj
def jobs_submit(ctx: Context, kind: str, params: str, as_json: bool) -> None:
    """Queue a job of KIND with PARAMS, a JSON object of the same fields as the API's
    `POST /api/v1/jobs` (e.g. `fairjudge jobs submit judge '{"generation_run_id": 1}'`);
    print its id. Checked now: a bad field is refused with nothing queued."""
    from server.jobs import queue

    try:
        fields = json.loads(params)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON ({exc.msg}); give an object such as '{{}}'") from None
    if not isinstance(fields, dict):
        raise click.BadParameter("give a JSON object of the job's fields, such as '{}'")
    job = queue.submit(ctx.engine(), kind, fields, created_by="cli", settings=ctx.settings())

    def render(_: Any) -> None:
        err().print(f"job {job.id} queued ({kind}); follow it with `fairjudge jobs show {job.id}`")
        out().print(str(job.id), highlight=False)

    emit({"id": job.id, "kind": kind, "status": job.status}, as_json, render)


@jobs.command("cancel")
@click.argument("job_id", type=int)
@json_option
@click.pass_obj
def jobs_cancel(ctx: Context, job_id: int, as_json: bool) -> None:
    """Cancel a job: a queued one at once, a running one at its next progress report."""
    from server.jobs import queue

    job = queue.cancel_job(ctx.engine(), job_id)
    said = "cancel requested" if job.status == "running" else job.status
    data = {"id": job_id, "status": job.status, "cancel_requested": job.cancel_requested}
    emit(data, as_json, lambda _: err().print(f"job {job_id}: {said}"))


@jobs.command("resume")
@click.argument("job_id", type=int)
@json_option
@click.pass_obj
def jobs_resume(ctx: Context, job_id: int, as_json: bool) -> None:
    """Queue a failed or cancelled job again; it goes on from what the store holds."""
    from server.jobs import queue

    job = queue.resume_job(ctx.engine(), job_id, settings=ctx.settings())
    emit({"id": job_id, "status": job.status}, as_json,
         lambda _: err().print(f"job {job_id}: {job.status}"))  # fmt: skip
