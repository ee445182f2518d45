"""How a stage's calls reach the model: the transport of a run (``LIVE``: one HTTP call
each, through the stage's own client; ``BatchTransport``: through the endpoint's Batch API,
on ``judge.models.batching``, at the batch price).

Each stage keeps one runner (``judge.answers.collect.generate``, ``judge.grading.judging.judge``,
``judge.audits.runner.run_audit``) that owns the run's bookkeeping: it opens the run, holds
its lease, plans the calls, stores the rows and ends the run. The transport only sends:
``open`` gives the runner a ``CallPass`` (the client and call cache its pass runs with, the
tasks ready to store, and what to add to a failed row), and ``outcome`` says how the run
stands when batches still run. A ``BatchTransport`` is made for one command and keeps its
account (the batches, their tokens, the calls made live, the rows left waiting), from which
the command's result is read (``BatchRunResult``; a judge command reports
``judge.grading.batch_calls.BatchJudgeResult``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar

from sqlalchemy.engine import Engine

from judge.models.batch import TERMINAL, BatchApi
from judge.models.batch_options import BatchOptions
from judge.models.batching import (
    BatchAnswers,
    BatchCall,
    BatchOwner,
    BatchReport,
    Collected,
    failed_raw,
    preload,
    send_batches,
)
from judge.models.cache import CallCacheView, CallOutcome
from judge.models.client import ModelClient
from judge.progress import Progress
from judge.store.lifecycle import Outcome
from judge.vocab import RunStatus


def merge(into: Collected, more: Collected) -> None:
    """Add what a second ``send_batches`` did (a follow-up batch) to ``into``."""
    into.answered |= more.answered
    into.failed.update(more.failed)
    into.pending |= more.pending
    into.batches += more.batches
    into.prompt_tokens += more.prompt_tokens
    into.completion_tokens += more.completion_tokens


class LiveTally:
    """Calls a pass made live (repairs, retries) and their tokens, added from worker
    threads: what the command paid at the full price."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = self.prompt_tokens = self.completion_tokens = 0

    def add(self, outcomes: list[CallOutcome]) -> None:
        with self._lock:
            for outcome in outcomes:
                if outcome.cached or outcome.completion is None:
                    continue
                self.calls += 1
                self.prompt_tokens += outcome.completion.prompt_tokens
                self.completion_tokens += outcome.completion.completion_tokens

    def add_counts(self, other: LiveTally) -> None:
        with self._lock:
            self.calls += other.calls
            self.prompt_tokens += other.prompt_tokens
            self.completion_tokens += other.completion_tokens


class Prices(Protocol):
    """What a result needs of ``judge.prices.Prices`` (which this layer does not import)."""

    @property
    def batch_discount(self) -> float:
        """The share taken off both prices through the Batch API."""
        ...

    def cost(self, prompt_tokens: int, completion_tokens: int, *, batch: bool = False) -> float:
        """The cost of these tokens, at the batch price when ``batch``."""
        ...


T = TypeVar("T")

NOT_MADE = "not_made"
"""``judge.runs.NOT_MADE`` (that module sits above this layer): the rows a pass did not make."""


class Summary(Protocol):
    """What this layer reads of ``judge.runs.RunSummary``."""

    @property
    def run_id(self) -> int: ...

    @property
    def tasks(self) -> int: ...

    @property
    def flags(self) -> dict[str, int]: ...


S = TypeVar("S", bound=Summary)

Repairs = Literal["live", "batch"]
"""Where a judge reply that needs a repair gets its repair call through a Batch transport:
live at once, or in a follow-up batch."""


class CallPass:
    """What a stage's pass over its calls runs with: the client that makes a call and the
    call cache in front of it. This one is the live pass: every task is ready, every call
    goes to the stage's client, and a failed row is kept as it is."""

    def __init__(self, client: ModelClient, cache: CallCacheView) -> None:
        self.client = client
        self.cache = cache

    def ready(self, tasks: Sequence[T]) -> list[T]:
        """The tasks whose rows can be stored now (live: all of them)."""
        return list(tasks)

    def count(self, outcomes: list[CallOutcome]) -> None:
        """Hear a task's calls (a Batch pass counts those it made live)."""

    def keep_raw_line(
        self, row: dict[str, Any], outcome: CallOutcome, column: str = "error"
    ) -> dict[str, Any]:
        """A failed call's row as it will be stored (live: unchanged)."""
        return row


