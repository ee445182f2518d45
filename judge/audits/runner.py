"""Sending an audit suite to a model and storing every answer with what was read from it.

An audit run is identified by (suite, design settings, prompt version, endpoint, model,
sampling): asking for the same run again resumes it, and only prompts never answered or
whose call failed are sent; everything else comes from the store or the call cache. The
same machinery as generation and judging (``judge.runs``) does the work: a lease keeps a
second process off the run, results are inserted as they arrive, a process killed at any
moment loses at most the calls in flight.

A suite with a second turn (the award audit's "why?") gets it after the first pass, from the
stored first answers, in the same run.

Every prompt is a draw of its own: a prompt whose text an earlier prompt of the design
already had gets the next sample index (``base.number_draws``), so its own call and cache
entry, and its follow-up takes the same index. A run stored before that rule, whose
repeated prompts were answered by one shared call, keeps its other answers when resumed;
the copies are asked again as their own draws (``_forget_shared_draws``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any

from sqlalchemy import String, cast
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.audits.base import (
    DRAW,
    EMPTY,
    ERROR,
    FOLLOWUP,
    MAIN,
    UNPARSED,
    AuditTask,
    Reading,
    StoredAnswer,
    Suite,
    number_draws,
)
from judge.costs import (
    Budget,
    BudgetGate,
    Prices,
    budget_stop_detail,
    paid_calls,
    run_budget,
)
from judge.endpoint_url import identity_url
from judge.errors import NotFoundError
from judge.hashing import content_hash
from judge.models.cache import CallCacheView, CallOutcome, cached_complete, call_key
from judge.models.client import ModelClient
from judge.progress import Progress
from judge.runs import (
    NOT_MADE,
    UNUSABLE_SHARE,
    Outcome,
    Row,
    RunSummary,
    commit_run,
    finish_run,
    run_lease,
    start_run,
    store_results,
    unusable_detail,
)
from judge.runs import get_or_create_run as get_or_create
from judge.store.engine import session_scope
from judge.store.tables import AuditAnswer, AuditLabel, AuditRun, CallCache, utcnow
from judge.vocab import RunStatus


def config_hash(suite: Suite, client: ModelClient, *, temperature: float, max_tokens: int) -> str:
    """The identity of an audit run: what is asked, of whom, and how it is sampled."""
    return content_hash(
        {
            "suite": suite.name,
            "version": suite.version,
            "params": suite.params,
            "endpoint": client.name,
            "base_url": identity_url(client.config.base_url),
            "model": client.model,
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
    )


def get_or_create_run(
    session: Session,
    suite: Suite,
    client: ModelClient,
    *,
    temperature: float,
    max_tokens: int,
    new: bool = False,
) -> AuditRun:
    """The newest run with these exact settings (to resume it: its ``config_hash``), or a
    new one."""
    return get_or_create(
        session,
        AuditRun,
        {"config_hash": config_hash(suite, client, temperature=temperature, max_tokens=max_tokens)},
        fields={
            "suite": suite.name,
            "endpoint_name": client.name,
            "base_url": client.config.base_url,
            "model": client.model,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "params": {**suite.params, "version": suite.version},
        },
        new=new,
    )


@dataclass(frozen=True)
class AuditSummary:
    """What one pass did: the run, and each turn's summary (None: the turn had nothing)."""

    run_id: int
    main: RunSummary
    followup: RunSummary | None

    def to_dict(self) -> dict[str, Any]:
        def one(s: RunSummary | None) -> dict[str, Any] | None:
            if s is None:
                return None
            return {"sent": s.tasks, "model_calls": s.model_calls, "cached": s.cached,
                    "statuses": s.flags}  # fmt: skip

        return {"run_id": self.run_id, "main": one(self.main), "followup": one(self.followup)}


