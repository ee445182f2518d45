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
the copies are asked again as their own draws (``forget_shared_draws``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.audits.base import (
    EMPTY,
    ERROR,
    FOLLOWUP,
    MAIN,
    UNPARSED,
    AuditTask,
    Reading,
    StoredAnswer,
    Suite,
)
from judge.audits.stored import (
    answered_keys,
    followup_tasks,
    main_tasks,
    main_todo,
    shared_draws,
    stored_answers,
)
from judge.budgets import Budget, BudgetGate, budget_stop_detail, paid_calls, run_budget
from judge.endpoint_url import identity_url
from judge.errors import NotFoundError
from judge.hashing import content_hash
from judge.models.batching import BatchOwner, batch_call
from judge.models.cache import CallCacheView, CallKeys, CallOutcome, cached_complete
from judge.models.client import ModelClient
from judge.models.transport import LIVE, Transport, Unanswered, with_waiting
from judge.prices import Prices
from judge.progress import Progress
from judge.runs import (
    NOT_MADE,
    UNUSABLE_SHARE,
    Row,
    RunSummary,
    run_lease,
    store_results,
    unusable_detail,
)
from judge.store.engine import session_scope
from judge.store.lifecycle import Outcome, commit_run, finish_run
from judge.store.lifecycle import get_or_create_run as get_or_create
from judge.store.tables import AuditAnswer, AuditRun, CallCache, utcnow
from judge.vocab import RunStatus

KIND = AuditRun.run_kind
FOLLOWUP_PURPOSE = "followup"
"""The ``batchjob.purpose`` of the second turn's batches."""


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
    transport: Transport = LIVE,
) -> AuditSummary:
    """Create (or resume) the audit run for these settings and send every prompt of the
    design not yet answered (``limit``: only the design's first ``limit`` prompts), then the
    suite's second turn if it has one. ``on_run`` hears the run's id before any call. With a
    ``budget`` (``--max-cost``) no call goes out once the next could pass it: the run stops
    cleanly, ``incomplete``, every answer that came back stored, and a rerun goes on.
    ``max_unusable``: the share of unreadable answers (``final_status``) above which the
    run ends ``unusable`` (``[runs] max_unusable_share``).

    ``transport``: how the calls reach the model (``judge.models.transport``). Through a
    ``BatchTransport`` each turn's prompts go out as batches (the second turn's, purpose
    ``FOLLOWUP_PURPOSE``, once the first answers are stored: it needs them in its
    conversation) and each answer is stored from the call cache with the live row; a call
    no batch answered is a failed call with the batch's reason (and its output line when
    that could not be read). ``progress`` then hears each turn's batches; without
    ``options.wait`` prompts still in a running batch are not made, the run ends
    ``incomplete`` saying so, and their follow-ups go out with the command that collects
    them. (No budget with a batch: its cost is known only once it is done.)"""
    batch = transport.mode == "batch"
    if batch and budget is not None:
        raise ValueError("a run through the Batch API takes no budget")
    run_id = open_audit_run(
        engine, suite, client, temperature=temperature, max_tokens=max_tokens, new=new,
        on_run=on_run,
    )  # fmt: skip
    gate: BudgetGate | None = None  # set under the run's lease, below

    def store(tasks: list[AuditTask], purpose: str) -> RunSummary:
        turn = _Turn(engine, client, suite, run_id, temperature, max_tokens, gate)
        return turn.store(tasks, transport, purpose, progress)

    with run_lease(engine, KIND, run_id):
        # The run's bound, kept across reruns, read only once the lease is held: a second
        # process could change it (or spend against it) until then.
        with session_scope(engine) as session:
            run = session.get(AuditRun, run_id)
            if not batch and run is not None and (budget is not None or run.max_cost is not None):
                prices = Prices.of(client.config)
                spent = paid_calls(session, "audit", run_id).cost(prices)
                budget = run_budget(run, budget, prices, spent)
        gate = BudgetGate(budget) if budget is not None else None
        first = main_tasks(
            engine, run_id, suite, client, temperature=temperature, max_tokens=max_tokens,
            limit=limit,
        )  # fmt: skip
        main = store(first, "first")
        followup = None
        if budget is None or not budget.exhausted:  # else each would only be refused
            wanted = followup_tasks(engine, run_id, suite)
            followup = store(wanted, FOLLOWUP_PURPOSE) if wanted else None

        def outcome(session: Session, run: AuditRun) -> Outcome:
            status, detail = final_status(session, run, max_unusable=max_unusable)
            if budget is None or not budget.exhausted:
                return transport.outcome(status, detail, "answers")
            not_made = main.flags.get(NOT_MADE, 0)
            if followup is not None:
                not_made += followup.flags.get(NOT_MADE, 0)
            made = paid_calls(session, "audit", run_id).results
            stopped = budget_stop_detail(budget, made, made + not_made, "answers", "audit")
            return RunStatus.INCOMPLETE, "; ".join(d for d in (stopped, detail) if d)

        finish_run(engine, AuditRun, run_id, outcome)
    return AuditSummary(run_id, main, followup)


