"""Jobs split into parts for Celery workers (``[workers] broker_url``, docs/scaling.md).

A judge or generation job is too big for one worker: its run's items are cut into parts of
``[workers] chunk_size`` items, each a ``jobpart`` row and a Celery task. A part runs the
same use case as a whole run (``usecases.judge`` / ``usecases.generate``) on its items only,
under a lease of its own, so parts of one run go on side by side on several machines. Every
part resumes from the store: run twice (a task delivered again after its worker died), it
asks only for what is missing, and the call cache answers any call whose reply was stored.
Whoever sees the last part end stores how the run ended and finishes the job.

Nothing here knows Celery: ``server.jobs.celery_app`` sends the tasks and calls these.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import TYPE_CHECKING, Any

from judge.errors import FairJudgeError, InvalidInputError
from judge.runs import RunBusyError, RunPart
from judge.store.engine import session_scope
from judge.store.queries import dataset_items
from judge.store.tables import GenerationRun, JudgeRun, utcnow
from server import queries, usecases
from server.tables import Job, JobPart
from server.usecases.jobs import SPLIT_KINDS, ending, job_request, live_workers
from server.usecases.requests import GenerateRequest, JudgeRequest, Request
from server.usecases.rubrics import rubrics

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings

__all__ = [
    "SPLIT_KINDS",
    "PartCancelled",
    "finish_if_done",
    "open_parts",
    "part_rows",
    "run_part",
    "stale_jobs",
    "stale_parts",
    "work_per_item",
]

log = logging.getLogger("fairjudge.jobs")

PROGRESS_EVERY_S = 0.5
_OPENING = RunPart(-1, frozenset())
"""The part with no items: running it makes (or finds) the run and checks the request, with
no call sent."""


class PartCancelled(Exception):
    """The part's job was cancelled or failed elsewhere: the part stops where it is."""


@dataclass(frozen=True)
class Opened:
    """A split job's run and its parts (those not done yet are to be sent)."""

    run_id: int
    parts: list[int]
    """Numbers of the parts still to run."""
    total: int


def _run(
    engine: Engine,
    settings: Settings,
    kind: str,
    request: Request,
    part: RunPart,
    progress: Callable[[int, int], None] | None = None,
    on_run: Callable[[int], None] | None = None,
) -> Any:

    threads = settings.workers.task_concurrency
    if kind == "judge":
        assert isinstance(request, JudgeRequest)
        return usecases.judge(
            engine, settings, request, part=part, progress=progress, on_run=on_run,
            threads=threads,
        )  # fmt: skip
    assert isinstance(request, GenerateRequest)
    return usecases.generate(
        engine, settings, request, part=part, progress=progress, on_run=on_run, threads=threads
    )


def _items_of(engine: Engine, kind: str, request: Request, run_id: int) -> list[int]:
    """The items a split run covers, in id order: the generation run's answered items (a
    judge run), or the dataset's items (a generation run; those its options leave out make
    empty work for their part)."""

    with session_scope(engine) as session:
        if kind == "judge":
            jrun = session.get(JudgeRun, run_id)
            assert jrun is not None
            return queries.answered_item_ids(session, jrun.generation_run_id)
        assert isinstance(request, GenerateRequest)
        return sorted(int(i.id) for i in dataset_items(session, request.dataset) if i.id)


def work_per_item(
    engine: Engine, settings: Settings, kind: str, request: Request, run_id: int
) -> dict[int, int]:
    """The results each item of the split run holds when it is done, counted by the same
    planning a part's pass uses (its total is the part's items' sum): judgments (rubrics of
    the item's stage x samples, twice for a pair judged in both orders) or answers (one per
    part of the item's stage, none for an item the options leave out)."""

    if kind == "judge":
        from judge.grading.judging import judgments_per_item

        with session_scope(engine) as session:
            chosen = rubrics(settings, session, judge_run_id=run_id)
        return judgments_per_item(engine, run_id, chosen)
    from judge.answers.collect import answers_per_item

    assert isinstance(request, GenerateRequest)
    return answers_per_item(
        engine, request.dataset, limit=request.limit, accepted_only=request.accepted_only,
        include_drafts=request.include_drafts,
    )  # fmt: skip