def open_audit_run(
    engine: Engine,
    suite: Suite,
    client: ModelClient,
    *,
    temperature: float,
    max_tokens: int,
    new: bool,
    on_run: Callable[[int], None] | None,
) -> int:
    """The audit run for these settings, found or created and committed; ``on_run`` hears
    its id. Every door to an audit run (live or through the Batch API) starts here."""
    run_id = commit_run(
        engine,
        lambda session: get_or_create_run(
            session, suite, client, temperature=temperature, max_tokens=max_tokens, new=new
        ),
    )
    if on_run is not None:
        on_run(run_id)
    return run_id


def run_audit(
    engine: Engine,
    client: ModelClient,
    suite: Suite,
    *,
    temperature: float,
    max_tokens: int,
    limit: int | None = None,
    new: bool = False,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    budget: Budget | None = None,
    max_unusable: float = UNUSABLE_SHARE,
) -> AuditSummary:
    """Create (or resume) the audit run for these settings and send every prompt of the
    design not yet answered (``limit``: only the design's first ``limit`` prompts), then the
    suite's second turn if it has one. ``on_run`` hears the run's id before any call. With a
    ``budget`` (``--max-cost``) no call goes out once the next could pass it: the run stops
    cleanly, ``incomplete``, every answer that came back stored, and a rerun goes on.
    ``max_unusable``: the share of unreadable answers (``final_status``) above which the
    run ends ``unusable`` (``[runs] max_unusable_share``)."""
    run_id = open_audit_run(
        engine, suite, client, temperature=temperature, max_tokens=max_tokens, new=new,
        on_run=on_run,
    )  # fmt: skip
    cache = CallCacheView(engine, client.model)
    gate: BudgetGate | None = None  # set under the run's lease, below

    def work(task: AuditTask) -> tuple[Row | None, list[CallOutcome]]:
        outcome = cached_complete(
            client,
            cache,
            task.messages,
            sample_index=task.sample_index,
            temperature=temperature,
            max_tokens=max_tokens,
            gate=gate,
        )
        if outcome.refused:  # the budget: no call, no row (asked on a rerun)
            return None, []
        return answer_row(run_id, task, outcome, suite), [outcome]

    def store(tasks: list[AuditTask]) -> RunSummary:
        return store_results(
            engine,
            AuditAnswer.__table__,  # type: ignore[attr-defined]
            run_id,
            tasks,
            work,
            concurrency=client.config.concurrency,
            label="status",
            progress=progress,
        )

    with run_lease(engine, AuditRun.run_kind, run_id):
        # The run's bound, kept across reruns, read only once the lease is held: a second
        # process could change it (or spend against it) until then.
        with session_scope(engine) as session:
            run = session.get(AuditRun, run_id)
            if run is not None and (budget is not None or run.max_cost is not None):
                prices = Prices.of(client.config)
                spent = paid_calls(session, "audit", run_id).cost(prices)
                budget = run_budget(run, budget, prices, spent)
        gate = BudgetGate(budget) if budget is not None else None
        main = store(
            main_tasks(
                engine,
                run_id,
                suite,
                client,
                temperature=temperature,
                max_tokens=max_tokens,
                limit=limit,
            )  # fmt: skip
        )
        followup = None
        if budget is None or not budget.exhausted:  # else each would only be refused
            wanted = followup_tasks(engine, run_id, suite)
            followup = store(wanted) if wanted else None

        def outcome(session: Session, run: AuditRun) -> Outcome:
            status, detail = final_status(session, run, max_unusable=max_unusable)
            if budget is None or not budget.exhausted:
                return status, detail
            not_made = main.flags.get(NOT_MADE, 0)
            if followup is not None:
                not_made += followup.flags.get(NOT_MADE, 0)
            made = paid_calls(session, "audit", run_id).results
            stopped = budget_stop_detail(budget, made, made + not_made, "answers", "audit")
            return RunStatus.INCOMPLETE, "; ".join(d for d in (stopped, detail) if d)

        finish_run(engine, AuditRun, run_id, outcome)
    return AuditSummary(run_id, main, followup)