class BatchPass(CallPass):
    """A stage's calls after their batches: the client the stage's pass uses in their place
    (``BatchAnswers``), the call cache with their answers read in, the calls (in the order
    of the tasks they were made for), and the transport whose account it adds to."""

    def __init__(
        self,
        transport: BatchTransport,
        got: Collected,
        client: BatchAnswers,
        cache: CallCacheView,
        calls: Sequence[BatchCall],
    ) -> None:
        super().__init__(client, cache)
        self.transport = transport
        self.got = got
        self.calls = calls

    def ready(self, tasks: Sequence[T]) -> list[T]:
        """The tasks whose call is not in a batch still running (only when not waiting);
        the others are counted as left waiting for the next command."""
        kept = [t for t, c in zip(tasks, self.calls, strict=True) if c.key not in self.got.pending]
        self.transport.waiting += len(tasks) - len(kept)
        return kept

    def count(self, outcomes: list[CallOutcome]) -> None:
        self.transport.tally.add(outcomes)

    def keep_raw_line(
        self, row: dict[str, Any], outcome: CallOutcome, column: str = "error"
    ) -> dict[str, Any]:
        """A failed call's row with the batch's output line added to ``column`` when that
        line could not be read: kept whole with the row it fails, never read as an answer."""
        raw = failed_raw(self.got.failed, [outcome.key]) if outcome.failure else None
        if raw is not None:
            row[column] = f"{row[column]}; the line as it came: {raw}"
        return row


Calls = Callable[[], Sequence[BatchCall]]
"""The batch form of a pass's calls, one per task in order (built only by a Batch transport)."""


class LiveTransport:
    """Every call live, through the stage's own client (the default)."""

    mode: Literal["live", "batch"] = "live"

    def open(
        self,
        engine: Engine,
        client: ModelClient,
        owner: BatchOwner,
        calls: Calls,
        *,
        progress: Progress | None = None,
    ) -> CallPass:
        """The live pass: the stage's client and its call cache (``calls`` is not read)."""
        return CallPass(client, CallCacheView(engine, client.model))

    def store_progress(self, progress: Progress | None) -> Progress | None:
        """Who hears the rows stored (live: the caller's ``progress``)."""
        return progress

    def outcome(self, status: RunStatus, detail: str | None, what: str) -> Outcome:
        """How the run stands (live: as the stage says)."""
        return status, detail


LIVE = LiveTransport()
"""The live transport (it holds nothing, so one serves every run)."""


@dataclass(eq=False)
class BatchTransport:
    """A command's calls through the endpoint's Batch API (``api``), used as ``options``
    say; ``repairs``: where a judge's repair calls go. Made for one command: it keeps the
    command's account (``account``: the batches and their tokens, ``tally``: the calls made
    live, ``waiting``: rows left for a batch still running)."""

    api: BatchApi
    options: BatchOptions = BatchOptions()
    repairs: Repairs = "live"
    sleep: Callable[[float], None] = time.sleep
    account: Collected = field(default_factory=Collected)
    tally: LiveTally = field(default_factory=lambda: LiveTally())
    waiting: int = 0
    mode: Literal["live", "batch"] = "batch"

    def __post_init__(self) -> None:
        if self.repairs not in ("live", "batch"):
            raise ValueError(f"repairs must be 'live' or 'batch', got {self.repairs!r}")

    def send(
        self,
        engine: Engine,
        owner: BatchOwner,
        calls: Sequence[BatchCall],
        progress: Progress | None = None,
    ) -> Collected:
        """``send_batches`` for ``owner``'s calls, added to this command's account."""
        got = send_batches(
            engine, self.api, owner, calls, options=self.options, progress=progress,
            sleep=self.sleep,
        )  # fmt: skip
        merge(self.account, got)
        return got

    def open(
        self,
        engine: Engine,
        client: ModelClient,
        owner: BatchOwner,
        calls: Calls,
        *,
        progress: Progress | None = None,
    ) -> BatchPass:
        """The pass of a stage whose every call is a first call (no repairs): ``calls`` sent
        and collected; the calls a batch failed may go out live when
        ``options.retry_live``, any other call not answered by a batch is failed with why
        (``BatchAnswers``)."""
        built = list(calls())
        got = self.send(engine, owner, built, progress)
        retry = self.options.retry_live
        answers = BatchAnswers(client, got.failed, live=lambda key: retry and key in got.failed)
        cache = CallCacheView(engine, client.model)
        preload(engine, cache, [call.key for call in built])
        return BatchPass(self, got, answers, cache, built)

    def store_progress(self, progress: Progress | None) -> Progress | None:
        """Who hears the rows stored: nobody (``progress`` heard the batches)."""
        return None

    def outcome(self, status: RunStatus, detail: str | None, what: str) -> Outcome:
        """How the run stands while rows wait for batches still running (``waiting_outcome``)."""
        return waiting_outcome(status, detail, self.waiting, what, self.account.batches)

    def cost(self, prices: Prices | None) -> float | None:
        """What this command paid: the batches' answers at the batch price, the live calls
        at the full price (None without prices)."""
        got, live = self.account, self.tally
        return pass_cost(
            prices,
            (got.prompt_tokens, got.completion_tokens),
            (live.prompt_tokens, live.completion_tokens),
        )

    def result(
        self,
        kind: str,
        summary: Summary,
        *,
        missing: list[Unanswered],
        prices: Prices | None,
        status: str,
        detail: str | None,
    ) -> BatchRunResult:
        """The command's result (``BatchRunResult``) from this account and the run's pass
        (``summary``: every task planned, those left waiting counted ``not_made``)."""
        got, live = self.account, self.tally
        return BatchRunResult(
            kind=kind,
            run_id=summary.run_id,
            tasks=summary.tasks,
            flags=dict(summary.flags),
            batches=got.batches,
            missing=missing,
            pending=self.waiting,
            batch_prompt_tokens=got.prompt_tokens,
            batch_completion_tokens=got.completion_tokens,
            live_calls=live.calls,
            live_prompt_tokens=live.prompt_tokens,
            live_completion_tokens=live.completion_tokens,
            cost=self.cost(prices),
            batch_discount=None if prices is None else prices.batch_discount,
            status=status,
            status_detail=detail,
        )


