"""Judge runs through a provider's Batch API (``fairjudge judge RUN --batch``).

The run is the same judge run a live command makes (same identity, lease, plan and tables):
only how its first calls reach the model differs. They go out as batches
(``judge.models.batching``), each line named by the call's cache key; once a batch ends its
answers are in the call cache, and the live pass (``judgment.judge_one``) then stores every
judgment from the cache, with the same parsing, repair and unscored rules as a live run. A
call that a batch did not answer (an error line, an unreadable or missing line, an expired or
failed batch) becomes a ``call_failed`` judgment with the batch's reason (and the raw line
when there was one), so the run ends ``incomplete`` and the same command sends exactly those
calls again, in a new batch.

A reply that needs a repair gets its repair call live by default; with ``repairs="batch"``
the repairs go out in a follow-up batch (so a run pays no live price at all, and waits for
two batches). ``BatchOptions.retry_live`` sends the calls a batch failed live in the same
command.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.config import JudgeConfig
from judge.grading.judging import _final_status, _plan, open_judge_run
from judge.grading.judgment import JudgeTask, call_params, judge_one, repair_request
from judge.grading.parsing import Unscored, UnscoredKind, parse_grade
from judge.grading.rubrics import RubricSet
from judge.models.batch import BatchApi
from judge.models.batch_options import BatchOptions
from judge.models.batch_pass import (
    LiveTally,
    batch_cost_note,
    merge,
    pass_cost,
    pass_json,
    waiting_outcome,
)
from judge.models.batching import (
    BatchAnswers,
    BatchCall,
    BatchOwner,
    BatchReport,
    Collected,
    batch_call,
    failed_raw,
    preload,
    send_batches,
)
from judge.models.cache import CallCacheView, CallGate, CallOutcome
from judge.models.client import Completion, ModelClient
from judge.prices import Prices
from judge.progress import Progress
from judge.prompts import PromptBook, RenderedPrompt
from judge.runs import (
    NOT_MADE,
    UNUSABLE_SHARE,
    ResultWriter,
    Row,
    RunSummary,
    run_lease,
    store_results,
)
from judge.store.engine import session_scope
from judge.store.lifecycle import Outcome, finish_run, start_run
from judge.store.tables import Item, JudgeRun, Judgment

Repairs = Literal["live", "batch"]


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


def judge_batch(
    engine: Engine,
    client: ModelClient,
    api: BatchApi,
    book: PromptBook,
    rubrics: RubricSet,
    config: JudgeConfig,
    generation_run_id: int,
    *,
    swap_order: bool = False,
    repairs: Repairs = "live",
    options: BatchOptions = BatchOptions(),
    prices: Prices | None = None,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_unusable: float = UNUSABLE_SHARE,
) -> BatchJudgeResult:
    """Create (or resume) the judge run for these settings, as ``judging.judge`` does, and
    make its missing judgments with their first calls sent as batches (``options``: how the
    Batch API is used; ``repairs``: where repair calls go, as the module says).
    ``progress`` hears the batches' (finished, total) calls while they run. Without
    ``options.wait``, batches still running are left for the next command: their judgments
    are not made (``pending``) and the run ends ``incomplete`` saying so. ``max_unusable``:
    the share of unscored judgments above which the run ends ``unusable`` (``[runs]
    max_unusable_share``)."""
    if repairs not in ("live", "batch"):
        raise ValueError(f"repairs must be 'live' or 'batch', got {repairs!r}")
    run_id = open_judge_run(
        engine, client, book, rubrics, config, generation_run_id,
        swap_order=swap_order, on_run=on_run,
    )  # fmt: skip
    with run_lease(engine, JudgeRun.run_kind, run_id):
        with session_scope(engine) as session:
            jrun = start_run(session, JudgeRun, run_id)
            tasks = _plan(session, jrun, rubrics)
        prompts = [_prompt(task, book, jrun) for task in tasks]
        sent = _send(
            engine, client, api, book, jrun, tasks, prompts, repairs, options, progress, sleep
        )
        summary, tally = _make_judgments(
            engine, client, book, jrun, tasks, prompts, sent, repairs, options
        )
        waiting = summary.flags.get(NOT_MADE, 0)

        def outcome(session: Session, run: JudgeRun) -> Outcome:
            status, detail = _final_status(session, run, max_unusable=max_unusable)
            return waiting_outcome(status, detail, waiting, "judgments", sent.got.batches)

        status, detail = finish_run(engine, JudgeRun, run_id, outcome)
    got = sent.got
    return BatchJudgeResult(
        summary=summary,
        batches=got.batches,
        missing=missing_calls(engine, run_id),
        pending=waiting,
        batch_prompt_tokens=got.prompt_tokens,
        batch_completion_tokens=got.completion_tokens,
        live_calls=tally.calls,
        live_prompt_tokens=tally.prompt_tokens,
        live_completion_tokens=tally.completion_tokens,
        prices=prices,
        cost=pass_cost(
            prices,
            (got.prompt_tokens, got.completion_tokens),
            (tally.prompt_tokens, tally.completion_tokens),
        ),
        status=status.value,
        status_detail=detail,
    )


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
    api: BatchApi,
    book: PromptBook,
    jrun: JudgeRun,
    tasks: list[JudgeTask],
    prompts: list[RenderedPrompt | None],
    repairs: Repairs,
    options: BatchOptions,
    progress: Progress | None,
    sleep: Callable[[float], None],
) -> _Sent:
    """Send every task's first call as batches (resuming the run's open ones), then, with
    ``repairs="batch"``, the repair calls the answers need as batches of their own."""
    assert jrun.id is not None
    run_id = jrun.id
    firsts = [
        None if prompt is None else batch_call(client, prompt.messages, **call_params(task, jrun))
        for task, prompt in zip(tasks, prompts, strict=True)
    ]
    owner = BatchOwner(JudgeRun.run_kind, run_id)
    got = send_batches(
        engine, api, owner, _known(firsts), options=options, progress=progress, sleep=sleep
    )
    repair_keys: dict[int, str] = {}
    if repairs == "batch":
        calls = _repair_calls(engine, tasks, prompts, firsts, got, client, book, jrun)
        repair_keys = {i: call.key for i, call in calls.items()}
        more = send_batches(
            engine, api, BatchOwner(JudgeRun.run_kind, run_id, "repair"),
            list(calls.values()), options=options, progress=progress, sleep=sleep,
        )  # fmt: skip
        merge(got, more)
    return _Sent(firsts, got, repair_keys)


def _make_judgments(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    jrun: JudgeRun,
    tasks: list[JudgeTask],
    prompts: list[RenderedPrompt | None],
    sent: _Sent,
    repairs: Repairs,
    options: BatchOptions,
) -> tuple[RunSummary, LiveTally]:
    """Make and store the judgments whose calls are answered (tasks still waiting for a
    batch are counted not made); the run's summary and the live calls' tally."""
    assert jrun.id is not None
    run_id = jrun.id
    firsts, got, repair_keys = sent.firsts, sent.got, sent.repair_keys
    first_keys = {call.key for call in firsts if call is not None}

    def live(key: str) -> bool:
        if key in got.failed:
            return options.retry_live
        return key not in first_keys and repairs == "live"

    answers = BatchAnswers(client, got.failed, live=live)
    cache = CallCacheView(engine, client.model)
    preload(engine, cache, [c.key for c in firsts if c] + list(repair_keys.values()))
    tally = LiveTally()

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
    summary = RunSummary(
        run_id,
        len(tasks),
        second.model_calls,
        second.cached + first_cached,
        second.http_attempts,
        dict(flags),
    )
    return summary, tally


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