def main_tasks(
    engine: Engine,
    run_id: int,
    suite: Suite,
    client: ModelClient,
    *,
    temperature: float,
    max_tokens: int,
    limit: int | None,
) -> list[AuditTask]:
    """For the holder of the run's lease: mark the run running, forget its failed calls
    (they are asked again), and return the design's first-turn prompts still to ask, in the
    design's order; a repeat that a shared call answered (a run stored before every repeat
    was its own draw) is asked again as its own draw."""

    def expected(task: AuditTask) -> str:
        return call_key(client, task.messages, sample_index=task.sample_index,
                        temperature=temperature, max_tokens=max_tokens)  # fmt: skip

    with session_scope(engine) as session:
        start_run(session, AuditRun, run_id)
        done = _forget_failures(session, run_id)
    todo, copies = _main_todo(suite, done, limit)
    if copies:
        with session_scope(engine) as session:
            wanted_keys = {key: expected(task) for key, (_, task) in copies.items()}
            todo += [copies[key] for key in _forget_shared_draws(session, run_id, wanted_keys)]
    return [task for _, task in sorted(todo, key=lambda pair: pair[0])]


def followup_tasks(engine: Engine, run_id: int, suite: Suite) -> list[AuditTask]:
    """The second-turn prompts the run's stored first answers call for and that are not
    stored yet (none for a suite without a second turn)."""
    with Session(engine) as session:
        answers = stored_answers(session, run_id, turn=MAIN, with_prompt=True)
        done = _done(session, run_id)
    follow = _followup_draws(suite, suite.followups(answers))
    return [t for t in follow if (t.key, FOLLOWUP) not in done]


def _main_todo(
    suite: Suite, done: set[tuple[str, str]], limit: int | None, *, numbered: bool = True
) -> tuple[list[tuple[int, AuditTask]], dict[str, tuple[int, AuditTask]]]:
    """The design's first-turn prompts not answered yet (``done``: the (key, turn) stored),
    with their places in the design; and the answered repeats whose answer may have come
    from a shared call (``_forget_shared_draws`` decides), by key. Not ``numbered``: the
    repeats keep the design's sample index (only the cache key differs; a dry run with no
    run and no cached call needs none)."""
    design = number_draws(suite.tasks()) if numbered else suite.tasks()
    todo: list[tuple[int, AuditTask]] = []
    copies: dict[str, tuple[int, AuditTask]] = {}
    for position, task in enumerate(design if limit is None else islice(design, limit)):
        if (task.key, MAIN) not in done:
            todo.append((position, task))
        elif DRAW in task.meta:  # answered before: by its own call, or a shared one?
            copies[task.key] = (position, task)
    return todo, copies


@dataclass(frozen=True)
class Planned:
    """What an audit command would send (``audit SUITE run --dry-run``): the run it would
    resume (None: a new one), the design's prompts, the first-turn prompts to ask, how many
    the call cache holds and the messages of the others; and the second-turn prompts that
    may follow (the award audit's "why?", asked only after an answer that chose a student),
    ``replies_to_come`` of them with the first answer still empty (it is not known yet)."""

    run_id: int | None
    prompts: int
    to_ask: int
    cached: int
    to_send: list[list[dict[str, str]]]
    followups: list[list[dict[str, str]]]
    replies_to_come: int


def find_run(
    session: Session, suite: Suite, client: ModelClient, *, temperature: float, max_tokens: int
) -> AuditRun | None:
    """The run ``get_or_create_run`` would resume, without making one."""
    digest = config_hash(suite, client, temperature=temperature, max_tokens=max_tokens)
    return session.exec(
        select(AuditRun).where(AuditRun.config_hash == digest).order_by(col(AuditRun.id).desc())
    ).first()