@dataclass(frozen=True)
class _Turn:
    """One turn of an audit run's pass: the run, how it samples, the budget's gate."""

    engine: Engine
    client: ModelClient
    suite: Suite
    run_id: int
    temperature: float
    max_tokens: int
    gate: BudgetGate | None

    def store(
        self,
        tasks: list[AuditTask],
        transport: Transport,
        purpose: str,
        progress: Progress | None,
    ) -> RunSummary:
        """The turn's calls through the transport, then its rows stored (those left
        waiting for a batch still running counted not made)."""
        engine, client, run_id = self.engine, self.client, self.run_id
        sampling: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        sent = transport.open(
            engine, client, BatchOwner(KIND, run_id, purpose),
            lambda: [batch_call(client, t.messages, sample_index=t.sample_index, **sampling)
                     for t in tasks],
            progress=progress,
        )  # fmt: skip
        ready = sent.ready(tasks)

        def work(task: AuditTask) -> tuple[Row | None, list[CallOutcome]]:
            outcome = cached_complete(
                sent.client, sent.cache, task.messages, sample_index=task.sample_index,
                gate=self.gate, **sampling,
            )  # fmt: skip
            if outcome.refused:  # the budget: no call, no row (asked on a rerun)
                return None, []
            sent.count([outcome])
            row = answer_row(run_id, task, outcome, self.suite)
            return sent.keep_raw_line(row, outcome), [outcome]

        summary = store_results(
            engine,
            AuditAnswer.__table__,  # type: ignore[attr-defined]
            run_id,
            ready,
            work,
            concurrency=client.config.concurrency,
            label="status",
            progress=transport.store_progress(progress),
        )
        return with_waiting(summary, len(tasks), len(tasks) - len(ready))


def failed_calls(engine: Engine, run_id: int) -> list[Unanswered]:
    """The run's failed calls (status ``error``) by prompt key and turn, with why (what a
    command through the Batch API lists as left without an answer)."""
    with Session(engine) as session:
        rows = session.exec(
            select(AuditAnswer.key, AuditAnswer.turn, AuditAnswer.error)
            .where(col(AuditAnswer.run_id) == run_id, col(AuditAnswer.status) == ERROR)
            .order_by(col(AuditAnswer.key), col(AuditAnswer.turn))
        ).all()
    return [Unanswered({"prompt": key, "turn": turn}, error or "") for key, turn, error in rows]


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

    keys = CallKeys(client, temperature=temperature, max_tokens=max_tokens)

    def key_of(task: AuditTask) -> str:
        return keys(task.messages, task.sample_index)

    run_id: int | None = None
    done: set[tuple[str, str]] = set()
    with Session(engine) as session:
        found = None if new else find_run(
            session, suite, client, temperature=temperature, max_tokens=max_tokens
        )  # fmt: skip
        if found is not None and found.id is not None:
            run_id = found.id
            done = answered_keys(session, run_id, answered_only=True)
        first_cached = select(CallCache.key).where(CallCache.model == client.model).limit(1)
        cached_any = session.exec(first_cached).first() is not None
    todo, copies = main_todo(suite, done, limit, numbered=run_id is not None or cached_any)
    if copies and run_id is not None:
        with Session(engine) as session:
            wanted = {key: key_of(task) for key, (_, task) in copies.items()}
            todo += [copies[key] for key in shared_draws(session, run_id, wanted)]
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
        "cached_prompt_tokens": 0,
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
        cached_prompt_tokens=done.cached_prompt_tokens,
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
