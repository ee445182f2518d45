"""A judge run's calls through a ``BatchTransport`` (``fairjudge judge RUN --batch``): the
part of sending that is the judge's own; the run itself (identity, lease, plan, final status)
is ``judging.judge``'s, as for a live run.

The first calls go out as batches (``judge.models.batching``), each line named by the call's
cache key; once a batch ends its answers are in the call cache, and the live pass
(``judgment.judge_one``) then stores every judgment from the cache, with the same parsing,
repair and unscored rules as a live run. A call that a batch did not answer (an error line,
an unreadable or missing line, an expired or failed batch) becomes a ``call_failed``
judgment with the batch's reason (and the raw line when there was one), so the run ends
``incomplete`` and the same command sends exactly those calls again, in a new batch.

A reply that needs a repair gets its repair call live by default; with ``repairs="batch"``
the repairs go out in a follow-up batch (so a run pays no live price at all, and waits for
two batches). ``BatchOptions.retry_live`` sends the calls a batch failed live in the same
command.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.grading.judgment import JudgeTask, call_params, judge_one, repair_request
from judge.grading.parsing import Unscored, UnscoredKind, parse_grade
from judge.models.batching import (
    BatchAnswers,
    BatchCall,
    BatchOwner,
    BatchReport,
    Collected,
    batch_call,
    failed_raw,
    preload,
)
from judge.models.cache import CallCacheView, CallGate, CallOutcome
from judge.models.client import Completion, ModelClient
from judge.models.transport import (
    BatchTransport,
    batch_cost_note,
    merge,
    pass_json,
)
from judge.prices import Prices
from judge.progress import Progress
from judge.prompts import PromptBook, RenderedPrompt
from judge.runs import NOT_MADE, ResultWriter, Row, RunSummary, store_results
from judge.store.tables import Item, JudgeRun, Judgment


@dataclass(frozen=True)
class MissingCall:
    """A judgment whose call got no answer (``call_failed``): a rerun sends it again."""

    item: str
    rubric: str
    sample_index: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "rubric": self.rubric,
            "sample_index": self.sample_index,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class BatchJudgeResult:
    """What a ``--batch`` judge command did: the pass over the run (``summary``: tasks,
    cache hits, live calls), the batches, the judgments left without an answer (listed) or
    waiting for a batch still running (``pending``), the tokens paid at the batch price and
    live, their cost (None without prices), and how the run stands."""

    summary: RunSummary
    batches: list[BatchReport]
    missing: list[MissingCall]
    pending: int
    batch_prompt_tokens: int
    batch_completion_tokens: int
    live_calls: int
    live_prompt_tokens: int
    live_completion_tokens: int
    prices: Prices | None
    cost: float | None
    status: str
    status_detail: str | None

    @property
    def run_id(self) -> int:
        return self.summary.run_id

    def to_json(self) -> dict[str, Any]:
        return {
            "judge_run_id": self.run_id,
            "status": self.status,
            "status_detail": self.status_detail,
            "judgments": self.summary.flags,
            **pass_json(
                self.batches,
                [m.to_json() for m in self.missing],
                self.pending,
                batch_tokens=(self.batch_prompt_tokens, self.batch_completion_tokens),
                live_calls=self.live_calls,
                live_tokens=(self.live_prompt_tokens, self.live_completion_tokens),
                cost=self.cost,
                cost_note=self.cost_note(),
            ),
        }

    def cost_note(self) -> str:
        discount = None if self.prices is None else self.prices.batch_discount
        return batch_cost_note(discount, "the judge endpoint")


def judge_result(
    engine: Engine,
    summary: RunSummary,
    transport: BatchTransport,
    *,
    prices: Prices | None,
    status: str,
    status_detail: str | None,
) -> BatchJudgeResult:
    """What a ``--batch`` judge command did, from its pass (``summary``), its transport's
    account and how the run stands."""
    got, tally = transport.account, transport.tally
    return BatchJudgeResult(
        summary=summary,
        batches=got.batches,
        missing=missing_calls(engine, summary.run_id),
        pending=transport.waiting,
        batch_prompt_tokens=got.prompt_tokens,
        batch_completion_tokens=got.completion_tokens,
        live_calls=tally.calls,
        live_prompt_tokens=tally.prompt_tokens,
        live_completion_tokens=tally.completion_tokens,
        prices=prices,
        cost=transport.cost(prices),
        status=status,
        status_detail=status_detail,
    )


def judge_through_batches(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    jrun: JudgeRun,
    tasks: list[JudgeTask],
    transport: BatchTransport,
    progress: Progress | None,
) -> RunSummary:
    """Make the planned judgments of ``jrun`` with their first calls sent as batches (and,
    with ``transport.repairs == "batch"``, their repairs in a follow-up batch), as the module
    says: the pass's summary, the tasks still waiting for a batch counted not made (and on
    ``transport.waiting``). ``progress`` hears the batches' (finished, total) calls."""
    prompts = [_prompt(task, book, jrun) for task in tasks]
    sent = _send(engine, client, book, jrun, tasks, prompts, transport, progress)
    return _make_judgments(engine, client, book, jrun, tasks, prompts, sent, transport)


