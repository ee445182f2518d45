"""Audit runs through a provider's Batch API (``fairjudge audit SUITE run --batch``).

The run is the one a live ``audit SUITE run`` with the same settings makes or resumes (same
identity, lease, design and table); only how its calls reach the model differs. The
design's first-turn prompts go out as batches (``judge.models.batching``), each line named by
the call's cache key; once a batch ends, its answers are in the call cache and the live pass
stores each with the live path's own row (``runner.answer_row``): the suite reads it the same
way, with the same statuses and cache keys.

A second turn (the award audit's "why?") needs the first answer in its conversation, so it
cannot go in the same batch: once the first answers are stored, the follow-ups they call for
go out in a second batch (``purpose`` "followup"), at the batch price too. Without waiting,
the follow-ups of first answers still in a running batch go out with the command that
collects them.

A call no batch answered is stored as a failed call (status ``error``) with the batch's
reason, and its output line when that could not be read, so the run ends ``incomplete`` and
the same command sends exactly those calls again (with ``BatchOptions.retry_live``: at once,
live).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.audits.base import ERROR, AuditTask, Suite
from judge.audits.runner import answer_row, final_status, open_audit_run
from judge.audits.stored import followup_tasks, main_tasks
from judge.models.batch import BatchApi
from judge.models.batch_options import BatchOptions
from judge.models.batch_pass import (
    BatchPass,
    BatchRunResult,
    Unanswered,
    batch_pass,
    waiting_outcome,
)
from judge.models.batching import BatchOwner, batch_call
from judge.models.cache import CallOutcome, cached_complete
from judge.models.client import ModelClient
from judge.prices import Prices
from judge.progress import Progress
from judge.runs import NOT_MADE, UNUSABLE_SHARE, Row, run_lease, store_results
from judge.store.lifecycle import Outcome, finish_run
from judge.store.tables import AuditAnswer, AuditRun

KIND = AuditRun.run_kind
FOLLOWUP_PURPOSE = "followup"
"""The ``batchjob.purpose`` of the second turn's batches."""


def run_audit_batch(
    engine: Engine,
    client: ModelClient,
    api: BatchApi,
    suite: Suite,
    *,
    temperature: float,
    max_tokens: int,
    limit: int | None = None,
    new: bool = False,
    options: BatchOptions = BatchOptions(),
    prices: Prices | None = None,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_unusable: float = UNUSABLE_SHARE,
) -> BatchRunResult:
    """Create (or resume) the audit run for these settings, as ``runner.run_audit`` does,
    and ask the design's prompts not yet answered through the Batch API, then the second
    turn's in a batch of their own, used as ``options`` say. ``progress`` hears each batch
    pass's (finished, total) calls while it runs. Without ``options.wait``, batches still
    running are left for the next command (their answers are not stored yet and the run
    ends ``incomplete`` saying so)."""
    run_id = open_audit_run(
        engine, suite, client, temperature=temperature, max_tokens=max_tokens, new=new,
        on_run=on_run,
    )  # fmt: skip

    def turn(tasks: list[AuditTask], purpose: str) -> tuple[Counter[str], int, BatchPass]:
        """One turn's calls through batches, then its rows stored: (rows by status,
        prompts left waiting, the pass)."""
        calls = [
            batch_call(
                client,
                task.messages,
                sample_index=task.sample_index,
                temperature=temperature,
                max_tokens=max_tokens,
            )  # fmt: skip
            for task in tasks
        ]
        sent = batch_pass(
            engine, client, api, BatchOwner(KIND, run_id, purpose), calls,
            options=options, progress=progress, sleep=sleep,
        )  # fmt: skip
        ready = [t for t, c in zip(tasks, calls, strict=True) if not sent.waiting(c.key)]

        def work(task: AuditTask) -> tuple[Row | None, list[CallOutcome]]:
            outcome = cached_complete(
                sent.client, sent.cache, task.messages, sample_index=task.sample_index,
                temperature=temperature, max_tokens=max_tokens,
            )  # fmt: skip
            sent.tally.add([outcome])
            row = answer_row(run_id, task, outcome, suite)
            return sent.keep_raw_line(row, outcome), [outcome]

        summary = store_results(
            engine,
            AuditAnswer.__table__,  # type: ignore[attr-defined]
            run_id,
            ready,
            work,
            concurrency=client.config.concurrency,
            label="status",
        )
        return Counter(summary.flags), len(tasks) - len(ready), sent

    with run_lease(engine, KIND, run_id):
        first = main_tasks(
            engine, run_id, suite, client, temperature=temperature, max_tokens=max_tokens,
            limit=limit,
        )  # fmt: skip
        flags, waiting, sent = turn(first, "first")
        tasks = len(first)
        second = followup_tasks(engine, run_id, suite)
        if second:
            more_flags, more_waiting, more = turn(second, FOLLOWUP_PURPOSE)
            flags += more_flags
            waiting += more_waiting
            tasks += len(second)
            sent.absorb(more)

        def outcome(session: Session, run: AuditRun) -> Outcome:
            status, detail = final_status(session, run, max_unusable=max_unusable)
            return waiting_outcome(status, detail, waiting, "answers", sent.got.batches)

        status, detail = finish_run(engine, AuditRun, run_id, outcome)
    if waiting:
        flags[NOT_MADE] += waiting
    return sent.result(
        KIND, run_id, tasks=tasks, flags=dict(flags), missing=failed_calls(engine, run_id),
        pending=waiting, prices=prices, status=status.value, detail=detail,
    )  # fmt: skip


def failed_calls(engine: Engine, run_id: int) -> list[Unanswered]:
    """The run's failed calls (status ``error``) by prompt key and turn, with why."""
    with Session(engine) as session:
        rows = session.exec(
            select(AuditAnswer.key, AuditAnswer.turn, AuditAnswer.error)
            .where(col(AuditAnswer.run_id) == run_id, col(AuditAnswer.status) == ERROR)
            .order_by(col(AuditAnswer.key), col(AuditAnswer.turn))
        ).all()
    return [Unanswered({"prompt": key, "turn": turn}, error or "") for key, turn, error in rows]
