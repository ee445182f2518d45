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
from sqlmodel import Session, col, func, select

from judge.answers.kinds import classify_answer
from judge.budgets import Budget, BudgetGate, budget_stop_detail, paid_calls, run_budget
from judge.data.items import DRAFT, status_name
from judge.endpoint_url import same_server
from judge.errors import InvalidInputError, NotFoundError
from judge.models.cache import CallCacheView, CallOutcome, cached_complete, call_key
from judge.models.client import ModelClient
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
    selection is checked (``_check_selection``); ``on_run`` hears its id. Every door to a
    generation run (live or through the Batch API) starts here."""

    def get(session: Session) -> GenerationRun:
        _check_selection(session, dataset_name, accepted_only, include_drafts)
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
    ``max_unusable``: the share of failed answers above which the run ends ``unusable``."""
    run_id = open_generation_run(
        engine, client, book, dataset_name, temperature=temperature, max_tokens=max_tokens,
        accepted_only=accepted_only, include_drafts=include_drafts, new=new, on_run=on_run,
    )  # fmt: skip
    kind = GenerationRun.run_kind if part is None else part.lease_kind(GenerationRun.run_kind)
    with run_lease(engine, kind, run_id):
        with session_scope(engine) as session:
            run = start_run(session, GenerationRun, run_id)
            if budget is not None or run.max_cost is not None:  # the run's bound, kept
                prices = Prices.of(client.config)
                spent = paid_calls(session, "generation", run_id).cost(prices)
                budget = run_budget(run, budget, prices, spent, split=part is not None)
            tasks, left_out = _plan(
                session, run, book, dataset_name, limit, accepted_only, include_drafts,
                only=None if part is None else part.item_ids,
            )  # fmt: skip
        cache = CallCacheView(engine, client.model)
        gate = BudgetGate(budget) if budget is not None else None

        def work(task: _Task) -> tuple[Row | None, list[CallOutcome]]:
            outcome = cached_complete(
                client,
                cache,
                task.messages,
                sample_index=0,
                temperature=run.temperature,
                max_tokens=run.max_tokens,
                gate=gate,
            )
            if outcome.refused:  # the budget: no call, no row (asked again on a rerun)
                return None, []
            return _response_row(run_id, task, outcome), [outcome]

        summary = store_results(
            engine,
            Response.__table__,  # type: ignore[attr-defined]
            run_id,
            tasks,
            work,
            concurrency=threads or client.config.concurrency,
            label="flag",
            progress=progress,
            run_column="run_id",
            items=None if part is None else part.item_ids,
        )
        if part is None:
            stopped = None
            if budget is not None and budget.exhausted:
                not_made = summary.flags.get(NOT_MADE, 0)
                made = _paid(engine, run_id)
                planned = made + not_made
                stopped = budget_stop_detail(budget, made, planned, "answers", "generate")
            final = partial(
                _final_status, left_out=left_out, stopped=stopped, max_unusable=max_unusable
            )
            finish_run(engine, GenerationRun, run_id, final)
    return summary


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
        _check_selection(session, dataset_name, accepted_only, include_drafts)
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


def asked(status: str | None, *, accepted_only: bool, include_drafts: bool) -> bool:
    """Whether an item with this review status is asked (see the module docstring)."""
    if accepted_only:
        return status == "accepted"
    if status == DRAFT:
        return include_drafts
    return status != "rejected"


def left_out_detail(counts: Mapping[str, int], *, accepted_only: bool) -> str | None:
    """The status line's words for items left out, by review status name.

    >>> left_out_detail({"draft": 2, "rejected": 1}, accepted_only=False).split(":")[0]
    '3 item(s) left out by review status (2 draft, 1 rejected)'
    >>> left_out_detail({"unreviewed": 4}, accepted_only=True)
    '4 item(s) left out by --accepted-only (4 unreviewed)'
    """
    total = sum(counts.values())
    if not total:
        return None
    each = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))
    if accepted_only:
        return f"{total} item(s) left out by --accepted-only ({each})"
    why = []
    if counts.get(DRAFT):
        why.append("drafts are asked only with --include-drafts")
    if counts.get("rejected"):
        why.append("rejected items never")
    return f"{total} item(s) left out by review status ({each}): {', '.join(why)}"


def _check_selection(
    session: Session, dataset_name: str, accepted_only: bool, include_drafts: bool
) -> None:
    """Refuse contradictory options and a selection with no item, before any run exists."""
    if accepted_only and include_drafts:
        raise InvalidInputError(
            "accepted_only and include_drafts contradict each other (--accepted-only asks "
            "only accepted items); give one of them"
        )
    dataset = get_dataset(session, dataset_name)
    counts: dict[str | None, int] = {
        status: n
        for status, n in session.exec(
            select(Item.review_status, func.count())
            .where(Item.dataset_id == dataset.id)
            .group_by(col(Item.review_status))
        )
    }
    rule = {"accepted_only": accepted_only, "include_drafts": include_drafts}
    if any(asked(status, **rule) for status in counts):
        return
    if accepted_only:
        raise NotFoundError(
            f"dataset {dataset_name!r} has no item an expert review accepted; see "
            "`fairjudge campaign review` (or drop --accepted-only)"
        )
    raise NotFoundError(
        f"dataset {dataset_name!r} has no item to ask: "
        + ", ".join(f"{n} {name}" for name, n in sorted(_named(counts).items()))
        + f". Review the drafts (`fairjudge campaign review --dataset {dataset_name} "
        "--drafts`), or give --include-drafts to ask them unreviewed"
    )


def _named(counts: Mapping[str | None, int]) -> dict[str, int]:
    return {status_name(s): n for s, n in counts.items()}


def _chosen(
    session: Session,
    dataset_name: str,
    limit: int | None,
    accepted_only: bool,
    include_drafts: bool,
) -> tuple[list[Item], dict[int, str]]:
    """The items a run asks (by review status, then ``limit``), and those left out (item
    id -> its review status's name)."""
    rule = {"accepted_only": accepted_only, "include_drafts": include_drafts}
    items, left_out = [], {}
    for item in dataset_items(session, dataset_name):
        assert item.id is not None
        if asked(item.review_status, **rule):
            items.append(item)
        else:
            left_out[item.id] = status_name(item.review_status)
    if not items:  # reviewed since _check_selection looked
        raise NotFoundError(f"dataset {dataset_name!r} has no item these options ask")
    return items[:limit], left_out


def answers_per_item(
    engine: Engine,
    dataset_name: str,
    *,
    limit: int | None = None,
    accepted_only: bool = False,
    include_drafts: bool = False,
) -> dict[int, int]:
    """The answers each asked item holds when the run is done (one per part of its
    stage), chosen as ``generate`` chooses them (a split job's parts know their whole work
    before they start); items left out hold none."""
    with session_scope(engine) as session:
        items, _ = _chosen(session, dataset_name, limit, accepted_only, include_drafts)
        return {int(item.id or 0): len(STAGE_PARTS[item.stage]) for item in items}


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
    items, left_out = _chosen(session, dataset_name, limit, accepted_only, include_drafts)
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
