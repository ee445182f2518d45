"""Jobs in the store: queue one (its request checked now, not when it runs), read, list,
cancel and resume them, and the steps a worker takes on a job's row (server/jobs/queue.py
holds the worker itself; server/jobs/tasks.py says what each kind of job runs).

A job's parameters are its request (``server.usecases.requests.JOB_REQUESTS``) as JSON.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlmodel import Session

from judge.costs import Prices, missing_prices_message
from judge.errors import InvalidInputError, NotFoundError
from judge.runs import (
    RunBusyError,  # what a job on a run another process holds raises
    run_lease,
)
from judge.store.engine import session_scope
from judge.store.queries import get_dataset, get_generation_run
from judge.store.tables import AuditRun, GenerationRun, JudgeRun, utcnow
from judge.vocab import RunStatus
from server import queries
from server.tables import Job, WorkerBeat
from server.usecases.audit_requests import suite_inputs
from server.usecases.requests import (
    JOB_REQUESTS,
    ItemCellRequest,
    ItemPlanRequest,
    Request,
    apply_overrides,
    problems_of,
)
from server.usecases.rubrics import rubrics

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings

__all__ = [
    "DONE",
    "STATUSES",
    "JobStateError",
    "RunBusyError",
    "cancel_job",
    "check_params",
    "check_targets",
    "get_job",
    "job_lease",
    "job_request",
    "list_jobs",
    "report_progress",
    "resume_job",
    "runnable",
    "set_job",
    "start_job",
    "store_job",
]

SPLIT_KINDS = {"judge": "judge_run_id", "generate": "generation_run_id"}
"""The job kinds Celery workers split into parts (``server.usecases.parts``), and the key of
their run's id in the job's result."""
STATUSES = ("queued", "running", "finished", "failed", "cancelled")
DONE = ("finished", "failed", "cancelled")


class JobStateError(InvalidInputError):
    """The job is in a state that does not allow this (HTTP 409)."""


def job_request(kind: str, params: Mapping[str, Any]) -> Request:
    """The request a job of ``kind`` runs, from its stored (or submitted) parameters."""

    request_type = JOB_REQUESTS.get(kind)
    if request_type is None:
        raise InvalidInputError(f"unknown job kind {kind!r}: use one of {', '.join(JOB_REQUESTS)}")
    try:
        request = request_type.model_validate(dict(params))
    except ValidationError as exc:
        raise _bad(kind, problems_of(exc)) from None
    if problems := request.job_problems():
        raise _bad(kind, problems)
    return request


def _bad(kind: str, problems: list[str]) -> InvalidInputError:
    article = "an" if kind[0] in "aeiou" else "a"
    return InvalidInputError(f"bad parameters for {article} {kind} job: " + "; ".join(problems))


def check_params(kind: str, params: Mapping[str, Any] | Request) -> dict[str, Any]:
    """``params`` validated for ``kind`` as the job would store them (unset fields left
    out), or InvalidInputError listing every problem."""
    if isinstance(params, Request):
        params = params.model_dump(exclude_none=True)
    return job_request(kind, params).to_params()


def check_targets(
    session: Session, kind: str, params: dict[str, Any], settings: Settings | None = None
) -> None:
    """NotFoundError now, rather than a failed job later, when what the job would work on
    does not exist (a generation run, a dataset, a campaign, an audit run); with
    ``settings``, a ConfigError for an endpoint the config does not name. An audit's design
    is built now too, so options the suite refuses are an InvalidInputError, not a failed
    job; an audit-classify job needs an award run."""

    if settings is not None and params.get("endpoint"):
        settings.endpoint(params["endpoint"])
    if settings is not None and params.get("max_cost") is not None:
        _check_max_cost(kind, params, settings)
    if kind in ("judge", "sweep"):
        get_generation_run(session, params["generation_run_id"])
        if settings is not None and params.get("rubric_set") is not None:
            _check_rubric_set(session, settings, params["rubric_set"])
    elif kind == "generate":
        get_dataset(session, params["dataset"])
    elif kind == "pull":
        from annotation.labelstudio.campaigns import get_campaign

        get_campaign(session, params["campaign"])
    elif kind == "audit":
        from judge.audits.suites import make_suite

        files = suite_inputs(settings, params["suite"])  # BBQ: [audits] bbq_data, or a 400
        make_suite(params["suite"], **params.get("options", {}), **files)
    elif kind in ("item-plan", "item-generate"):
        from server.usecases.datasets import check_item_request

        request = job_request(kind, params)
        if isinstance(request, ItemCellRequest | ItemPlanRequest):
            check_item_request(request)
    elif kind == "counterfactual":
        from judge.store.queries import get_judge_run

        get_judge_run(session, params["judge_run_id"])
    elif kind == "judge-pairs":
        _check_pairs(session, params, settings)
    elif kind == "audit-classify":
        from judge.audits.runner import get_run

        run = get_run(session, params["run_id"])
        if run.suite != "award":
            raise InvalidInputError(
                f"audit run {run.id} is a {run.suite} audit; only award audits have follow-up "
                "explanations to classify"
            )


def _check_max_cost(kind: str, params: dict[str, Any], settings: Settings) -> None:
    """InvalidInputError naming ``max_cost`` now when the worker could only refuse it: the
    job would be split between Celery workers (a budget is kept in one process), or the
    endpoint that would be called has no prices (nothing to count the cost with)."""

    if settings.workers.broker_url and kind in SPLIT_KINDS:
        raise InvalidInputError(
            f"max_cost: a {kind} job is split between Celery workers here ([workers] "
            "broker_url is set) and a cost bound is kept in one process; leave max_cost out, "
            "or run the job on one machine"
        )
    if kind not in ("judge", "generate", "audit", "judge-pairs"):
        return  # a counterfactual job's endpoint is its judge run's, checked when it opens
    chosen = apply_overrides(settings, job_request(kind, params))
    if kind in ("judge", "judge-pairs"):
        name = params.get("endpoint") or chosen.judge.endpoint
    else:
        name = params.get("endpoint") or chosen.generation.endpoint
    if Prices.of(chosen.endpoint(name)) is None:
        raise InvalidInputError(
            f"max_cost: endpoint {name!r} has no prices to count the cost with; "
            + missing_prices_message(name)
        )


def _check_pairs(session: Session, params: dict[str, Any], settings: Settings | None) -> None:
    """A judge-pairs job's runs and criterion, checked now: each a line naming ``runs`` or
    ``criterion`` (InvalidInputError: the parameters are wrong, not a path)."""
    from judge import paths
    from judge.grading.pairs import pair_criterion
    from judge.prompts import PromptBook

    problems = []
    for run in params["runs"]:
        try:
            get_generation_run(session, run)
        except NotFoundError as exc:
            problems.append(f"runs: {exc}")
    book = PromptBook(settings.prompts_path() if settings else paths.prompts_dir())
    try:
        pair_criterion(book, params.get("criterion", "overall"))
    except InvalidInputError as exc:
        problems.append(f"criterion: {exc}")
    if problems:
        raise _bad("judge-pairs", problems)


def _check_rubric_set(session: Session, settings: Settings, rubric_set: str) -> None:
    """InvalidInputError naming ``rubric_set`` when it names a rubric that is neither built
    in nor registered (the worker would fail on it later)."""

    try:
        rubrics(settings, session, rubric_set=rubric_set)
    except NotFoundError as exc:
        raise InvalidInputError(f"rubric_set: {exc}") from None


def store_job(
    engine: Engine,
    kind: str,
    checked: dict[str, Any],
    *,
    created_by: str | None = None,
    settings: Settings | None = None,
) -> Job:
    """Store a queued job of ``kind`` whose parameters ``check_params`` (and, for a gated
    job, ``server.usecases.gates.check_size``) passed; with ``settings``, the endpoint they
    name and the rubrics are checked too. Only ``server.jobs.queue.submit`` calls this: it
    checks first, then hands the stored job to the workers."""

    with Session(engine) as session:
        check_targets(session, kind, checked, settings)
        job = Job(kind=kind, params=checked, created_by=created_by)
        session.add(job)
        session.commit()
        session.refresh(job)
        return job


def get_job(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise NotFoundError(f"no job {job_id}")
    return job


def list_jobs(
    session: Session,
    *,
    status: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[Job], int]:
    """Newest first: one page of jobs and how many match in all."""
    return queries.page_jobs(session, status=status, kind=kind, limit=limit, offset=offset)


def cancel_job(engine: Engine, job_id: int) -> Job:
    """A queued job is cancelled at once; a running one stops at its next progress report
    (within about half a second of a result arriving), keeping what it stored."""

    with Session(engine) as session:
        job = get_job(session, job_id)
        if job.status in DONE:
            raise JobStateError(f"job {job_id} is {job.status}; there is nothing to cancel")
        if job.status == "queued":
            job.status, job.finished_at = "cancelled", utcnow()
        else:
            job.cancel_requested = True
        session.add(job)
        session.commit()
        session.refresh(job)
        return job


def resume_job(engine: Engine, job_id: int) -> Job:
    """Put a failed or cancelled job back in the queue; it continues from what is stored."""

    with Session(engine) as session:
        job = get_job(session, job_id)
        if job.status == "finished":
            raise JobStateError(f"job {job_id} is finished; start a new job to run it again")
        if job.status in ("failed", "cancelled"):
            job.status, job.error, job.cancel_requested, job.finished_at = (
                "queued",
                None,
                False,
                None,
            )
            session.add(job)
            session.commit()
            session.refresh(job)
        return job


# -- what a worker does to a job's row --------------------------------------------------------


def set_job(engine: Engine, job_id: int, *, now: tuple[str, ...] = (), **values: Any) -> None:
    """Write ``values`` into the job's row; each field named in ``now`` gets the time."""

    for name in now:
        values[name] = utcnow()
    with Session(engine) as session:
        queries.set_job_values(session, job_id, **values)
        session.commit()


