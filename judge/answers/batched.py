"""Generation runs through a provider's Batch API (``fairjudge generate DATASET --batch``).

The run is the one a live ``generate`` with the same settings makes or resumes (same
identity, lease, plan and table); only how its calls reach the model differs. They go out as
batches (``judge.models.batching``), each line named by the call's cache key; once a batch
ends its answers are in the call cache, and the live pass stores every answer from there
with the live path's own row (``collect._response_row``): the same flags, cache keys and
token counts. A call no batch answered is stored as a failed answer (flag ``error``) with the
batch's reason, and its output line when that line could not be read, so the run ends
``incomplete`` and the same command sends exactly those calls again, in a new batch (or at
once live with ``BatchOptions.retry_live``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.answers.collect import (
    _final_status,
    _plan,
    _response_row,
    _Task,
    open_generation_run,
)
from judge.models.batch import BatchApi
from judge.models.batch_options import BatchOptions
from judge.models.batch_pass import BatchRunResult, Unanswered, batch_pass, waiting_outcome
from judge.models.batching import BatchOwner, batch_call
from judge.models.cache import CallOutcome, cached_complete
from judge.models.client import ModelClient
from judge.prices import Prices
from judge.progress import Progress
from judge.prompts import PromptBook
from judge.runs import NOT_MADE, UNUSABLE_SHARE, Row, run_lease
from judge.runs import store_results as store
from judge.store.engine import session_scope
from judge.store.lifecycle import Outcome, finish_run, start_run
from judge.store.tables import GenerationRun, Item, Response

KIND = GenerationRun.run_kind


def generate_batch(
    engine: Engine,
    client: ModelClient,
    api: BatchApi,
    book: PromptBook,
    dataset_name: str,
    *,
    temperature: float,
    max_tokens: int,
    limit: int | None = None,
    accepted_only: bool = False,
    include_drafts: bool = False,
    new: bool = False,
    options: BatchOptions = BatchOptions(),
    prices: Prices | None = None,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_unusable: float = UNUSABLE_SHARE,
) -> BatchRunResult:
    """Create (or resume) the generation run for these settings, as ``collect.generate``
    does, and ask for its missing or failed answers through the Batch API, used as
    ``options`` say. ``progress`` hears the batches' (finished, total) calls while they run.
    Without ``options.wait``, batches still running are left for the next command (their
    answers are not stored yet and the run ends ``incomplete`` saying so)."""
    run_id = open_generation_run(
        engine, client, book, dataset_name, temperature=temperature, max_tokens=max_tokens,
        accepted_only=accepted_only, include_drafts=include_drafts, new=new, on_run=on_run,
    )  # fmt: skip
    with run_lease(engine, KIND, run_id):
        with session_scope(engine) as session:
            run = start_run(session, GenerationRun, run_id)
            tasks, left_out = _plan(
                session, run, book, dataset_name, limit, accepted_only, include_drafts
            )
        calls = [
            batch_call(
                client,
                task.messages,
                sample_index=0,
                temperature=run.temperature,
                max_tokens=run.max_tokens,
            )  # fmt: skip
            for task in tasks
        ]
        sent = batch_pass(
            engine, client, api, BatchOwner(KIND, run_id), calls, options=options,
            progress=progress, sleep=sleep,
        )  # fmt: skip
        ready = [t for t, c in zip(tasks, calls, strict=True) if not sent.waiting(c.key)]

        def work(task: _Task) -> tuple[Row | None, list[CallOutcome]]:
            outcome = cached_complete(
                sent.client, sent.cache, task.messages, sample_index=0,
                temperature=run.temperature, max_tokens=run.max_tokens,
            )  # fmt: skip
            sent.tally.add([outcome])
            return sent.keep_raw_line(_response_row(run_id, task, outcome), outcome), [outcome]

        summary = store(
            engine,
            Response.__table__,  # type: ignore[attr-defined]
            run_id,
            ready,
            work,
            concurrency=client.config.concurrency,
            label="flag",
        )
        waiting = len(tasks) - len(ready)
        stage = partial(_final_status, left_out=left_out, max_unusable=max_unusable)

        def outcome(session: Session, run: GenerationRun) -> Outcome:
            status, detail = stage(session, run)
            return waiting_outcome(status, detail, waiting, "answers", sent.got.batches)

        status, detail = finish_run(engine, GenerationRun, run_id, outcome)
    flags = dict(summary.flags)
    if waiting:
        flags[NOT_MADE] = flags.get(NOT_MADE, 0) + waiting
    return sent.result(
        KIND, run_id, tasks=len(tasks), flags=flags, missing=failed_answers(engine, run_id),
        pending=waiting, prices=prices, status=status.value, detail=detail,
    )  # fmt: skip


def failed_answers(engine: Engine, run_id: int) -> list[Unanswered]:
    """The run's failed answers (flag ``error``) by item key and part, with why."""
    with Session(engine) as session:
        rows = session.exec(
            select(Item.key, Response.part, Response.error)
            .join(Item, col(Item.id) == col(Response.item_id))
            .where(col(Response.run_id) == run_id, col(Response.flag) == "error")
            .order_by(col(Item.key), col(Response.part))
        ).all()
    return [Unanswered({"item": key, "part": part}, error or "") for key, part, error in rows]
