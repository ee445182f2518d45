"""What each kind of job does: its request (``server.usecases.requests``: what the job
stores as its parameters, also the API's request schema) and the use case it runs. The one
registry of job kinds: the local worker runs these functions, and a Celery binding would
run the same ones.

A job function resumes by construction: the use cases it calls (``usecases.generate``,
``usecases.judge``, a campaign pull, ``audits.run_audit``, ``followups.classify_followups``)
store each result as it arrives and, run again, do only what is missing, so rerunning a job
whose worker died costs nothing already stored. (So an audit job has no ``new``: run again
after a crash, it would start yet another run instead of resuming its own.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from judge.progress import Progress
from server import usecases
from server.usecases import batch, followups, trust
from server.usecases.audit_requests import SUITE_OPTIONS, AuditClassifyRequest, AuditRequest
from server.usecases.campaigns import pull_campaign
from server.usecases.requests import (
    JOB_REQUESTS,
    CounterfactualRequest,
    GenerateRequest,
    ItemCellRequest,
    ItemPlanRequest,
    JudgePairsRequest,
    JudgeRequest,
    PullRequest,
    Request,
    SweepRequest,
    apply_overrides,
)
from server.usecases.servers import ensure_embedded

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings

__all__ = [
    "SUITE_OPTIONS",
    "TASKS",
    "AuditParams",
    "BatchWaiting",
    "JobKind",
    "Task",
    "run_task",
]

Note = Callable[[dict[str, Any]], None]
"""Records part of a running job's result (its run's id) before the job ends."""


class BatchWaiting(Exception):  # noqa: N818 (a signal, not an error)
    """A job whose calls went through the Batch API and whose batches still run at the
    provider: it goes back to the queue with ``result`` (its run and its batches' state)
    and no worker takes it again before ``after_s`` seconds (``server.jobs.running``)."""

    def __init__(self, result: dict[str, Any], after_s: float) -> None:
        super().__init__(f"waiting {after_s:g} s for batches still running")
        self.result, self.after_s = result, after_s


def _through_batches(
    engine: Engine,
    settings: Settings,
    r: JudgeRequest | GenerateRequest | AuditRequest,
    progress: Progress,
    note: Note,
) -> dict[str, Any]:
    """A judge, generate or audit job whose ``transport`` is batch: one look at its batches
    (submitted the first time), never waiting in the worker's slot: while some still run at
    the provider it raises ``BatchWaiting`` to be taken up again after ``poll_s``; once all
    are collected, its result. Run again after any kill, it takes up the same batches
    (``judge.models.batching`` records each step before it is taken)."""

    assert r.transport is not None
    transport = r.transport.model_copy(update={"wait": False})  # a job never waits in its slot
    request = type(r).build(**{**dict(r), "transport": transport})
    result: Any
    if isinstance(request, JudgeRequest):
        key = "judge_run_id"
        result = batch.judge_batch(
            engine, settings, request, progress=progress,
            on_run=lambda run_id: note({key: run_id}),
        )  # fmt: skip
    elif isinstance(request, GenerateRequest):
        key = "generation_run_id"
        result = batch.generate_batch(
            engine, settings, request, progress=progress,
            on_run=lambda run_id: note({key: run_id}),
        )  # fmt: skip
    else:
        key = "audit_run_id"
        result = batch.audit_batch(
            engine, settings, request, progress=progress,
            on_run=lambda run_id: note({key: run_id}),
        )  # fmt: skip
    done = {key: result.run_id, "batch": result.to_json()}
    if result.pending:
        raise BatchWaiting(done, r.transport.poll_s)
    return done


def _is_batch(r: JudgeRequest | GenerateRequest | AuditRequest) -> bool:
    return r.transport is not None and r.transport.batch


# The requests under the names the job API's schemas know them by.
JudgeParams = JudgeRequest
GenerateParams = GenerateRequest
PullParams = PullRequest
AuditParams = AuditRequest
AuditClassifyParams = AuditClassifyRequest

JobKind = Literal[
    "judge",
    "generate",
    "pull",
    "audit",
    "audit-classify",
    "item-plan",
    "item-generate",
    "counterfactual",
    "sweep",
    "judge-pairs",
]


@dataclass(frozen=True)
class Task:
    params: type[Request]
    run: Callable[[Engine, Settings, Any, Progress, Note], dict[str, Any]]


def _judge(
    engine: Engine, settings: Settings, r: JudgeRequest, progress: Progress, note: Note
) -> dict[str, Any]:

    if _is_batch(r):
        return _through_batches(engine, settings, r, progress, note)
    _ensure_embedded(apply_overrides(settings, r).judge.endpoint, settings)
    summary = usecases.judge(
        engine, settings, r, progress=progress, on_run=lambda run_id: note({"judge_run_id": run_id})
    )
    return {"judge_run_id": summary.run_id, "summary": asdict(summary)}


def _generate(
    engine: Engine, settings: Settings, r: GenerateRequest, progress: Progress, note: Note
) -> dict[str, Any]:

    if _is_batch(r):
        return _through_batches(engine, settings, r, progress, note)
    _ensure_embedded(apply_overrides(settings, r).generation.endpoint, settings)
    summary = usecases.generate(
        engine,
        settings,
        r,
        progress=progress,
        on_run=lambda run_id: note({"generation_run_id": run_id}),
    )
    return {
        "generation_run_id": summary.run_id,
        "summary": asdict(summary),
        # its status line counts the items left out
        "status_detail": usecases.run_status(engine, "generation", summary.run_id)[1],
    }


def _pull(
    engine: Engine, settings: Settings, p: PullRequest, progress: Progress, note: Note
) -> dict[str, Any]:

    return pull_campaign(engine, settings, p.campaign).to_dict()


def _audit(
    engine: Engine, settings: Settings, p: AuditRequest, progress: Progress, note: Note
) -> dict[str, Any]:
    from server.usecases import audits

    if _is_batch(p):
        return _through_batches(engine, settings, p, progress, note)
    _ensure_embedded(p.endpoint or settings.generation.endpoint, settings)
    summary = audits.audit(
        engine, settings, p, progress=progress, on_run=lambda run_id: note({"audit_run_id": run_id})
    )
    return {"audit_run_id": summary.run_id, "summary": summary.to_dict()}


def _audit_classify(
    engine: Engine, settings: Settings, p: AuditClassifyRequest, progress: Progress, note: Note
) -> dict[str, Any]:

    _ensure_embedded(p.endpoint or settings.judge.endpoint, settings)
    note({"audit_run_id": p.run_id})
    summary = followups.classify_followups(
        engine, settings, p.run_id, endpoint=p.endpoint, progress=progress
    )
    return {"audit_run_id": p.run_id, "summary": asdict(summary)}


def _items(
    engine: Engine,
    settings: Settings,
    r: ItemPlanRequest | ItemCellRequest,
    progress: Progress,
    note: Note,
) -> dict[str, Any]:
    """Test items an endpoint writes: a plan over cells, or one cell's ``count`` more."""

    _ensure_embedded(r.endpoint, settings)
    note({"dataset": r.into})
    if isinstance(r, ItemPlanRequest):
        summary = usecases.plan_items(engine, settings, r, progress=progress)
    else:
        summary = usecases.generate_items(engine, settings, r, progress=progress)
    return {"dataset": r.into, "summary": asdict(summary)}


def _counterfactual(
    engine: Engine, settings: Settings, r: CounterfactualRequest, progress: Progress, note: Note
) -> dict[str, Any]:

    done = trust.counterfactual_audit(engine, settings, r, progress=progress)
    status, detail = trust.judge_run_status(engine, done.judge_run_id)
    return {
        # the copy's judge run: the job's counts are its judgments
        "judge_run_id": done.judge_run_id,
        "checked_judge_run_id": r.judge_run_id,
        "copy": asdict(done.copy),
        "summary": asdict(done.summary),
        # finished, or incomplete with why (a judgment that failed: resume the job to retry)
        "copy_status": status,
        "status_detail": detail,
    }


def _sweep(
    engine: Engine, settings: Settings, r: SweepRequest, progress: Progress, note: Note
) -> dict[str, Any]:
    from server.usecases.sweeps import run_sweep

    _ensure_embedded(apply_overrides(settings, r).judge.endpoint, settings)
    configs = len(r.temperatures) * len(r.prompt_variants)
    started: list[int] = []  # one entry per configuration begun; run_sweep goes in order

    def progress_for(_: object) -> Progress:
        # The job's progress over the whole sweep: the configurations' tasks, one after another.
        before = len(started)
        started.append(before)

        def report(done: int, total: int) -> None:
            progress(before * total + done, configs * total)

        return report

    # the request's overrides are applied by each configuration's judge request
    result = run_sweep(engine, settings, r, progress_for=progress_for)
    return {"judge_run_ids": result.judge_run_ids, "sweep": result.to_dict()}


def _judge_pairs(
    engine: Engine, settings: Settings, r: JudgePairsRequest, progress: Progress, note: Note
) -> dict[str, Any]:
    """The CLI's ``judge-pairs``: the same use case, every pair of runs one pairwise judge
    run; the verdicts are read at ``/pairwise?judge=LABEL`` and ``GET
    /api/v1/pairwise/position?judge=LABEL``."""
    from server.usecases.pairwise import judge_pairs

    _ensure_embedded(apply_overrides(settings, r).judge.endpoint, settings)
    result = judge_pairs(engine, settings, r, progress=progress)
    made = {
        "pairwise_judge": result["judge"],
        "pairwise_run_ids": [p["run_id"] for p in result["passes"]],
    }
    failed = sum(len(p["calls_failed"]) for p in result["passes"])
    if result["passes"][-1]["budget_stopped"] or failed:
        from judge.errors import IncompleteError

        note(made)  # the job's page links to what it stored before it stopped
        why = (
            f"max_cost {r.max_cost} reached"
            if result["passes"][-1]["budget_stopped"]
            else f"{failed} call(s) failed for good and were not stored"
        )
        raise IncompleteError(f"{why}: what finished is stored; resume the job to go on")
    return {**made, "summary": result}


TASKS: dict[str, Task] = {
    "judge": Task(JudgeRequest, _judge),
    "generate": Task(GenerateRequest, _generate),
    "pull": Task(PullRequest, _pull),
    "audit": Task(AuditRequest, _audit),
    "audit-classify": Task(AuditClassifyRequest, _audit_classify),
    "item-plan": Task(ItemPlanRequest, _items),
    "item-generate": Task(ItemCellRequest, _items),
    "counterfactual": Task(CounterfactualRequest, _counterfactual),
    "sweep": Task(SweepRequest, _sweep),
    "judge-pairs": Task(JudgePairsRequest, _judge_pairs),
}
assert {kind: task.params for kind, task in TASKS.items()} == JOB_REQUESTS


def run_task(
    kind: str,
    engine: Engine,
    settings: Settings,
    params: dict[str, Any],
    progress: Progress,
    note: Note,
) -> dict[str, Any]:
    from server.usecases.jobs import job_request

    return TASKS[kind].run(engine, settings, job_request(kind, params), progress, note)


def _ensure_embedded(endpoint: str, settings: Settings) -> None:
    """Start the embedded model's server when the job's endpoint is it and it is not up (the
    default endpoint needs no separate `fairjudge model serve` for jobs)."""

    ensure_embedded(settings, endpoint)
