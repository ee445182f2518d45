"""The budget behind ``--max-cost``: the most a run may spend, reserved call by call at its
worst case (``prompt_token_bound``) and settled at its real cost, the gate that holds calls
to it, what a run has paid so far, and the line a run stopped by it ends with."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, func

from judge.errors import ConfigError, InvalidInputError, NotFoundError
from judge.hashing import Messages
from judge.prices import Prices, check_amount, live_cost, missing_prices_message
from judge.store.tables import (
    AuditAnswer,
    AuditRun,
    CallCache,
    GenerationRun,
    JudgeRun,
    Judgment,
    Response,
)

# Margins for what a chat template adds around the text (role markers, special tokens, a
# default system prompt some templates insert): OpenAI counts 3 per message + 3 per reply,
# ChatML (Qwen, SmolLM2) and Llama 3 about 5 per message; SmolLM2's default system prompt
# about 20. Used only by the budget's upper bound, where too many is safe and too few is not.
TEMPLATE_TOKENS_PER_MESSAGE = 8


TEMPLATE_TOKENS_PER_CALL = 64


def prompt_token_bound(messages: Messages) -> int:
    """An upper bound on the prompt tokens of one call: the UTF-8 bytes of its text (a token
    of a byte-level BPE or SentencePiece tokenizer, as chat models use, covers at least one
    byte) plus generous chat-template margins."""
    text = sum(len((m.get("content") or "").encode()) for m in messages)
    return text + TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + TEMPLATE_TOKENS_PER_CALL


class Budget:
    """The most a run may spend, shared by its worker threads.

    Before a call a worker reserves its worst-case cost (``reservation``); a refusal means
    the call must not be made. After the call it settles: the reservation is replaced by the
    real cost (0 for a call that failed without a reply or came from the cache). The first
    refusal exhausts the budget for good, so a run stops cleanly instead of skipping large
    calls and going on with small ones; what finished is kept and the run resumes later.

    Amounts are kept as exact fractions of the floats given, so reservations and settlements
    cancel exactly; a total within a billionth of ``max_cost`` counts as within it (float
    rounding, e.g. 5 x 0.006 against 0.03).
    """

    def __init__(
        self,
        max_cost: float,
        prices: Prices | None,
        *,
        endpoint: str = "NAME",
        spent_before: float = 0.0,
    ) -> None:
        if prices is None:
            raise ConfigError(
                f"--max-cost needs the prices of endpoint {endpoint!r}: "
                + missing_prices_message(endpoint)
            )
        if not (isinstance(max_cost, int | float) and math.isfinite(max_cost) and max_cost >= 0):
            raise InvalidInputError(f"--max-cost must be a number >= 0, got {max_cost!r}")
        self.max_cost = float(max_cost)
        self.prices = prices
        self._max = Fraction(max_cost)
        check_amount("spent_before", spent_before)
        self._spent = Fraction(spent_before)
        """What the run spent in all: before this pass (a bound kept with the run) and in it."""
        self._reserved = Fraction(0)
        self._refused = 0
        self._lock = threading.Lock()

    def reservation(self, messages: Messages, *, max_tokens: int, batch: bool = False) -> float:
        """The worst-case cost of one call: the bound on its prompt tokens
        (``prompt_token_bound``) in, ``max_tokens`` out."""
        return self.prices.cost(prompt_token_bound(messages), max_tokens, batch=batch)

    def _fits(self, total: Fraction) -> bool:
        return total <= self._max or math.isclose(total, self._max, rel_tol=1e-9)

    def reserve(self, estimated_cost: float) -> bool:
        """Hold ``estimated_cost`` for one call; False (and the budget exhausted) when what is
        spent, held and this would pass ``max_cost``, or the budget is already exhausted."""
        check_amount("estimated_cost", estimated_cost)
        amount = Fraction(estimated_cost)
        with self._lock:
            if self._refused or not self._fits(self._spent + self._reserved + amount):
                self._refused += 1
                return False
            self._reserved += amount
            return True

    def settle(self, reserved: float, actual: float) -> None:
        """Replace a reservation of ``reserved`` by the call's ``actual`` cost."""
        check_amount("reserved", reserved)
        check_amount("actual", actual)
        amount = Fraction(reserved)
        with self._lock:
            if amount > self._reserved:
                raise ValueError(
                    f"settling {reserved!r}, but only {float(self._reserved)!r} is reserved"
                )
            self._reserved -= amount
            self._spent += Fraction(actual)

    @property
    def spent(self) -> float:
        with self._lock:
            return float(self._spent)

    @property
    def reserved(self) -> float:
        with self._lock:
            return float(self._reserved)

    @property
    def refused(self) -> int:
        """Reservations refused: calls not made because of the budget."""
        with self._lock:
            return self._refused

    @property
    def exhausted(self) -> bool:
        """A reservation was refused: no further call is made."""
        with self._lock:
            return self._refused > 0

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "max_cost": self.max_cost,
                "spent": float(self._spent),
                "reserved": float(self._reserved),
                "refused": self._refused,
                "exhausted": self._refused > 0,
            }


class ReportedTokens(Protocol):
    """What a finished call reported (``judge.models.client.Completion`` has both)."""

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...