def open_parts(
    engine: Engine,
    settings: Settings,
    job_id: int,
    kind: str,
    request: Request,
    known_run: int | None,
) -> Opened:
    """Make (or find) the job's run and its parts: the part rows are written once, the first
    time; a job opened again (its task delivered twice, or resumed) keeps them. ``known_run``:
    the run the job already made (so a generation job with ``new`` makes only one)."""

    if kind not in SPLIT_KINDS:
        raise InvalidInputError(f"a {kind} job is not split into parts")
    if getattr(request, "max_cost", None) is not None:
        raise InvalidInputError(
            "--max-cost keeps its budget in one process, and Celery workers split this job "
            "between several: run it without max_cost, or on one machine (no [workers] "
            "broker_url)"
        )
    if known_run is not None and isinstance(request, GenerateRequest):
        request = request.model_copy(update={"new": False})
    ids: list[int] = []
    _run(engine, settings, kind, request, _OPENING, on_run=ids.append)
    run_id = ids[0]
    with session_scope(engine) as session:
        rows = queries.job_parts(session, job_id)
        if not rows:
            items = _items_of(engine, kind, request, run_id)
            work = work_per_item(engine, settings, kind, request, run_id)
            size = settings.workers.chunk_size
            rows = [
                JobPart(
                    job_id=job_id,
                    number=n,
                    item_ids=chunk,
                    done=0,
                    total=sum(work.get(i, 0) for i in chunk),
                )  # fmt: skip
                for n, chunk in enumerate(items[s : s + size] for s in range(0, len(items), size))
            ]
            session.add_all(rows)
            # The job's total is the run's whole work from the first moment, not the sum
            # over the parts that started so far.
            queries.set_job_values(session, job_id, done=0, total=sum(r.total or 0 for r in rows))
        # Parts a live worker is on are left to it (the watch sends a stranded one again).
        todo = [r.number for r in rows if r.status not in ("done", "running")]
        return Opened(run_id, todo, len(rows))


def mark_sent(engine: Engine, job_id: int, numbers: Iterable[int]) -> None:
    """The parts were handed to the broker now (queued again, if they were running)."""

    wanted = list(numbers)
    if not wanted:
        return
    with session_scope(engine) as session:
        queries.requeue_parts(session, job_id, wanted, utcnow())


def part_rows(engine: Engine, job_id: int) -> list[JobPart]:
    """The job's parts, in order (none for a job that is not split)."""

    with session_scope(engine) as session:
        rows = queries.job_parts(session, job_id)
        for row in rows:
            session.expunge(row)
        return list(rows)


class _PartProgress:
    """A part's progress callback: writes the part's done/total and the job's sums now and
    then; raises PartCancelled once the job was cancelled or ended elsewhere."""

    def __init__(self, engine: Engine, job_id: int, number: int) -> None:
        self.engine, self.job_id, self.number, self.last = engine, job_id, number, 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S and done < total:
            return
        self.last = now
        if write_progress(self.engine, self.job_id, self.number, done, total):
            raise PartCancelled


def write_progress(engine: Engine, job_id: int, number: int, done: int, total: int) -> bool:
    """Store one part's progress and the job's (the sum over its parts); whether the part
    should stop (the job was cancelled, or failed in another part). On a plain connection, not
    an ORM session: it runs twice a second in every part (``queries.write_part_progress``)."""
    with engine.begin() as conn:
        state = queries.write_part_progress(conn, job_id, number, done, total)
    return state is None or state.cancel_requested or state.status != "running"


def _set_part(engine: Engine, job_id: int, number: int, **values: Any) -> None:
    with session_scope(engine) as session:
        queries.set_part_values(session, job_id, number, **values)


def run_part(engine: Engine, settings: Settings, job_id: int, number: int, worker: str) -> str:
    """Run one part of a split job (the job's run must exist: ``open_parts``); its status
    after: ``done``, ``skipped`` (the part was done already, or its job ended), ``busy``
    (another live worker holds it) or ``failed`` (the job says why)."""

    with session_scope(engine) as session:
        job = session.get(Job, job_id)
        if job is None or job.status != "running" or job.cancel_requested:
            return "skipped"
        kind, params, result = job.kind, dict(job.params), dict(job.result or {})
        part = queries.job_part(session, job_id, number)
        if part is None or part.status == "done":
            return "skipped"
        items, attempts = frozenset(part.item_ids), part.attempts
    request = job_request(kind, params)
    if isinstance(request, GenerateRequest) and result.get(SPLIT_KINDS[kind]) is not None:
        request = request.model_copy(update={"new": False})  # the run the job made
    _set_part(
        engine, job_id, number, status="running", worker=worker, started_at=utcnow(),
        attempts=attempts + 1, error=None,
    )  # fmt: skip
    try:
        _run(
            engine, settings, kind, request, RunPart(number, items),
            progress=_PartProgress(engine, job_id, number),
        )  # fmt: skip
    except RunBusyError:  # the same part delivered twice: the live holder goes on
        holder = _holder(engine, kind, result.get(SPLIT_KINDS[kind]), number)
        _set_part(engine, job_id, number, status="running", worker=holder)
        return "busy"
    except PartCancelled:
        _set_part(engine, job_id, number, status="queued", worker=None)
        _settle_cancelled(engine, job_id)
        return "skipped"
    except FairJudgeError as exc:
        _fail(engine, job_id, number, str(exc))
        return "failed"
    except Exception as exc:  # a bug: the job says what happened, the worker goes on
        log.exception("job %s, part %s failed", job_id, number)
        _fail(engine, job_id, number, f"unexpected {type(exc).__name__}: {exc}")
        return "failed"
    _set_part(engine, job_id, number, status="done", worker=None, finished_at=utcnow())
    finish_if_done(engine, settings, job_id)
    return "done"