def report_progress(engine: Engine, job_id: int, done: int, total: int) -> bool:
    """Write a running job's progress; whether someone asked to cancel it."""

    with Session(engine) as session:
        queries.set_job_values(session, job_id, done=done, total=total)
        session.commit()
        return queries.cancel_requested(session, job_id)


_RESULT_RUNS = {
    "judge_run_id": "judge",
    "judge_run_ids": "judge",
    "generation_run_id": "generation",
    "audit_run_id": "audit",
}
"""Fields of a job's result that name the runs it made, and their kind."""


def ending(engine: Engine, result: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """How a job whose work returned ``result`` ends: ``finished``, or ``failed`` with the
    line of a run it made that ended ``unusable`` (mostly unscored or failed: ``[runs]
    max_unusable_share``), so that a job of 1,500 unscored judgments is not a green
    "finished"."""

    tables: dict[str, type[JudgeRun] | type[GenerationRun] | type[AuditRun]] = {
        "judge": JudgeRun,
        "generation": GenerationRun,
        "audit": AuditRun,
    }
    with session_scope(engine) as session:
        for key, kind in _RESULT_RUNS.items():
            value = (result or {}).get(key)
            ids = value if isinstance(value, list) else [value]
            for run_id in ids:
                if not isinstance(run_id, int):
                    continue
                run = session.get(tables[kind], run_id)
                if run is not None and run.status == RunStatus.UNUSABLE:
                    return "failed", f"{kind} run {run_id} is unusable: {run.status_detail}"
    return "finished", None


def start_job(engine: Engine, job_id: int, worker: str) -> tuple[str, dict[str, Any], int] | str:
    """Mark a job running under ``worker``: its kind, parameters and the attempts it had
    before this one, or the status it keeps when it is done already or was cancelled
    before it started. The attempt itself is counted by the caller once the job's work has
    really begun (``count_attempt``): a job that only finds its run busy and goes back to
    wait has not been attempted."""

    with Session(engine) as session:
        job = get_job(session, job_id)
        if job.status in DONE:
            return job.status
        if job.cancel_requested:
            job.status, job.finished_at = "cancelled", utcnow()
            session.add(job)
            session.commit()
            return "cancelled"
        resumed = job.status == "running" and job.attempts > 0
        kind, params, attempts, before = job.kind, dict(job.params), job.attempts, job.worker
        note = job.error if (job.error or "").startswith("waiting:") else None
    if resumed:
        import logging

        # The job says so too: its progress goes on from what the store holds.
        note = f"resumed: its worker {before or '(unknown)'} stopped; attempt {attempts + 1}"
        logging.getLogger("fairjudge.jobs").info("job %s: %s", job_id, note)
    set_job(engine, job_id, now=("started_at",), status="running", worker=worker, error=note)
    return kind, params, attempts


def count_attempt(engine: Engine, job_id: int, attempts: int) -> None:
    """Record that attempt ``attempts`` of the job has begun its work (a waiting note, which
    no longer holds, is cleared; a resumed note stays)."""

    with Session(engine) as session:
        queries.set_job_values(session, job_id, attempts=attempts)
        queries.clear_waiting_note(session, job_id)
        session.commit()


def runnable(session: Session) -> list[int]:
    """Jobs a worker may try, oldest first: queued ones, and running ones (their worker may
    have died; the lease decides)."""
    return queries.runnable_job_ids(session, limit=100)


@contextmanager
def job_lease(engine: Engine, job_id: int, *, seconds: float) -> Iterator[None]:
    """Hold the job's lease (kind ``job`` in the run lease table) for the block; RunBusyError
    when a live worker holds it."""

    with run_lease(engine, "job", job_id, seconds=seconds):
        yield


BEAT_EVERY_S = 2.0
"""How often a running job worker renews its heartbeat row."""


def worker_beat(engine: Engine, worker: str, *, stopping: bool = False) -> None:
    """Record that job worker ``worker`` (host:pid) is alive now, or that it is stopping
    cleanly (``stopping``: health no longer counts it as missing)."""

    now = utcnow()
    with Session(engine) as session:
        row = queries.worker_beat_row(session, worker)
        if row is None:
            row = WorkerBeat(worker=worker, started_at=now, beat_at=now)
        row.beat_at = now
        row.stopped_at = now if stopping else None
        session.add(row)
        session.commit()


@dataclass(frozen=True)
class WorkerHealth:
    """What the store says of the job workers: those beating now, the newest heartbeat,
    those that went quiet without stopping, whether jobs wait for a worker, and how long
    the oldest job that never started has waited (``degraded`` past the bound)."""

    healthy: bool
    live: int
    silent: int
    last_beat_at: str | None
    last_beat_age_s: float | None
    waiting_jobs: int
    reason: str
    queued_jobs: int = 0
    running_jobs: int = 0
    oldest_wait_s: float | None = None
    degraded: bool = False


def worker_health(
    engine: Engine, *, stale_after_s: float, wait_alert_s: float = 60.0
) -> WorkerHealth:
    """Healthy unless no worker has beaten within ``stale_after_s`` while one went quiet
    without stopping (it died) or jobs are queued or running (nothing will run them).
    Degraded (still healthy: the server answers) when a queued job that never started has
    waited more than ``wait_alert_s``: the queue is not moving."""

    now = utcnow()
    with Session(engine) as session:
        rows = queries.worker_beats(session, running_only=True)
        counts = queries.waiting_job_counts(session)
        # A resumed job has waited since its resumption, which no column records: only jobs
        # that never started are timed.
        oldest = queries.oldest_unstarted(session)
    queued, running = int(counts.get("queued", 0)), int(counts.get("running", 0))
    waiting = queued + running
    wait = None
    if oldest is not None:
        since = oldest if oldest.tzinfo else oldest.replace(tzinfo=now.tzinfo)
        wait = round(max(0.0, (now - since).total_seconds()), 1)
    ages = []
    for row in rows:
        beat = row.beat_at if row.beat_at.tzinfo else row.beat_at.replace(tzinfo=now.tzinfo)
        ages.append((now - beat).total_seconds())
    live = sum(1 for age in ages if age <= stale_after_s)
    silent = len(ages) - live
    newest = min(ages) if ages else None
    last = None if newest is None else (now - timedelta(seconds=newest)).isoformat()
    if live:
        healthy, reason = True, f"{live} job worker(s) beating"
    elif silent:
        healthy, reason = (
            False,
            (
                f"no job worker has beaten for {newest:.0f} s (more than {stale_after_s:g} s); "
                "restart `fairjudge serve` or start `fairjudge worker`"
            ),
        )
    elif waiting:
        healthy, reason = (
            False,
            (
                f"{waiting} job(s) wait and no job worker runs; start `fairjudge worker` (or "
                "`fairjudge serve` without --no-worker)"
            ),
        )
    else:
        healthy, reason = True, "no job worker runs, and no job waits for one"
    degraded = healthy and wait is not None and wait > wait_alert_s
    if degraded:
        reason += (
            f"; but the oldest queued job has waited {wait:g} s without starting (more than "
            f"{wait_alert_s:g} s), with {running} job(s) running: the queue is not moving"
        )
    return WorkerHealth(
        healthy, live, silent, last, newest, waiting, reason, queued, running, wait, degraded
    )


def live_workers(session: Session, *, silent_after_s: float) -> set[str]:
    """host:pid of the job workers that beat within ``silent_after_s`` and did not stop."""

    cutoff = utcnow() - timedelta(seconds=silent_after_s)
    live = set()
    for row in queries.worker_beats(session):
        beat = row.beat_at if row.beat_at.tzinfo else row.beat_at.replace(tzinfo=cutoff.tzinfo)
        if row.stopped_at is None and beat >= cutoff:
            live.add(row.worker)
    return live
