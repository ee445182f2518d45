"""Judge runs: scoring a generation run's stored answers with a rubric set (FairMonitor's, or
rubrics users registered; see ``judge.grading.registry``).

Per item, rubric and sample: render the prompt, call the judge (cached), read the grade. An
unreadable reply gets one repair request; if that fails too, the judgment is stored as
*unscored* with its kind, the reason and both raw replies. A judge run is identified by its
generation run and a hash of its settings and its server (the endpoint's base URL), so asking
again resumes it, and the same model name at another server is another run. A run with judgments
that failed for reasons outside the judge's reply (calls that failed, answers missing) ends
``incomplete`` with a line saying how many and why; a rerun tries exactly those again. The
rubric set is part of a run's identity, and each judgment records its rubric's version and
definition hash.

Calls go out rubric by rubric (all ICS judgments, then all PCS ...), so consecutive prompts
share their opening (system text, rubric, levels, reply format) and a server that keeps the
previous prompt's state, such as the embedded llama.cpp server, evaluates only the texts.

A run's identity is in ``judge.grading.identity``; one judgment (call, repair, row) in
``judge.grading.judgment``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import delete, func
from sqlalchemy import select as columns
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.budgets import Budget, BudgetGate, budget_stop_detail, paid_calls, run_budget
from judge.config import JudgeConfig
from judge.errors import InvalidInputError
from judge.grading.batch_calls import judge_through_batches
from judge.grading.identity import (
    get_or_create_judge_run,
    judge_config_hash,
    run_settings,
    run_with_hash,
)
from judge.grading.judgment import LOGPROB, JudgeTask, call_params, check_logprobs, judge_one
from judge.grading.parsing import UnscoredKind
from judge.grading.rubrics import Rubric, RubricSet
from judge.models.cache import CallCacheView, CallOutcome, call_key
from judge.models.client import ModelClient
from judge.models.transport import LIVE, BatchTransport, Transport
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
from judge.store.queries import get_generation_run
from judge.store.tables import Item, JudgeRun, Judgment, Response
from judge.vocab import STAGE_FIELDS, RunStatus


def swapped_item_fields(
    session: Session, generation_run_id: int, wanted: set[int] | None = None
) -> dict[int, dict[str, Any]]:
    """Item -> the fields a counterfactual copy swapped in its questions
    (``Response.extra['item_fields']``, ``judge.trust.copies``), judged in place of the
    item's own; empty for any other generation run (nothing is read for them)."""
    if get_generation_run(session, generation_run_id).source != "counterfactual":
        return {}
    out: dict[int, dict[str, Any]] = {}
    query = columns(col(Response.item_id), col(Response.extra)).where(
        col(Response.run_id) == generation_run_id
    )
    for item_id, extra in session.execute(query):
        if (wanted is None or item_id in wanted) and (extra or {}).get("item_fields"):
            out[item_id] = dict(extra["item_fields"])
    return out


def _missing_answer(parts_needed: tuple[str, ...], parts: dict[str, tuple[Any, ...]]) -> str | None:
    """Why a rubric cannot be judged, given the item's answers as {part: (raw_text, flag,
    error)}; None when every part it needs has a usable answer."""
    for part in parts_needed:
        row = parts.get(part)
        if row is None:
            return f"answer part {part} was never generated"
        _, flag, error = row
        if flag in ("empty", "error"):
            return f"answer part {part} is {flag}" + (f": {error}" if error else "")
    return None


def open_judge_run(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    rubrics: RubricSet,
    config: JudgeConfig,
    generation_run_id: int,
    *,
    swap_order: bool,
    on_run: Callable[[int], None] | None,
) -> int:
    """The judge run for these settings, found or created and committed, after the checks
    that come before any call (the rubric set fits the run's items, ``check_logprobs`` when
    the aggregation needs them); ``on_run`` hears its id. Every door to a judge run (live or
    through the Batch API) starts here."""
    with session_scope(engine) as session:
        check_rubric_set(session, generation_run_id, rubrics)
    if config.aggregation == LOGPROB:
        check_logprobs(client)
    run_id = commit_run(
        engine,
        lambda session: get_or_create_judge_run(
            session, generation_run_id, client, config, book, rubrics, swap_order
        ),
    )
    if on_run is not None:
        on_run(run_id)
    return run_id


