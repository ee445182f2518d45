"""A stage's pass over its calls through the Batch API, on ``judge.models.batching``: the
calls sent and collected (``batch_pass``), the client and call cache the stage's ordinary
live pass then runs with, the live calls it makes (``LiveTally``), how the run stands while
batches still run (``waiting_outcome``), and what a generation or audit command reports
(``BatchRunResult``; a judge command reports ``judge.grading.batched.BatchJudgeResult``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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


@dataclass
class BatchPass:
    """A stage's calls after their batches: what the batches did (``got``), the client the
    stage's live pass uses in their place (``BatchAnswers``), the call cache with their
    answers read in, and the tally of the calls that pass makes live."""

    got: Collected
    client: BatchAnswers
    cache: CallCacheView
    tally: LiveTally

    def waiting(self, key: str) -> bool:
        """Whether the call is in a batch still running (only when not waiting)."""
        return key in self.got.pending

    def keep_raw_line(
        self, row: dict[str, Any], outcome: CallOutcome, column: str = "error"
    ) -> dict[str, Any]:
        """A failed call's row with the batch's output line added to ``column`` when that
        line could not be read: kept whole with the row it fails, never read as an answer."""
        raw = failed_raw(self.got.failed, [outcome.key]) if outcome.failure else None
        if raw is not None:
            row[column] = f"{row[column]}; the line as it came: {raw}"
        return row

    def absorb(self, later: BatchPass) -> None:
        """Count a later pass of the same command (a second turn) in this one's result:
        its batches, answers, failures and live calls."""
        merge(self.got, later.got)
        self.tally.add_counts(later.tally)

    def cost(self, prices: Prices | None) -> float | None:
        """What this command paid: the batches' answers at the batch price, the live calls
        at the full price (None without prices)."""
        got, live = self.got, self.tally
        return pass_cost(
            prices,
            (got.prompt_tokens, got.completion_tokens),
            (live.prompt_tokens, live.completion_tokens),
        )

    def result(
        self,
        kind: str,
        run_id: int,
        *,
        tasks: int,
        flags: dict[str, int],
        missing: list[Unanswered],
        pending: int,
        prices: Prices | None,
        status: str,
        detail: str | None,
    ) -> BatchRunResult:
        """The command's result (``BatchRunResult``) from this pass and the run's ending."""
        got, live = self.got, self.tally
        return BatchRunResult(
            kind=kind,
            run_id=run_id,
            tasks=tasks,
            flags=flags,
            batches=got.batches,
            missing=missing,
            pending=pending,
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


def batch_pass(
    engine: Engine,
    client: ModelClient,
    api: BatchApi,
    owner: BatchOwner,
    calls: Sequence[BatchCall],
    *,
    options: BatchOptions = BatchOptions(),
    progress: Progress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> BatchPass:
    """``send_batches`` for a stage whose every call is a first call (no repairs): the
    calls a batch failed may go out live when ``options.retry_live``, any other call not
    answered by a batch is failed with why (``BatchAnswers``)."""
    got = send_batches(engine, api, owner, calls, options=options, progress=progress, sleep=sleep)
    answers = BatchAnswers(
        client, got.failed, live=lambda key: options.retry_live and key in got.failed
    )
    cache = CallCacheView(engine, client.model)
    preload(engine, cache, [call.key for call in calls])
    return BatchPass(got, answers, cache, LiveTally())


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