@dataclass(frozen=True)
class _Sent:
    """The batches' side of a run: each task's first call (None: no prompt), what the
    batches collected, and the repair call's key of each task sent as a batch repair."""

    firsts: list[BatchCall | None]
    got: Collected
    repair_keys: dict[int, str]


def _send(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    jrun: JudgeRun,
    tasks: list[JudgeTask],
    prompts: list[RenderedPrompt | None],
    transport: BatchTransport,
    progress: Progress | None,
) -> _Sent:
    """Send every task's first call as batches (resuming the run's open ones), then, with
    ``repairs="batch"``, the repair calls the answers need as batches of their own."""
    assert jrun.id is not None
    run_id = jrun.id
    firsts = [
        None if prompt is None else batch_call(client, prompt.messages, **call_params(task, jrun))
        for task, prompt in zip(tasks, prompts, strict=True)
    ]
    got = transport.send(engine, BatchOwner(JudgeRun.run_kind, run_id), _known(firsts), progress)
    repair_keys: dict[int, str] = {}
    if transport.repairs == "batch":
        calls = _repair_calls(engine, tasks, prompts, firsts, got, client, book, jrun)
        repair_keys = {i: call.key for i, call in calls.items()}
        owner = BatchOwner(JudgeRun.run_kind, run_id, "repair")
        more = transport.send(engine, owner, list(calls.values()), progress)
        got = _merged(got, more)
    return _Sent(firsts, got, repair_keys)


def _merged(first: Collected, more: Collected) -> Collected:
    """Both sends' answers, failures and calls still waiting (the command's account holds
    both already)."""
    both = Collected()
    merge(both, first)
    merge(both, more)
    return both


def _make_judgments(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    jrun: JudgeRun,
    tasks: list[JudgeTask],
    prompts: list[RenderedPrompt | None],
    sent: _Sent,
    transport: BatchTransport,
) -> RunSummary:
    """Make and store the judgments whose calls are answered (tasks still waiting for a
    batch are counted not made); the run's summary (the live calls on the transport's
    tally)."""
    assert jrun.id is not None
    run_id = jrun.id
    firsts, got, repair_keys = sent.firsts, sent.got, sent.repair_keys
    first_keys = {call.key for call in firsts if call is not None}

    def live(key: str) -> bool:
        if key in got.failed:
            return transport.options.retry_live
        return key not in first_keys and transport.repairs == "live"

    answers = BatchAnswers(client, got.failed, live=live)
    cache = CallCacheView(engine, client.model)
    preload(engine, cache, [c.key for c in firsts if c] + list(repair_keys.values()))
    tally = transport.tally

    def judged(index: int, gate: CallGate | None) -> tuple[Row | None, list[CallOutcome]]:
        task, prompt = tasks[index], prompts[index]
        row, outcomes = judge_one(task, answers, cache, book, jrun, gate, prompt)
        first = firsts[index]
        if row is not None and first is not None and row["raw_output"] is None:
            # An unreadable output line is kept with the judgment it fails.
            row["raw_output"] = failed_raw(got.failed, [first.key])
        return row, outcomes

    def waiting_for_batch(index: int) -> bool:
        first = firsts[index]
        return (first is not None and first.key in got.pending) or (
            repair_keys.get(index) in got.pending
        )

    # Pass 1, here: every judgment the call cache answers whole (most of them), stored in
    # large transactions. Pass 2, concurrent: those that need a call (a live repair or
    # retry) or fail (the batch gave no answer), through the usual live machinery.
    ready = [i for i in range(len(tasks)) if not waiting_for_batch(i)]
    first_pass, first_cached, deferred = _store_from_cache(engine, ready, judged)

    def work(index: int) -> tuple[Row | None, list[CallOutcome]]:
        row, outcomes = judged(index, None)
        tally.add(outcomes)
        return row, outcomes

    second = store_results(
        engine,
        Judgment.__table__,  # type: ignore[attr-defined]
        run_id,
        deferred,
        work,
        concurrency=client.config.concurrency,
        label="status",
    )
    flags = Counter(second.flags) + first_pass
    if len(ready) < len(tasks):
        flags[NOT_MADE] += len(tasks) - len(ready)
    transport.waiting += len(tasks) - len(ready)
    return RunSummary(
        run_id,
        len(tasks),
        second.model_calls,
        second.cached + first_cached,
        second.http_attempts,
        dict(flags),
    )


