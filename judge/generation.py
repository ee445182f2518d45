"""Sending items to the model under test and storing every answer.

A generation run is identified by (dataset, endpoint, model, parameters, template version):
asking for the same run again resumes it, and only the answers that are missing or failed
are requested; everything already answered comes from the store or the call cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.data.answers import classify_answer
from judge.errors import NotFoundError
from judge.models.cache import CallCacheView, CallOutcome, cached_complete
from judge.models.client import ModelClient
from judge.prompts import PromptBook
from judge.runs import Row, RunSummary, run_lease, store_results
from judge.store.engine import session_scope
from judge.store.queries import dataset_items, get_dataset
from judge.store.tables import GenerationRun, Response, utcnow
from judge.vocab import STAGE_PARTS

Progress = Callable[[int, int], None]


def get_or_create_run(
    session: Session,
    dataset_name: str,
    client: ModelClient,
    book: PromptBook,
    *,
    temperature: float,
    max_tokens: int,
    new: bool = False,
) -> GenerationRun:
    """The existing run with these exact settings (to resume it), or a new one."""
    dataset = get_dataset(session, dataset_name)
    assert dataset.id is not None
    if not new:
        existing = session.exec(
            select(GenerationRun)
            .where(
                GenerationRun.dataset_id == dataset.id,
                GenerationRun.endpoint_name == client.name,
                GenerationRun.model == client.model,
                GenerationRun.temperature == temperature,
                GenerationRun.max_tokens == max_tokens,
                GenerationRun.template_version == book.generation_version,
            )
            .order_by(col(GenerationRun.id).desc())
        ).first()
        if existing is not None:
            return existing
    run = GenerationRun(
        dataset_id=dataset.id,
        endpoint_name=client.name,
        base_url=client.config.base_url,
        model=client.model,
        temperature=temperature,
        max_tokens=max_tokens,
        template_version=book.generation_version,
    )
    session.add(run)
    session.flush()
    return run


@dataclass(frozen=True)
class _Task:
    item_id: int
    part: str
    prompt_text: str
    messages: list[dict[str, str]]


def generate(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    dataset_name: str,
    *,
    temperature: float,
    max_tokens: int,
    limit: int | None = None,
    accepted_only: bool = False,
    new: bool = False,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> RunSummary:
    """Create (or resume) the generation run for these settings and ask for every missing or
    failed answer, storing each as it arrives (``on_run`` hears the run's id first). A run
    left with failed answers ends ``incomplete`` with a line saying how many; a second
    process on the same run gets
    ``RunBusyError`` before any call (``judge.runs.run_lease``). ``accepted_only`` asks only
    for items an expert review accepted (``Item.review_status == 'accepted'``)."""
    with session_scope(engine) as session:
        created = get_or_create_run(
            session,
            dataset_name,
            client,
            book,
            temperature=temperature,
            max_tokens=max_tokens,
            new=new,
        )
        assert created.id is not None
        run_id = created.id
    if on_run is not None:
        on_run(run_id)
    with run_lease(engine, "generation", run_id):
        with session_scope(engine) as session:
            run = session.get(GenerationRun, run_id)
            assert run is not None
            tasks = _plan(session, run, book, dataset_name, limit, accepted_only)
            run.status = "running"
            run.status_detail = None
        cache = CallCacheView(engine, client.model)

        def work(task: _Task) -> tuple[Row, list[CallOutcome]]:
            outcome = cached_complete(
                client,
                cache,
                task.messages,
                sample_index=0,
                temperature=run.temperature,
                max_tokens=run.max_tokens,
            )
            return _response_row(run_id, task, outcome), [outcome]

        summary = store_results(
            engine,
            Response.__table__,  # type: ignore[attr-defined]
            run_id,
            tasks,
            work,
            concurrency=client.config.concurrency,
            label="flag",
            progress=progress,
        )
        with session_scope(engine) as session:
            stored = session.get(GenerationRun, run_id)
            assert stored is not None
            stored.status, stored.status_detail = _final_status(session, run_id)
            stored.finished_at = utcnow()
    return summary


def _plan(
    session: Session,
    run: GenerationRun,
    book: PromptBook,
    dataset_name: str,
    limit: int | None,
    accepted_only: bool = False,
) -> list[_Task]:
    """Every (item, part) still to answer; failed answers are deleted and asked again."""
    assert run.id is not None
    items = dataset_items(session, dataset_name)
    if accepted_only:
        items = [i for i in items if i.review_status == "accepted"]
        if not items:
            raise NotFoundError(
                f"dataset {dataset_name!r} has no item an expert review accepted; see "
                "`fairjudge campaign review` (or drop --accepted-only)"
            )
    items = items[:limit]
    done = {
        (r.item_id, r.part): r
        for r in session.exec(select(Response).where(Response.run_id == run.id))
    }
    for row in done.values():  # failed calls are retried on every rerun
        if row.flag == "error":
            session.delete(row)
    tasks = []
    for item in items:
        assert item.id is not None
        for part in STAGE_PARTS[item.stage]:
            previous = done.get((item.id, part))
            if previous is not None and previous.flag != "error":
                continue
            prompt = book.generation_prompt(item.stage, part, item.fields)
            tasks.append(_Task(item.id, part, prompt.messages[0]["content"], prompt.messages))
    return tasks


def _final_status(session: Session, run_id: int) -> tuple[str, str | None]:
    """'finished', or 'incomplete' with how many answers are missing and why."""
    flags = session.exec(select(Response.flag).where(Response.run_id == run_id)).all()
    failed = sum(flag == "error" for flag in flags)
    if not failed:
        return "finished", None
    return "incomplete", incomplete_detail(failed, len(flags))


def incomplete_detail(failed: int, total: int) -> str:
    """The status line of a generation run with failed answers (migration 0003 words the
    runs of the previous release the same way)."""
    return (
        f"{failed} of {total} answers missing (failed calls: {failed}); "
        "run the same generate command again to retry them"
    )


def _response_row(run_id: int, task: _Task, outcome: CallOutcome) -> Row:
    """The ``Response`` row of one answer, every column given (it is written with a Core
    insert, which applies no model defaults)."""
    row: Row = {
        "run_id": run_id,
        "item_id": task.item_id,
        "part": task.part,
        "prompt": task.prompt_text,
        "cache_key": outcome.key,
        "raw_text": None,
        "error": None,
        "finish_reason": None,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_s": 0.0,
        "created_at": utcnow(),
    }
    if outcome.failure is not None:
        row.update(flag="error", error=outcome.failure.reason)
        return row
    done = outcome.completion
    assert done is not None
    row.update(
        raw_text=done.text,
        flag=classify_answer(done.text, done.finish_reason),
        finish_reason=done.finish_reason,
        prompt_tokens=done.prompt_tokens,
        completion_tokens=done.completion_tokens,
        latency_s=done.latency_s,
    )
    return row