Transport = LiveTransport | BatchTransport
"""How a run's calls reach the model."""


def with_waiting(summary: S, tasks: int, waiting: int) -> S:
    """A pass's summary over all ``tasks`` it planned, the ``waiting`` ones (their calls in
    a batch still running) counted ``not_made``."""
    if not waiting:
        return summary
    flags = dict(summary.flags)
    flags[NOT_MADE] = flags.get(NOT_MADE, 0) + waiting
    return replace(summary, tasks=tasks, flags=flags)  # type: ignore[type-var]


def waiting_outcome(
    status: RunStatus, detail: str | None, waiting: int, what: str, batches: Iterable[BatchReport]
) -> tuple[RunStatus, str | None]:
    """How a run stands when ``waiting`` of its ``what`` (judgments, answers) wait for
    batches still running: incomplete, saying so first; else as the stage says."""
    if not waiting:
        return status, detail
    running = ", ".join(f"{b.batch_id} ({b.status})" for b in batches if b.status not in TERMINAL)
    return RunStatus.INCOMPLETE, (
        f"{waiting} {what} wait for batch(es) still running: {running}; run the same command "
        "again to collect them" + (f"; also {detail}" if detail else "")
    )


@dataclass(frozen=True)
class Unanswered:
    """A call of a run that got no answer (stored as failed; the next command sends it
    again): which row it was for (``where``: e.g. item and part) and why."""

    where: dict[str, Any]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {**self.where, "reason": self.reason}

    def text(self) -> str:
        return " ".join(f"{name} {value}" for name, value in self.where.items())


@dataclass(frozen=True)
class BatchRunResult:
    """What a ``--batch`` generation or audit command did: the rows it stored by flag or
    status (``not_made``: waiting for a batch still running), the batches, the calls left
    without an answer (listed), the tokens paid at the batch price and live, their cost
    (None without prices), and how the run stands."""

    kind: str
    run_id: int
    tasks: int
    flags: dict[str, int]
    batches: list[BatchReport]
    missing: list[Unanswered]
    pending: int
    batch_prompt_tokens: int
    batch_completion_tokens: int
    live_calls: int
    live_prompt_tokens: int
    live_completion_tokens: int
    cost: float | None
    batch_discount: float | None
    """None: the endpoint has no prices."""
    status: str
    status_detail: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            f"{self.kind}_run_id": self.run_id,
            "status": self.status,
            "status_detail": self.status_detail,
            "tasks": self.tasks,
            "stored": self.flags,
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
        return batch_cost_note(self.batch_discount)


def pass_cost(prices: Prices | None, batch: tuple[int, int], live: tuple[int, int]) -> float | None:
    """The cost of a command's calls: ``batch`` (prompt, completion) tokens at the batch
    price, ``live`` ones at the full price; None without prices.

    >>> from judge.costs import Prices
    >>> pass_cost(Prices(2.0, 8.0, batch_discount=0.5), (1_000, 500), (0, 0))
    0.003
    """
    if prices is None:
        return None
    return prices.cost(*batch, batch=True) + prices.cost(*live)


def batch_cost_note(batch_discount: float | None, endpoint: str = "the endpoint") -> str:
    """How a ``--batch`` command's ``cost`` was counted (``batch_discount`` None: the
    ``endpoint`` has no prices, no cost)."""
    if batch_discount is None:
        return f"no cost: {endpoint} has no prices"
    return (
        "tokens the batches answered in this command at the batch price (prices x "
        f"(1 - batch_discount {batch_discount:g})), live calls at the full price; "
        "answers taken from the call cache cost nothing"
    )


def pass_json(
    batches: list[BatchReport],
    missing: list[dict[str, Any]],
    pending: int,
    *,
    batch_tokens: tuple[int, int],
    live_calls: int,
    live_tokens: tuple[int, int],
    cost: float | None,
    cost_note: str,
) -> dict[str, Any]:
    """The part of a ``--batch`` command's JSON that every stage shares: its batches, the
    calls left without an answer, those waiting, the (prompt, completion) tokens paid at
    the batch price and live, and their cost."""
    return {
        "batches": [b.to_json() for b in batches],
        "missing": missing,
        "pending": pending,
        "batch_tokens": {"prompt": batch_tokens[0], "completion": batch_tokens[1]},
        "live_calls": live_calls,
        "live_tokens": {"prompt": live_tokens[0], "completion": live_tokens[1]},
        "cost": cost,
        "cost_note": cost_note,
    }