STORE_CHUNK = 1000
"""Judgments stored per transaction in the pass over answers already in the call cache."""


class _CacheOnly:
    """A gate that lets no call out: a judgment that needs one is left for the live pass."""

    def open(self, messages: list[dict[str, str]], max_tokens: int) -> float | None:
        return None

    def close(self, held: float, done: Completion | None) -> None:  # never opened
        pass


def _store_from_cache(
    engine: Engine,
    indexes: list[int],
    judged: Callable[[int, CallGate | None], tuple[Row | None, list[CallOutcome]]],
) -> tuple[Counter[str], int, list[int]]:
    """Store, in this thread and in transactions of ``STORE_CHUNK``, the judgments whose
    calls the cache answers whole: their count by status, the calls the cache answered, and
    the tasks left for a pass that may call. (Answers are in the cache already: a kill here
    loses no paid call, only rows a rerun makes again from the cache.)"""
    stored: Counter[str] = Counter()
    cached = 0
    left: list[int] = []
    gate = _CacheOnly()
    with engine.connect() as conn:
        writer = ResultWriter(conn, Judgment.__table__)  # type: ignore[attr-defined]
        chunk: list[tuple[Row | None, list[CallOutcome]]] = []
        for index in indexes:
            row, outcomes = judged(index, gate)
            if row is None:
                left.append(index)
                continue
            chunk.append((row, outcomes))
            stored[row["status"]] += 1
            cached += len(outcomes)
            if len(chunk) == STORE_CHUNK:
                writer.add_all(chunk)
                chunk = []
        if chunk:
            writer.add_all(chunk)
    return stored, cached, left


def _prompt(task: JudgeTask, book: PromptBook, jrun: JudgeRun) -> RenderedPrompt | None:
    """A task's judge prompt, rendered once for its batch line and its judgment (None: an
    answer is missing, no call)."""
    if task.texts is None:
        return None
    return book.judge_prompt(task.rubric, task.texts, variant=jrun.prompt_variant)


def _known(calls: list[BatchCall | None]) -> list[BatchCall]:
    return [call for call in calls if call is not None]


def _repair_calls(
    engine: Engine,
    tasks: list[JudgeTask],
    prompts: list[RenderedPrompt | None],
    firsts: list[BatchCall | None],
    got: Collected,
    client: ModelClient,
    book: PromptBook,
    jrun: JudgeRun,
) -> dict[int, BatchCall]:
    """The repair call of each task whose first reply (in the call cache) cannot be read,
    built as the live pass would make it (``judgment.repair_request``)."""
    cache = CallCacheView(engine, client.model)
    calls: dict[int, BatchCall] = {}
    for index, (task, prompt, first) in enumerate(zip(tasks, prompts, firsts, strict=True)):
        if prompt is None or first is None or first.key in got.failed or first.key in got.pending:
            continue
        reply = cache.get(first.key)
        if reply is None:
            continue
        assert task.texts is not None
        judged = [text for _, text in task.texts]
        grade = parse_grade(reply.text, quoted=judged, scale=task.rubric.scale)
        if not isinstance(grade, Unscored):
            continue
        _, messages = repair_request(prompt.messages, reply, grade, book, task)
        calls[index] = batch_call(client, messages, **call_params(task, jrun))
    return calls


def missing_calls(engine: Engine, run_id: int) -> list[MissingCall]:
    """The run's judgments whose calls got no answer, by item key, rubric and sample."""
    with Session(engine) as session:
        rows = session.exec(
            select(Item.key, Judgment.rubric, Judgment.sample_index, Judgment.reason)
            .join(Item, col(Item.id) == col(Judgment.item_id))
            .where(
                col(Judgment.judge_run_id) == run_id,
                col(Judgment.unscored_kind) == UnscoredKind.CALL_FAILED.value,
            )
            .order_by(col(Item.key), col(Judgment.rubric), col(Judgment.sample_index))
        ).all()
    return [MissingCall(key, rubric, sample, reason or "") for key, rubric, sample, reason in rows]
