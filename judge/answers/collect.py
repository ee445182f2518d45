"""Sending items to the model under test and storing every answer.

A generation run is identified by (dataset, endpoint, its server's base URL, model, parameters,
template version): asking for the same run again resumes it, and only the answers that are
missing or failed are requested; everything already answered comes from the store or the
call cache.

Which items are asked follows their expert review (``Item.review_status``): by default every
item except drafts waiting for review and rejected ones; ``include_drafts`` adds the drafts,
``accepted_only`` keeps only accepted items. The items left out are counted in the run's
status line. A run is never resumed with options that leave out items it already answered:
its judge runs would mix them in, so that is refused (give the options it was made with, or
start a new run).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.answers.kinds import classify_answer
from judge.answers.selection import answers_per_item as answers_per_item
from judge.answers.selection import (
    asked,
    check_selection,
    chosen,
    left_out_detail,
)
from judge.budgets import Budget, BudgetGate, budget_stop_detail, paid_calls, run_budget
from judge.data.items import DRAFT, status_name
from judge.endpoint_url import same_server
from judge.errors import InvalidInputError
from judge.models.batching import BatchOwner, batch_call
from judge.models.cache import CallCacheView, CallOutcome, cached_complete, call_key
from judge.models.client import ModelClient
from judge.models.transport import LIVE, Transport, Unanswered, with_waiting
from judge.prices import Prices
from judge.progress import Progress
from judge.prompts import PromptBook
from judge.runs import (
    NOT_MADE,
    UNUSABLE_SHARE,
    Row,
    RunPart,
    RunSummary,
    run_lease,
    store_results,
    unusable_detail,
)
from judge.store.engine import session_scope
from judge.store.lifecycle import Outcome, commit_run, finish_run, start_run
from judge.store.lifecycle import get_or_create_run as get_or_create
from judge.store.queries import dataset_items, get_dataset
from judge.store.tables import GenerationRun, Item, Response, utcnow
from judge.vocab import STAGE_PARTS, RunStatus

KIND = GenerationRun.run_kind


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
    """The newest run with these exact settings at this server (to resume it), or a new
    one: the same endpoint name and model at another base_url is another run."""
    base_url = client.config.base_url
    return get_or_create(
        session,
        GenerationRun,
        _identity(session, dataset_name, client, book, temperature, max_tokens),
        fields={"base_url": base_url},
        # The server is part of the identity, compared in its normal form (judge.endpoint_url)
        # so that a trailing slash or the host's case does not split a run.
        same=lambda existing: same_server(existing.base_url, base_url),
        new=new,
    )


def _identity(
    session: Session,
    dataset_name: str,
    client: ModelClient,
    book: PromptBook,
    temperature: float,
    max_tokens: int,
) -> dict[str, Any]:
    """The columns that identify a generation run (besides its server)."""
    dataset = get_dataset(session, dataset_name)
    return {
        "dataset_id": dataset.id,
        "endpoint_name": client.name,
        "model": client.model,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "template_version": book.generation_version,
    }


def find_run(
    session: Session,
    dataset_name: str,
    client: ModelClient,
    book: PromptBook,
    *,
    temperature: float,
    max_tokens: int,
) -> GenerationRun | None:
    """The run ``get_or_create_run`` would resume, without making one (None: it would make
    a new run)."""
    identity = _identity(session, dataset_name, client, book, temperature, max_tokens)
    query = select(GenerationRun).order_by(col(GenerationRun.id).desc())
    for name, value in identity.items():
        query = query.where(getattr(GenerationRun, name) == value)
    base_url = client.config.base_url
    return next((r for r in session.exec(query) if same_server(r.base_url, base_url)), None)


@dataclass(frozen=True)
class _Task:
    item_id: int
    part: str
    prompt_text: str
    messages: list[dict[str, str]]


def open_generation_run(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    dataset_name: str,
    *,
    temperature: float,
    max_tokens: int,
    accepted_only: bool,
    include_drafts: bool,
    new: bool,
    on_run: Callable[[int], None] | None,
) -> int:
    """The generation run for these settings, found or created and committed, after the
    selection is checked (``check_selection``); ``on_run`` hears its id. Every door to a
    generation run (live or through the Batch API) starts here."""

    def get(session: Session) -> GenerationRun:
        check_selection(session, dataset_name, accepted_only, include_drafts)
        return get_or_create_run(
            session,
            dataset_name,
            client,
            book,
            temperature=temperature,
            max_tokens=max_tokens,
            new=new,
        )

    run_id = commit_run(engine, get)
    if on_run is not None:
        on_run(run_id)
    return run_id


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
    include_drafts: bool = False,
    new: bool = False,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    part: RunPart | None = None,
    budget: Budget | None = None,
    threads: int | None = None,
    max_unusable: float = UNUSABLE_SHARE,
    transport: Transport = LIVE,
) -> RunSummary:
    """Create (or resume) the generation run for these settings and ask for every missing or
    failed answer, storing each as it arrives (``on_run`` hears the run's id first). With a
    ``part`` only its items are asked, under the part's own lease, and the run's status is
    left to ``finish_generation_run``. A run
    left with failed answers ends ``incomplete`` with a line saying how many; a second
    process on the same run gets
    ``RunBusyError`` before any call (``judge.runs.run_lease``). With a ``budget``
    (``--max-cost``) no call goes out once the next could pass it: the run stops cleanly,
    ``incomplete``, every answer that came back stored, and a rerun goes on.

    Items are chosen by review status (module docstring): drafts and rejected items are left
    out unless ``include_drafts`` adds the drafts; ``accepted_only`` asks only for items an
    expert review accepted. The run's ``status_detail`` says how many were left out.
    ``max_unusable``: the share of failed answers above which the run ends ``unusable``.

    ``transport``: how the calls reach the model (``judge.models.transport``). Through a
    ``BatchTransport`` they go out as batches, each line named by the call's cache key, and
    every answer is stored from the call cache with the live row; a call no batch answered
    is a failed answer with the batch's reason (and its output line when that could not be
    read), so the same command sends exactly those again. ``progress`` then hears the
    batches' calls; without ``options.wait`` answers still in a running batch are not made
    and the run ends ``incomplete`` saying so. (No budget or part with a batch: its cost is
    known only once it is done.)"""
    batch = transport.mode == "batch"
    if batch and (budget is not None or part is not None):
        raise ValueError("a run through the Batch API takes no budget and no part")
    run_id = open_generation_run(
        engine, client, book, dataset_name, temperature=temperature, max_tokens=max_tokens,
        accepted_only=accepted_only, include_drafts=include_drafts, new=new, on_run=on_run,
    )  # fmt: skip
    kind = GenerationRun.run_kind if part is None else part.lease_kind(GenerationRun.run_kind)
    with run_lease(engine, kind, run_id):
        with session_scope(engine) as session:
            run = start_run(session, GenerationRun, run_id)
            if not batch and (budget is not None or run.max_cost is not None):  # kept bound
                prices = Prices.of(client.config)
                spent = paid_calls(session, "generation", run_id).cost(prices)
                budget = run_budget(run, budget, prices, spent, split=part is not None)
            tasks, left_out = _plan(
                session, run, book, dataset_name, limit, accepted_only, include_drafts,
                only=None if part is None else part.item_ids,
            )  # fmt: skip
        params: dict[str, Any] = {
            "sample_index": 0, "temperature": run.temperature, "max_tokens": run.max_tokens
        }  # fmt: skip
        sent = transport.open(
            engine, client, BatchOwner(KIND, run_id),
            lambda: [batch_call(client, task.messages, **params) for task in tasks],
            progress=progress,
        )  # fmt: skip
        ready = sent.ready(tasks)
        gate = BudgetGate(budget) if budget is not None else None

        def work(task: _Task) -> tuple[Row | None, list[CallOutcome]]:
            outcome = cached_complete(sent.client, sent.cache, task.messages, gate=gate, **params)
            if outcome.refused:  # the budget: no call, no row (asked again on a rerun)
                return None, []
            sent.count([outcome])
            return sent.keep_raw_line(_response_row(run_id, task, outcome), outcome), [outcome]

        summary = store_results(
            engine,
            Response.__table__,  # type: ignore[attr-defined]
            run_id,
            ready,
            work,
            concurrency=threads or client.config.concurrency,
            label="flag",
            progress=transport.store_progress(progress),
            run_column="run_id",
            items=None if part is None else part.item_ids,
        )
        summary = with_waiting(summary, len(tasks), len(tasks) - len(ready))
        if part is None:
            _finish(engine, summary, budget, transport, left_out, max_unusable)
    return summary


def _finish(
    engine: Engine,
    summary: RunSummary,
    budget: Budget | None,
    transport: Transport,
    left_out: str | None,
    max_unusable: float,
) -> None:
    """Store how a whole run stands after its pass: with the budget's stop line when it
    stopped the pass, and the transport's when rows wait for a batch still running."""
    stopped = None
    if budget is not None and budget.exhausted:
        not_made = summary.flags.get(NOT_MADE, 0)
        made = _paid(engine, summary.run_id)
        planned = made + not_made
        stopped = budget_stop_detail(budget, made, planned, "answers", "generate")
    stage = partial(_final_status, left_out=left_out, stopped=stopped, max_unusable=max_unusable)

    def final(session: Session, run: GenerationRun) -> Outcome:
        return transport.outcome(*stage(session, run), "answers")

    finish_run(engine, GenerationRun, summary.run_id, final)