def plan_audit(
    engine: Engine,
    client: ModelClient,
    suite: Suite,
    *,
    temperature: float,
    max_tokens: int,
    limit: int | None = None,
    new: bool = False,
) -> Planned:
    """The calls ``run_audit`` with these settings would make, without making any or
    writing anything. The store is read once for the run's answered keys (and, for a run
    stored before every repeat was its own draw, once per 500 repeats), the call cache's
    keys once, and only when the model has cached calls is each prompt's cache key hashed:
    the 168,000 prompts of the name audit are planned in seconds, with no query per prompt
    (docs/audits.md has the time)."""

    def key_of(task: AuditTask) -> str:
        return call_key(client, task.messages, sample_index=task.sample_index,
                        temperature=temperature, max_tokens=max_tokens)  # fmt: skip

    run_id: int | None = None
    done: set[tuple[str, str]] = set()
    with Session(engine) as session:
        found = None if new else find_run(
            session, suite, client, temperature=temperature, max_tokens=max_tokens
        )  # fmt: skip
        if found is not None and found.id is not None:
            run_id = found.id
            done = _done(session, run_id, answered_only=True)
        first_cached = select(CallCache.key).where(CallCache.model == client.model).limit(1)
        cached_any = session.exec(first_cached).first() is not None
    todo, copies = _main_todo(suite, done, limit, numbered=run_id is not None or cached_any)
    if copies and run_id is not None:
        with Session(engine) as session:
            wanted = {key: key_of(task) for key, (_, task) in copies.items()}
            todo += [copies[key] for key in _shared_draws(session, run_id, wanted)]
    to_send = [task.messages for _, task in todo]
    if cached_any:
        cache = CallCacheView(engine, client.model)
        to_send = [task.messages for _, task in todo if not cache.has(key_of(task))]
    # A suite with a second turn asks it at most once per first answer still to come (its
    # reply unknown: left empty here), and once per stored answer that has none yet.
    first = next(iter(suite.tasks()), None)
    second_turn = first is not None and any(True for _ in suite.followups([_chose(first)]))
    followups: list[list[dict[str, str]]] = []
    if second_turn:
        followups = [t.messages for t in suite.followups([_chose(task) for _, task in todo])]
    to_come = len(followups)
    if second_turn and run_id is not None:
        with Session(engine) as session:
            answers = stored_answers(session, run_id, turn=MAIN, with_prompt=True)
        stored = [a for a in answers if (a.key, MAIN) in done and (a.key, FOLLOWUP) not in done]
        followups += [t.messages for t in suite.followups(stored)]
    prompts = suite.count() if limit is None else min(limit, suite.count())
    return Planned(
        run_id, prompts, len(todo), len(todo) - len(to_send), to_send, followups, to_come
    )


def _chose(task: AuditTask) -> StoredAnswer:
    """A first answer to ``task`` that chose a student, its text not known yet: what the
    suite's ``followups`` needs to say which second turn would follow it."""
    prompt = task.messages[-1]["content"]
    return StoredAnswer(0, task.key, MAIN, task.meta, "parsed", "A", "", prompt)


def answer_row(run_id: int, task: AuditTask, outcome: CallOutcome, suite: Suite) -> Row:
    """The ``AuditAnswer`` row of one call, every column given (a Core insert applies no
    model defaults); the suite reads the text unless the call failed or came back empty."""
    row: Row = {
        "run_id": run_id,
        "key": task.key,
        "turn": task.turn,
        "meta": task.meta,
        "prompt": task.messages[-1]["content"],
        "raw_text": None,
        "value": None,
        "reason": None,
        "error": None,
        "finish_reason": None,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_s": 0.0,
        "cache_key": outcome.key,
        "created_at": utcnow(),
    }
    if outcome.failure is not None:
        row.update(status=ERROR, error=outcome.failure.reason)
        return row
    done = outcome.completion
    assert done is not None
    row.update(
        raw_text=done.text,
        finish_reason=done.finish_reason,
        prompt_tokens=done.prompt_tokens,
        completion_tokens=done.completion_tokens,
        latency_s=done.latency_s,
    )
    if done.text is None or not done.text.strip():
        reading = Reading(EMPTY, reason="the model returned no text")
    elif task.turn == FOLLOWUP:
        reading = Reading("answered")
    else:
        reading = suite.read(task.meta, done.text)
    if done.finish_reason == "length" and reading.reason is None and reading.status != EMPTY:
        reading = Reading(reading.status, reading.value, "stopped at the token limit")
    row.update(status=reading.status, value=reading.value, reason=reading.reason)
    return row