def _holder(engine: Engine, kind: str, run_id: int | None, number: int) -> str | None:
    """host:pid of the live process holding the lease of the run's part."""

    table = JudgeRun if kind == "judge" else GenerationRun
    lease_kind = RunPart(number, frozenset()).lease_kind(table.run_kind)
    with session_scope(engine) as session:
        row = queries.lease_of(session, lease_kind, run_id)
        return None if row is None else f"{row.host}:{row.pid}"


def _fail(engine: Engine, job_id: int, number: int, message: str) -> None:
    """The part failed: so does its job (its other parts stop at their next progress); a
    resumed job sends again the parts that are not done."""

    _set_part(engine, job_id, number, status="failed", worker=None, error=message)
    with session_scope(engine) as session:
        queries.end_running_job(
            session, job_id, status="failed", error=f"part {number}: {message}",
            finished_at=utcnow(),
        )  # fmt: skip


def _settle_cancelled(engine: Engine, job_id: int) -> None:
    with session_scope(engine) as session:
        queries.cancel_if_requested(session, job_id, utcnow())


def finish_if_done(engine: Engine, settings: Settings, job_id: int) -> bool:
    """Once every part of the job is done: store how its run ended and finish the job
    (whoever gets here first; a second caller changes nothing). Whether it finished now."""

    with session_scope(engine) as session:
        job = session.get(Job, job_id)
        if job is None or job.status != "running":
            return False
        left = queries.parts_not_done(session, job_id)
        kind, result = job.kind, dict(job.result or {})
        params = dict(job.params)
    if left:
        return False
    key = SPLIT_KINDS[kind]
    run_id = int(result[key])
    status, detail = _finish_run(engine, settings, kind, params, run_id)
    result.update({"status": str(status), "status_detail": detail})

    ended, why = ending(engine, result)  # "failed" for a run mostly unscored
    with session_scope(engine) as session:
        # The job's done/total summed once more over its parts: two parts writing their
        # progress at the same moment may each have summed before the other's commit.
        done, total = queries.part_sums(session, job_id)
        finished = queries.end_running_job(
            session, job_id, status=ended, result=result, finished_at=utcnow(), done=done,
            total=total, **({} if why is None else {"error": why}),
        )  # fmt: skip
    if finished and settings.server.warm_figures:
        from server.usecases.warming import runs_of_result, warm_after_job

        warm_after_job(engine, settings, runs_of_result(result))
    return finished


def _finish_run(
    engine: Engine, settings: Settings, kind: str, params: dict[str, Any], run_id: int
) -> Any:
    """Store how a split run ended, read from what its parts stored."""

    request = job_request(kind, params)
    limit = settings.runs.max_unusable_share
    if isinstance(request, JudgeRequest):
        from judge.grading.judging import finish_judge_run

        return finish_judge_run(engine, run_id, max_unusable=limit)
    from judge.answers.collect import finish_generation_run

    assert isinstance(request, GenerateRequest)
    return finish_generation_run(
        engine, run_id, request.dataset, max_unusable=limit,
        accepted_only=request.accepted_only, include_drafts=request.include_drafts,
    )  # fmt: skip


def stale_parts(engine: Engine, *, silent_after_s: float) -> list[tuple[int, int]]:
    """(job, part) of running parts whose worker stopped beating more than
    ``silent_after_s`` ago (or stopped): their worker died; they are to be sent again."""

    cutoff = utcnow() - timedelta(seconds=silent_after_s)
    with session_scope(engine) as session:
        live = {
            w
            for w, beat, stopped in queries.beat_times(session)
            if stopped is None and _aware(beat) >= cutoff
        }
        rows = queries.running_parts(session)
    return [
        (job_id, number)
        for job_id, number, worker, started in rows
        if worker not in live and (started is None or _aware(started) < cutoff)
    ]


def stale_jobs(engine: Engine, *, silent_after_s: float) -> list[int]:
    """Running jobs that are not split whose worker stopped beating more than
    ``silent_after_s`` ago: their worker died; they are to be sent again (they resume)."""

    with session_scope(engine) as session:
        live = live_workers(session, silent_after_s=silent_after_s)
        rows = queries.running_unsplit_jobs(session)
    return [j for j, worker in rows if worker and worker not in live]


def unsent(engine: Engine) -> tuple[list[int], list[tuple[int, int]]]:
    """Everything a broker that lost its messages (Redis restarted with nothing on disk)
    must be handed again: queued jobs, and the queued parts of running jobs."""

    with session_scope(engine) as session:
        jobs = queries.queued_job_ids(session)
        parts = queries.queued_parts_of_running_jobs(session)
    return jobs, parts


def _aware(moment: Any) -> Any:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