def failed_answers(engine: Engine, run_id: int) -> list[Unanswered]:
    """The run's failed answers (flag ``error``) by item key and part, with why (what a
    command through the Batch API lists as left without an answer)."""
    with Session(engine) as session:
        rows = session.exec(
            select(Item.key, Response.part, Response.error)
            .join(Item, col(Item.id) == col(Response.item_id))
            .where(col(Response.run_id) == run_id, col(Response.flag) == "error")
            .order_by(col(Item.key), col(Response.part))
        ).all()
    return [Unanswered({"item": key, "part": part}, error or "") for key, part, error in rows]


@dataclass(frozen=True)
class Planned:
    """What a generate command would send (``generate --dry-run``): the run it would
    resume (None: a new one), the answers it would ask for, how many the call cache holds,
    the messages of the others, and the line on items left out by review status."""

    run_id: int | None
    answers: int
    cached: int
    to_send: list[list[dict[str, str]]]
    left_out: str | None


def plan_answers(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    dataset_name: str,
    *,
    temperature: float,
    max_tokens: int,
    limit: int | None = None,
    accepted_only: bool = False,
    include_drafts: bool = False,
    new: bool = False,
) -> Planned:
    """The calls ``generate`` with these settings would make, without making any or writing
    anything: the same checks (a selection with no item, a run that these options would
    mix) and the same plan, read only."""
    with session_scope(engine) as session:
        check_selection(session, dataset_name, accepted_only, include_drafts)
        found = None
        if not new:
            found = find_run(
                session, dataset_name, client, book, temperature=temperature,
                max_tokens=max_tokens,
            )  # fmt: skip
        run = found or GenerationRun(  # a transient run: never added to the session
            **_identity(session, dataset_name, client, book, temperature, max_tokens),
            base_url=client.config.base_url,
        )
        tasks, left_out = _plan(
            session, run, book, dataset_name, limit, accepted_only, include_drafts,
            readonly=True,
        )  # fmt: skip
        run_id = found.id if found is not None else None
        session.rollback()  # nothing read here is written back
    cache = CallCacheView(engine, client.model)
    to_send = [
        task.messages
        for task in tasks
        if not cache.has(
            call_key(
                client,
                task.messages,
                sample_index=0,
                temperature=temperature,
                max_tokens=max_tokens,
            )  # fmt: skip
        )
    ]
    return Planned(run_id, len(tasks), len(tasks) - len(to_send), to_send, left_out)