def _followup_draws(suite: Suite, tasks: Iterable[AuditTask]) -> list[AuditTask]:
    """Second-turn prompts, each with its first prompt's sample index (a repeated first
    prompt is a draw of its own, and so is the "why?" after it), then numbered like the
    design in case two still share messages and index."""
    follow = list(tasks)
    if not follow:
        return follow
    draws = {t.key: t.sample_index for t in number_draws(suite.tasks()) if DRAW in t.meta}
    inherited = [
        replace(t, sample_index=draws[t.key], meta={**t.meta, DRAW: draws[t.key]})
        if t.sample_index == 0 and t.key in draws
        else t
        for t in follow
    ]
    return list(number_draws(inherited))


def _forget_shared_draws(session: Session, run_id: int, wanted: dict[str, str]) -> list[str]:
    """Delete the stored answers (both turns) of repeated prompts that did not come from the
    call they now have (``wanted``: prompt key -> its call's cache key), and return those
    keys: a run stored before every repeat was its own draw answered them all with one call,
    so they are asked again. Other answers, answers to repeats from their own call, and copies
    whose follow-up has a class stored (``auditlabel``) stay."""
    stale = _shared_draws(session, run_id, wanted)
    for start in range(0, len(stale), 500):
        for row in session.exec(
            select(AuditAnswer).where(
                AuditAnswer.run_id == run_id, col(AuditAnswer.key).in_(stale[start : start + 500])
            )
        ):
            session.delete(row)
    session.flush()
    return stale


def _shared_draws(session: Session, run_id: int, wanted: dict[str, str]) -> list[str]:
    """The keys ``_forget_shared_draws`` deletes and asks again, read only (a dry run)."""
    stale: list[str] = []
    keys = list(wanted)
    for start in range(0, len(keys), 500):  # bounded IN lists
        chunk = keys[start : start + 500]
        rows = session.exec(
            select(AuditAnswer.key, AuditAnswer.cache_key).where(
                AuditAnswer.run_id == run_id,
                AuditAnswer.turn == MAIN,
                col(AuditAnswer.key).in_(chunk),
            )
        )
        stale += [key for key, stored in rows if stored != wanted[key]]
    # A copy whose follow-up was already classified (by the judge or a person) is kept as it
    # is: its labels point at that answer, and people's work is not thrown away unasked.
    labelled: set[str] = set()
    for start in range(0, len(stale), 500):
        labelled.update(
            session.exec(
                select(AuditAnswer.key)
                .join(AuditLabel, col(AuditLabel.answer_id) == col(AuditAnswer.id))
                .where(
                    AuditAnswer.run_id == run_id,
                    col(AuditAnswer.key).in_(stale[start : start + 500]),
                )
            )
        )
    return [key for key in stale if key not in labelled]


def _done(session: Session, run_id: int, *, answered_only: bool = False) -> set[tuple[str, str]]:
    """The (key, turn) of the run's stored answers (``answered_only``: leaving out failed
    calls, which a run deletes and sends again)."""
    query = select(AuditAnswer.key, AuditAnswer.turn).where(AuditAnswer.run_id == run_id)
    if answered_only:
        query = query.where(AuditAnswer.status != ERROR)
    return {(key, turn) for key, turn in session.exec(query)}


def _forget_failures(session: Session, run_id: int) -> set[tuple[str, str]]:
    """Delete the run's failed calls (they are sent again) and return what is left."""
    for row in session.exec(
        select(AuditAnswer).where(AuditAnswer.run_id == run_id, AuditAnswer.status == ERROR)
    ):
        session.delete(row)
    session.flush()
    return _done(session, run_id)