def judge(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    rubrics: RubricSet,
    config: JudgeConfig,
    generation_run_id: int,
    *,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    swap_order: bool = False,
    budget: Budget | None = None,
    part: RunPart | None = None,
    resume_command: str = "judge",
    threads: int | None = None,
    max_unusable: float = UNUSABLE_SHARE,
    transport: Transport = LIVE,
) -> RunSummary:
    """Create (or resume) the judge run for these settings and make every missing judgment;
    with a ``budget`` (``--max-cost``) no call goes out once the next could pass it: the run
    stops cleanly, ``incomplete``, everything finished stored, and a rerun goes on;
    with ``swap_order`` every rubric that compares a pair is judged in both orders
    (``Rubric.swapped_order``): samples ``0..n-1`` as given, ``n..2n-1`` swapped.
    ``on_run`` hears the run's id before any call (a job shows it while it works).
    judgments that failed outside the judge's reply are tried again. A second process on
    the same run gets ``RunBusyError`` before any call (``judge.runs.run_lease``). A rubric
    set that cannot judge the run's items is refused before the run is created
    (``check_rubric_set``). With a ``part`` only its items are judged, under the part's own
    lease, and the run's status is left to ``finish_judge_run``. ``resume_command``: the
    command a budget's stop line tells the user to run again. ``threads``: calls this process
    keeps in flight (default: the endpoint's ``concurrency``, which stays the quota).
    ``max_unusable``: the share of unscored judgments above which the run ends ``unusable``
    (``[runs] max_unusable_share``). ``transport``: how the calls reach the model
    (``judge.models.transport``); through a ``BatchTransport`` the first calls (and, if it
    says so, the repairs) go out as batches (``judge.grading.batch_calls``), ``progress``
    hears the batches, and judgments still waiting for a running batch are not made (the
    run ends ``incomplete`` saying so); no budget or part with a batch."""
    batch = isinstance(transport, BatchTransport)
    if batch and (budget is not None or part is not None):
        raise ValueError("a run through the Batch API takes no budget and no part")
    run_id = open_judge_run(
        engine, client, book, rubrics, config, generation_run_id,
        swap_order=swap_order, on_run=on_run,
    )  # fmt: skip
    kind = JudgeRun.run_kind if part is None else part.lease_kind(JudgeRun.run_kind)
    with run_lease(engine, kind, run_id):
        with session_scope(engine) as session:
            jrun = start_run(session, JudgeRun, run_id)
            if not batch and (budget is not None or jrun.max_cost is not None):  # kept bound
                prices = Prices.of(client.config)
                spent = paid_calls(session, "judge", run_id).cost(prices)
                budget = run_budget(jrun, budget, prices, spent, split=part is not None)
            tasks = _plan(session, jrun, rubrics, items=None if part is None else part.item_ids)
        if isinstance(transport, BatchTransport):
            summary = judge_through_batches(engine, client, book, jrun, tasks, transport, progress)
        else:
            summary = _judge_live(
                engine, client, book, jrun, tasks, budget, progress, part, threads
            )

        def outcome(session: Session, run: JudgeRun) -> Outcome:
            status, detail = _final_status(session, run, max_unusable=max_unusable)
            if budget is None or not budget.exhausted:
                return transport.outcome(status, detail, "judgments")
            made = paid_calls(session, "judge", run_id).results
            not_made = summary.flags.get(NOT_MADE, 0)
            stopped = budget_stop_detail(budget, made, made + not_made, "judgments", resume_command)
            return RunStatus.INCOMPLETE, stopped + (f"; also {detail}" if detail else "")

        if part is None:
            finish_run(engine, JudgeRun, run_id, outcome)
    return summary