def finish_generation_run(
    engine: Engine,
    run_id: int,
    dataset_name: str,
    *,
    accepted_only: bool = False,
    include_drafts: bool = False,
    max_unusable: float = UNUSABLE_SHARE,
) -> Outcome:
    """Store how a generation run whose parts all ended stands, as ``generate`` does at the
    end of a whole run (with the line on the items its options leave out)."""
    rule = {"accepted_only": accepted_only, "include_drafts": include_drafts}
    with session_scope(engine) as session:
        left = Counter(
            status_name(item.review_status)
            for item in dataset_items(session, dataset_name)
            if not asked(item.review_status, **rule)
        )
    left_out = left_out_detail(left, accepted_only=accepted_only)
    final = partial(_final_status, left_out=left_out, max_unusable=max_unusable)
    return finish_run(engine, GenerationRun, run_id, final)


def _plan(
    session: Session,
    run: GenerationRun,
    book: PromptBook,
    dataset_name: str,
    limit: int | None,
    accepted_only: bool = False,
    include_drafts: bool = False,
    *,
    only: frozenset[int] | None = None,
    readonly: bool = False,
) -> tuple[list[_Task], str | None]:
    """Every (item, part) still to answer (of the items in ``only``, when given: a part of
    the run, after ``limit``), and the words for
    the items left out by review status; failed answers are deleted and asked again (left
    in place when ``readonly``, for a dry run, whose ``run`` may be one not stored yet)."""
    items, left_out = chosen(session, dataset_name, limit, accepted_only, include_drafts)
    done: dict[tuple[int, str], Response] = {}
    if run.id is not None:  # a run not stored yet (a dry run's) has no answers
        done = {
            (r.item_id, r.part): r
            for r in session.exec(select(Response).where(Response.run_id == run.id))
        }
        _check_scope(run.id, done.values(), left_out, accepted_only)
    if only is not None:  # a part: its own items' answers only (other parts go on meanwhile)
        items = [item for item in items if item.id in only]
        done = {key: row for key, row in done.items() if key[0] in only}
    for row in done.values():  # failed calls are retried on every rerun
        if row.flag == "error" and not readonly:
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
    note = left_out_detail(Counter(left_out.values()), accepted_only=accepted_only)
    return tasks, note