def stored_answers(
    session: Session, run_id: int, *, turn: str | None = None, with_prompt: bool = False
) -> list[StoredAnswer]:
    """The run's answers in the order they were stored (one turn, or both); their prompt
    text only ``with_prompt`` (a second turn needs it, an analysis does not).

    Read as plain columns, not ORM objects, and with one ``meta`` object per distinct value
    (the repeats of a prompt share theirs): 168,000 name-audit answers would otherwise hold
    168,000 copies of 1,680 dictionaries (docs/audits.md has the figures).
    """
    columns = [
        col(AuditAnswer.id),
        col(AuditAnswer.key),
        col(AuditAnswer.turn),
        cast(col(AuditAnswer.meta), String),
        col(AuditAnswer.status),
        col(AuditAnswer.value),
        col(AuditAnswer.raw_text),
        col(AuditAnswer.cache_key),
    ]
    if with_prompt:
        columns.append(col(AuditAnswer.prompt))
    query = sa_select(*columns).where(col(AuditAnswer.run_id) == run_id)
    if turn is not None:
        query = query.where(col(AuditAnswer.turn) == turn)
    metas: dict[str | None, dict[str, Any]] = {}
    out = []
    for row in session.execute(query.order_by(col(AuditAnswer.id))):
        meta = metas.get(row[3])
        if meta is None:
            meta = metas[row[3]] = json.loads(row[3]) if row[3] else {}
        prompt = row[8] if with_prompt else None
        out.append(
            StoredAnswer(row[0], row[1], row[2], meta, row[4], row[5], row[6], prompt, row[7])
        )
    return out


UNREADABLE = (UNPARSED, ERROR)
"""Answers that give the audit nothing to count: a reply that could not be parsed, or a
call that failed for good. (A refusal or an empty reply is a reading of its own.)"""


def final_status(
    session: Session, run: AuditRun, *, max_unusable: float = UNUSABLE_SHARE
) -> Outcome:
    """Finished; incomplete with how many answers are missing (failed calls); or unusable
    when more than ``max_unusable`` of the answers are unreadable (``UNREADABLE``)."""
    statuses = session.exec(select(AuditAnswer.status).where(AuditAnswer.run_id == run.id)).all()
    failed = sum(s == ERROR for s in statuses)
    bad = Counter(str(s) for s in statuses if s in UNREADABLE)
    unusable = unusable_detail(bad, len(statuses), "answers unreadable", limit=max_unusable)
    if unusable:
        retry = f"; run the same audit command again to retry the {failed} failed calls"
        return RunStatus.UNUSABLE, unusable + (retry if failed else "")
    if not failed:
        return RunStatus.FINISHED, None
    return RunStatus.INCOMPLETE, (
        f"{failed} of {len(statuses)} answers missing (failed calls); run the same audit "
        "command again to retry them"
    )


def get_run(session: Session, run_id: int) -> AuditRun:
    run = session.get(AuditRun, run_id)
    if run is None:
        raise NotFoundError(f"no audit run {run_id}; `fairjudge audit runs` lists them")
    return run


def status_counts(answers: Sequence[StoredAnswer]) -> dict[str, dict[str, int]]:
    """Answers per turn and status (parsed, unparsed, refusal, empty, error, answered)."""
    counts: dict[str, dict[str, int]] = {}
    for a in answers:
        turn = counts.setdefault(a.turn, {})
        turn[a.status] = turn.get(a.status, 0) + 1
    return counts


def unread(answers: Sequence[StoredAnswer], limit: int = 20) -> Iterator[dict[str, Any]]:
    """Up to ``limit`` answers that could not be read, with their raw text (for reports)."""
    shown = 0
    for a in answers:
        if a.turn == MAIN and a.status not in ("parsed",) and shown < limit:
            shown += 1
            yield {"key": a.key, "status": a.status, "raw_text": a.raw_text}