def _judge_live(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    jrun: JudgeRun,
    tasks: list[JudgeTask],
    budget: Budget | None,
    progress: Progress | None,
    part: RunPart | None,
    threads: int | None,
) -> RunSummary:
    """Make the planned judgments with live calls (under ``budget``, when given)."""
    assert jrun.id is not None
    cache = CallCacheView(engine, client.model)
    gate = BudgetGate(budget) if budget is not None else None

    def work(task: JudgeTask) -> tuple[Row | None, list[CallOutcome]]:
        return judge_one(task, client, cache, book, jrun, gate)

    return store_results(
        engine,
        Judgment.__table__,  # type: ignore[attr-defined]
        jrun.id,
        tasks,
        work,
        concurrency=threads or client.config.concurrency,
        label="status",
        progress=progress,
        run_column="judge_run_id",
        items=None if part is None else part.item_ids,
    )


def finish_judge_run(
    engine: Engine, run_id: int, *, max_unusable: float = UNUSABLE_SHARE
) -> Outcome:
    """Store how a judge run whose parts all ended stands (finished, incomplete with what
    is missing, or unusable), as ``judge`` does at the end of a whole run."""
    final = partial(_final_status, max_unusable=max_unusable)
    return finish_run(engine, JudgeRun, run_id, final)


_IN_LIMIT = 5000
"""The most ids put in one SQL ``IN (...)`` (SQLite allows 32,766 bound values)."""

_SHOWN = 10
"""Item ids named in an error before "and N more"."""


def check_rubric_set(session: Session, generation_run_id: int, rubrics: RubricSet) -> None:
    """Refuse, before any call, a rubric set that judges none of the run's answered items
    (only when it has some), and a rubric that compares an optional item text (a free-form
    item's ``reference``) that some of the items it judges lack: InvalidInputError naming
    the stages or the items, so that nothing is half-judged."""
    answered = select(Response.item_id).where(Response.run_id == generation_run_id).distinct()
    stages = set(
        session.exec(select(Item.stage).where(col(Item.id).in_(answered)).distinct()).all()
    )
    if stages and not any(rubrics.for_stage(stage) for stage in stages):
        raise InvalidInputError(
            f"rubric set {rubrics.name!r} judges {', '.join(rubrics.stages) or 'no'} items, "
            f"but generation run {generation_run_id} holds answers to "
            f"{', '.join(sorted(stages))} items only; choose rubrics for those stages "
            "(`fairjudge rubrics list`; --rubrics NAME)"
        )
    for rubric in rubrics:
        for stage in sorted(stages & set(rubric.applies_to)):
            optional = [f for f in rubric.item_fields if f not in STAGE_FIELDS[stage]]
            if not optional:
                continue
            lacking = [
                key
                for key, fields in session.exec(
                    select(Item.key, Item.fields).where(
                        col(Item.id).in_(answered), Item.stage == stage
                    )
                )
                if any(not fields.get(name) for name in optional)
            ]
            if lacking:
                shown = ", ".join(sorted(lacking)[:_SHOWN])
                more = f" and {len(lacking) - _SHOWN} more" if len(lacking) > _SHOWN else ""
                raise InvalidInputError(
                    f"rubric {rubric.name} compares the {' and '.join(optional)} of {stage} "
                    f"items, which {len(lacking)} item(s) of generation run "
                    f"{generation_run_id} lack: {shown}{more}; give them one, or judge them "
                    "with a rubric that does not compare it"
                )