def _check_scope(
    run_id: int, answers: Iterable[Response], left_out: Mapping[int, str], accepted_only: bool
) -> None:
    """Refuse to resume a run that holds answers to items these options leave out (a run
    made with --include-drafts resumed without it, or items rejected since they were
    answered): the run's judge runs would judge them too. Failed answers do not count."""
    held = {r.item_id for r in answers if r.item_id in left_out and r.flag != "error"}
    if not held:
        return
    counts = Counter(left_out[i] for i in held)
    each = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))
    how = "give the options it was made with"
    if counts.get(DRAFT) and not accepted_only:
        how = "give --include-drafts to resume it with its drafts"
    raise InvalidInputError(
        f"generation run {run_id} already holds answers to {len(held)} item(s) these options "
        f"leave out ({each}), and its judge runs would include them: {how}, or --new for a "
        "run without them"
    )


def _final_status(
    session: Session,
    run: GenerationRun,
    *,
    left_out: str | None,
    stopped: str | None = None,
    max_unusable: float = UNUSABLE_SHARE,
) -> Outcome:
    """Finished, incomplete with how many answers are missing and why (``stopped``: the
    line of a cost budget that stopped the run), or unusable when more than
    ``max_unusable`` of them failed; the status line also counts the items left out by
    review status (``left_out``)."""
    flags = session.exec(select(Response.flag).where(Response.run_id == run.id)).all()
    failed = sum(flag == "error" for flag in flags)
    status, detail = RunStatus.FINISHED, None
    if failed:
        status, detail = RunStatus.INCOMPLETE, incomplete_detail(failed, len(flags))
        bad = {"failed calls": failed}
        if unusable := unusable_detail(bad, len(flags), "answers failed", limit=max_unusable):
            status, detail = RunStatus.UNUSABLE, f"{unusable}; {detail}"
    if stopped:
        status = RunStatus.INCOMPLETE
    return status, "; ".join(d for d in (stopped, detail, left_out) if d) or None


def _paid(engine: Engine, run_id: int) -> int:
    """The answers whose calls the run made (not those the call cache served)."""
    with session_scope(engine) as session:
        return paid_calls(session, "generation", run_id).results


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
        "cached_prompt_tokens": 0,
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
        cached_prompt_tokens=done.cached_prompt_tokens,
        completion_tokens=done.completion_tokens,
        latency_s=done.latency_s,
    )
    return row