class BudgetGate:
    """``--max-cost`` for calls made through the call cache (``judge.models.cache``'s
    ``CallGate``): a call goes out only while its worst-case cost fits the budget
    (``Budget.reservation``: the bound on its prompt tokens in, ``max_tokens`` out);
    afterwards the reservation becomes the call's real cost, at the live price. A call the
    cache answers never reaches the gate and costs nothing. Generation, audit and judge runs
    share it, so a budget means the same for every kind of run."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def open(self, messages: list[dict[str, str]], max_tokens: int) -> float | None:
        held = self.budget.reservation(messages, max_tokens=max_tokens)
        return held if self.budget.reserve(held) else None

    def close(self, held: float, done: ReportedTokens | None) -> None:
        spent = 0.0
        if done is not None:
            spent = self.budget.prices.cost(done.prompt_tokens, done.completion_tokens)
        self.budget.settle(held, spent)


def budget_stop_detail(budget: Budget, made: int, planned: int, what: str, command: str) -> str:
    """The status line of a run a budget stopped: after how many of its ``planned`` calls
    (``made``: the calls the run made, stored, as ``paid_calls`` counts them, and ``planned``
    those plus the ones not made; results the call cache served are neither), ``what``:
    answers, judgments; what it spent in all, and that ``command`` run again with a higher
    bound goes on.

    >>> b = Budget(0.5, Prices(1, 1))
    >>> budget_stop_detail(b, 7, 3000, "judgments", "judge").split(" (")[0]
    'stopped at the cost bound after 7 of 3,000 calls'
    """
    return (
        f"stopped at the cost bound after {made:,} of {planned:,} calls (--max-cost "
        f"{budget.max_cost:g} for the run, spent {budget.spent:.4f} in all, "
        f"{planned - made:,} {what} not made); run the same {command} command again with a "
        "higher --max-cost to go on (the bound holds for the run as a whole, across reruns)"
    )


def run_budget(
    run: Any, budget: Budget | None, prices: Prices | None, spent: float, *, split: bool = False
) -> Budget | None:
    """The budget of a pass over ``run`` (a generation, judge or audit run's row, in the
    caller's session): ``budget`` (a --max-cost given now) becomes the run's bound, stored
    with it; without one, the bound an earlier command stored holds; either way less what
    the run's stored results cost already (``spent``), so that rerunning does not spend the
    bound again. ``split``: a part of a run split between workers, which refuses a bound
    (each worker would hold its own). None: no bound."""
    limit = budget.max_cost if budget is not None else run.max_cost
    if limit is None:
        return None
    if split:
        raise InvalidInputError(
            f"{run.run_kind} run {run.id} is bound by --max-cost {limit:g}, kept in one "
            "process, and Celery workers split this job between several: run it on one "
            "machine (no [workers] broker_url)"
        )
    run.max_cost = limit
    endpoint = run.endpoint_name
    return Budget(limit, budget.prices if budget else prices, endpoint=endpoint, spent_before=spent)


_RESULTS: dict[str, tuple[Any, Any, Any]] = {
    "generation": (GenerationRun, Response, "run_id"),
    "judge": (JudgeRun, Judgment, "judge_run_id"),
    "audit": (AuditRun, AuditAnswer, "run_id"),
}


@dataclass(frozen=True)
class Paid:
    """The stored results of a run whose calls the run itself made (``paid_calls``): how
    many, and their tokens."""

    results: int
    prompt_tokens: int
    completion_tokens: int

    def cost(self, prices: Prices | None) -> float:
        """Their cost at the live price (0 without prices: nothing can be counted)."""
        return live_cost(prices, self.prompt_tokens, self.completion_tokens) or 0.0


def paid_calls(session: Session, kind: str, run_id: int) -> Paid:
    """What a ``kind`` run (generation, judge or audit) spent on its stored results, for
    ``--max-cost``: only the calls it made count, not the answers the call cache served it,
    which cost nothing. A stored row does not say whether its reply came from the cache, so
    a result counts when the cache row of its call was written after the run was created
    (a reply cached before then was paid by another run), once per call key (two items with
    the same prompt share one call). A repair call behind a judgment counts with the
    judgment's first call. Should two runs make the same new call at once, both count it:
    the bound errs towards spending less, never more."""
    run_table, table, run_column = _RESULTS[kind]
    run = session.get(run_table, run_id)
    if run is None:
        raise NotFoundError(f"no {kind} run {run_id}")
    made_here = sa_select(CallCache.key).where(  # type: ignore[call-overload]
        col(CallCache.created_at) >= run.created_at
    )
    per_call = (
        sa_select(
            func.max(col(table.prompt_tokens)).label("p"),
            func.max(col(table.completion_tokens)).label("c"),
        )
        .where(getattr(table, run_column) == run_id, col(table.cache_key).in_(made_here))
        .group_by(col(table.cache_key))
        .subquery()
    )
    n, prompt, completion = session.execute(
        sa_select(
            func.count(), func.coalesce(func.sum(per_call.c.p), 0),
            func.coalesce(func.sum(per_call.c.c), 0),
        ).select_from(per_call)
    ).one()  # fmt: skip
    return Paid(int(n), int(prompt), int(completion))