def _plan(
    session: Session,
    jrun: JudgeRun,
    rubrics: RubricSet,
    *,
    readonly: bool = False,
    items: frozenset[int] | None = None,
) -> list[JudgeTask]:
    """Every (item, rubric, sample) still to judge, rubric by rubric (of ``items`` only, when
    given); retryable failures are
    deleted and redone (left in place when ``readonly``, for a dry run). Reads only the
    columns it needs, and item texts and answers only for items with something left to
    judge, so a finished run plans in a fraction of a second."""
    have: dict[tuple[int, str, int], tuple[int, str | None]] = {
        (item_id, rubric, sample): (jid, kind)
        for jid, item_id, rubric, sample, kind in session.execute(
            columns(
                col(Judgment.id),
                col(Judgment.item_id),
                col(Judgment.rubric),
                col(Judgment.sample_index),
                col(Judgment.unscored_kind),
            ).where(col(Judgment.judge_run_id) == jrun.id)
        )
    }
    answered = select(Response.item_id).where(Response.run_id == jrun.generation_run_id)
    todo: list[tuple[str, int, int]] = []  # (rubric, item, sample)
    retry: list[int] = []
    both = {name: _both_orders(jrun, rubrics[name]) for name in rubrics.rubrics}
    for item_id, name, sample in _slots(session, jrun, rubrics, items):
        old = have.get((item_id, name, sample))
        if old is not None:
            jid, kind = old
            if not (kind and UnscoredKind(kind).retry_on_rerun):
                continue
            retry.append(jid)
        todo.append((name, item_id, sample))
    for start in range(0, 0 if readonly else len(retry), _IN_LIMIT):
        chunk = retry[start : start + _IN_LIMIT]
        session.execute(delete(Judgment).where(col(Judgment.id).in_(chunk)))
    if not todo:
        return []
    wanted = {item_id for _, item_id, _ in todo}
    few = len(wanted) <= _IN_LIMIT  # else read the run's rows and keep the wanted ones here
    item_query = columns(col(Item.id), col(Item.fields))
    answer_query = columns(
        col(Response.item_id),
        col(Response.part),
        col(Response.raw_text),
        col(Response.flag),
        col(Response.error),
    ).where(col(Response.run_id) == jrun.generation_run_id)
    if few:
        item_query = item_query.where(col(Item.id).in_(wanted))
        answer_query = answer_query.where(col(Response.item_id).in_(wanted))
    else:
        item_query = item_query.where(col(Item.id).in_(answered.distinct()))
    fields: dict[int, dict[str, Any]] = {i: f for i, f in session.execute(item_query)}
    fields.update(swapped_item_fields(session, jrun.generation_run_id, wanted))
    answers: dict[int, dict[str, tuple[Any, ...]]] = {}
    for item_id, part, raw, flag, error in session.execute(answer_query):
        if item_id in wanted:
            answers.setdefault(item_id, {})[part] = (raw, flag, error)
    order = {name: i for i, name in enumerate(rubrics.rubrics)}
    todo.sort(key=lambda t: (order.get(t[0], len(order)), t[0], t[1], t[2]))
    rendered: dict[tuple[str, int], tuple[list[tuple[str, str]] | None, str | None]] = {}
    tasks: list[JudgeTask] = []
    for name, item_id, sample in todo:
        rubric = rubrics[name]
        if (name, item_id) not in rendered:
            parts = answers.get(item_id, {})
            missing = _missing_answer(rubric.parts, parts)
            plain = {p: row[0] or "" for p, row in parts.items()}
            texts = None if missing else rubric.render_texts(fields[item_id], plain)
            rendered[(name, item_id)] = (texts, missing)
        texts, missing = rendered[(name, item_id)]
        position = None
        if both[name]:
            position = "given" if sample < jrun.samples else "swapped"
            exchanged = rubric.swapped_order
            if position == "swapped" and texts is not None and exchanged is not None:
                texts = [texts[i] for i in exchanged]
        tasks.append(JudgeTask(item_id, rubric, sample, texts, missing, position))
    return tasks


def _both_orders(jrun: JudgeRun, rubric: Rubric) -> bool:
    return bool(jrun.swap_order and rubric.swapped_order)


def _slots(
    session: Session, jrun: JudgeRun, rubrics: RubricSet, items: frozenset[int] | None
) -> list[tuple[int, str, int]]:
    """Every (item, rubric, sample) the run holds when done (of ``items`` only, when
    given): each answered item, each rubric of its stage, each sample (twice as many for a
    rubric judged in both orders)."""
    answered = select(Response.item_id).where(Response.run_id == jrun.generation_run_id)
    stages = session.exec(
        select(Item.id, Item.stage).where(col(Item.id).in_(answered.distinct()))
    ).all()
    slots: list[tuple[int, str, int]] = []
    by_stage: dict[str, tuple[str, ...]] = {}  # for_stage once per stage, not per item
    for item_id, stage in stages:
        assert item_id is not None
        if items is not None and item_id not in items:
            continue
        if stage not in by_stage:
            by_stage[stage] = rubrics.for_stage(stage)
        for name in by_stage[stage]:
            count = jrun.samples * (2 if _both_orders(jrun, rubrics[name]) else 1)
            slots.extend((item_id, name, sample) for sample in range(count))
    return slots


def judgments_per_item(engine: Engine, run_id: int, rubrics: RubricSet) -> dict[int, int]:
    """The judgments each answered item holds when the run is done, counted as ``judge``
    plans them (a split job's parts know their whole work before they start)."""
    with session_scope(engine) as session:
        jrun = session.get(JudgeRun, run_id)
        if jrun is None:
            raise InvalidInputError(f"no judge run {run_id}")
        return dict(Counter(item_id for item_id, _, _ in _slots(session, jrun, rubrics, None)))


def _final_status(
    session: Session, run: JudgeRun, *, max_unusable: float = UNUSABLE_SHARE
) -> Outcome:
    """Finished; incomplete with how many judgments are missing and why; or unusable when
    more than ``max_unusable`` of them are unscored, whatever the reason."""
    kinds = Counter(
        str(kind or "unscored")
        for kind in session.exec(
            select(Judgment.unscored_kind).where(
                Judgment.judge_run_id == run.id, Judgment.status == "unscored"
            )
        ).all()
    )
    missing = {k: n for k, n in kinds.items() if k in _RETRIED}
    total = session.exec(
        select(func.count()).select_from(Judgment).where(Judgment.judge_run_id == run.id)
    ).one()
    retry = (
        f"; run the same judge command again to retry the {sum(missing.values())} that failed "
        "outside the judge's reply"
        if missing
        else ""
    )
    unusable = unusable_detail(kinds, total, "judgments unscored", limit=max_unusable)
    if unusable:
        return RunStatus.UNUSABLE, unusable + retry
    if not missing:
        return RunStatus.FINISHED, None
    why = ", ".join(f"{kind}: {n}" for kind, n in sorted(missing.items()))
    return (
        RunStatus.INCOMPLETE,
        f"{sum(missing.values())} of {total} judgments missing ({why}); "
        "run the same judge command again to retry them",
    )


_RETRIED = frozenset(k.value for k in UnscoredKind if k.retry_on_rerun)
"""The unscored kinds a rerun tries again (failed outside the judge's reply)."""


@dataclass(frozen=True)
class Planned:
    """What a judge command would send (``judge --dry-run``): judgments to make, how many
    of their first calls the cache answers, and the messages of the others."""

    run_id: int | None  # None: the run does not exist yet
    judgments: int
    missing_answers: int
    cached: int
    to_send: list[list[dict[str, str]]]


def plan_calls(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    rubrics: RubricSet,
    config: JudgeConfig,
    generation_run_id: int,
    *,
    swap_order: bool = False,
) -> Planned:
    """The calls a judge command with these settings would make, without making any or
    writing anything (repair calls, needed only for unreadable replies, are not counted)."""
    with session_scope(engine) as session:
        check_rubric_set(session, generation_run_id, rubrics)
        get_generation_run(session, generation_run_id)
        digest = judge_config_hash(
            client, config, book.judge_version, rubrics, book.rubric_judge_version, swap_order
        )
        jrun = run_with_hash(session, generation_run_id, digest)
        run_id = jrun.id if jrun is not None else None
        if jrun is None:  # a transient run: never added to the session
            jrun = JudgeRun(
                generation_run_id=generation_run_id,
                config_hash=digest,
                **run_settings(client, config, rubrics, swap_order),
            )
        tasks = _plan(session, jrun, rubrics, readonly=True)  # reads only
    cache = CallCacheView(engine, client.model)
    cached = missing = 0
    to_send = []
    for task in tasks:
        if task.texts is None:
            missing += 1
            continue
        prompt = book.judge_prompt(task.rubric, task.texts, variant=jrun.prompt_variant)
        if cache.has(call_key(client, prompt.messages, **call_params(task, jrun))):
            cached += 1
        else:
            to_send.append(prompt.messages)
    return Planned(run_id, len(tasks), missing, cached, to_send)
