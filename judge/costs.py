"""What runs cost: an endpoint's prices, a judge run's tokens and cost by rubric and item, the
tokens and cost of a generation or audit run's answers, an estimate before anything is sent
(``--dry-run``), and the budget behind ``--max-cost`` with the gate that holds calls to it.

Every cost is given twice: at the endpoint's prices for calls sent one by one (live), and at
the batch price (``batch_discount`` taken off both prices), what the same tokens cost through
a provider's batch API. Prices are per million tokens in whatever currency the user wrote
them in; nothing here converts currencies or rounds (reports round for display). Without
prices a cost is None ("unknown"), never 0. Every figure that is a guess says how it was
guessed, so a report never shows an assumption as a measurement.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Protocol

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, func

from judge.config import EndpointConfig
from judge.errors import ConfigError, InvalidInputError, NotFoundError
from judge.hashing import Messages
from judge.store.queries import get_judge_run
from judge.store.tables import (
    AuditAnswer,
    AuditRun,
    CallCache,
    GenerationRun,
    Item,
    JudgeRun,
    Judgment,
    Response,
)

MTOK = 1_000_000
CHARS_PER_TOKEN = 4
"""The rule of thumb for English text when no ratio was measured (OpenAI's own guide)."""
MIN_MEASURED = 10
"""Fewest stored calls a measured ratio or typical reply length is taken from."""
# Margins for what a chat template adds around the text (role markers, special tokens, a
# default system prompt some templates insert): OpenAI counts 3 per message + 3 per reply,
# ChatML (Qwen, SmolLM2) and Llama 3 about 5 per message; SmolLM2's default system prompt
# about 20. Used only by the budget's upper bound, where too many is safe and too few is not.
TEMPLATE_TOKENS_PER_MESSAGE = 8
TEMPLATE_TOKENS_PER_CALL = 64


def _check_amount(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class Prices:
    """One endpoint's prices per million tokens, and the share a batch API takes off both.

    >>> Prices(2.50, 10.00).cost(1_200, 300)
    0.006
    >>> Prices(2.50, 10.00, batch_discount=0.5).cost(1_200, 300, batch=True)
    0.003
    """

    input_per_mtok: float
    output_per_mtok: float
    batch_discount: float = 0.0

    def __post_init__(self) -> None:
        _check_amount("input_per_mtok", self.input_per_mtok)
        _check_amount("output_per_mtok", self.output_per_mtok)
        if not (isinstance(self.batch_discount, int | float) and 0 <= self.batch_discount < 1):
            raise ValueError(f"batch_discount must be in [0, 1), got {self.batch_discount!r}")

    @classmethod
    def of(cls, endpoint: EndpointConfig) -> Prices | None:
        """The endpoint's prices; None when either price is not set (cost unknown)."""
        if endpoint.input_price_per_mtok is None or endpoint.output_price_per_mtok is None:
            return None
        return cls(
            endpoint.input_price_per_mtok, endpoint.output_price_per_mtok, endpoint.batch_discount
        )

    def cost(self, prompt_tokens: int, completion_tokens: int, *, batch: bool = False) -> float:
        """The price of ``prompt_tokens`` in and ``completion_tokens`` out; ``batch``: sent
        through a batch API, so ``batch_discount`` comes off."""
        _check_amount("prompt_tokens", prompt_tokens)
        _check_amount("completion_tokens", completion_tokens)
        # One division of the exact-as-possible sum keeps hand-checkable figures exact.
        full = (
            prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok
        ) / MTOK
        return full * (1 - self.batch_discount) if batch else full


def missing_prices_message(endpoint: str) -> str:
    """What to set so that runs of ``endpoint`` have a cost."""
    return (
        f"set input_price_per_mtok and output_price_per_mtok under [endpoints.{endpoint}] in "
        "fairjudge.toml (prices per million tokens, in your currency)"
    )


# -- a judge run's cost -------------------------------------------------------------------


def batch_cost(prices: Prices | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What these tokens cost at the batch price; None without prices (cost unknown)."""
    return None if prices is None else prices.cost(prompt_tokens, completion_tokens, batch=True)


def live_cost(prices: Prices | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What these tokens cost sent call by call; None without prices (cost unknown)."""
    return None if prices is None else prices.cost(prompt_tokens, completion_tokens)


@dataclass(frozen=True)
class Usage:
    """Judgments, model calls and tokens of a group of judgments, and their cost, live and
    at the batch price (None without prices). ``calls`` counts repair calls too."""

    judgments: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    cost_batch: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunCost:
    """A judge run's tokens and cost: in total, per rubric and per item (by item key)."""

    judge_run_id: int
    endpoint: str
    model: str
    prices: Prices | None
    total: Usage
    by_rubric: dict[str, Usage]
    by_item: dict[str, Usage]
    note: str

    def to_json(self) -> dict[str, Any]:
        return {
            "judge_run_id": self.judge_run_id,
            "endpoint": self.endpoint,
            "model": self.model,
            "prices": asdict(self.prices) if self.prices else None,
            "total": self.total.to_json(),
            "by_rubric": {name: u.to_json() for name, u in self.by_rubric.items()},
            "by_item": {key: u.to_json() for key, u in self.by_item.items()},
            "note": self.note,
        }


def judge_run_cost(
    session: Session, judge_run_id: int, prices: Prices | None, *, batch: bool = False
) -> RunCost:
    """Tokens and cost of one judge run, summed in SQL (a run may hold 100k+ judgments).

    The tokens are those the endpoint reported for the calls behind each judgment, repairs
    included. A judgment answered from the call cache carries the tokens of the call that
    filled the cache, so this is what the run's answers cost, not what this run paid.
    Raises NotFoundError for an unknown run.
    """
    jrun = get_judge_run(session, judge_run_id)
    sums = (
        func.count(),
        func.coalesce(func.sum(col(Judgment.calls)), 0),
        func.coalesce(func.sum(col(Judgment.prompt_tokens)), 0),
        func.coalesce(func.sum(col(Judgment.completion_tokens)), 0),
    )
    of_run = col(Judgment.judge_run_id) == judge_run_id

    def usage(n: int, calls: int, prompt: int, completion: int) -> Usage:
        cost = prices.cost(prompt, completion, batch=batch) if prices else None
        return Usage(
            int(n), int(calls), int(prompt), int(completion), cost,
            batch_cost(prices, int(prompt), int(completion)),
        )  # fmt: skip

    total = session.execute(sa_select(*sums).where(of_run)).one()
    rubrics = session.execute(
        sa_select(col(Judgment.rubric), *sums)
        .where(of_run)
        .group_by(col(Judgment.rubric))
        .order_by(col(Judgment.rubric))
    )
    items = session.execute(
        sa_select(col(Item.key), *sums)
        .join(Item, col(Item.id) == col(Judgment.item_id))
        .where(of_run)
        .group_by(col(Item.id), col(Item.key))
        .order_by(col(Item.id))
    )
    if prices is None:
        note = f"No cost: endpoint {jrun.endpoint_name!r} has no prices; "
        note += missing_prices_message(jrun.endpoint_name) + "."
    else:
        note = (
            "Cost at the endpoint's prices of the tokens the endpoint reported for the calls "
            "behind these judgments, repairs included; judgments answered from the call cache "
            "count the tokens of the call that filled it; attempts that failed before a reply "
            "reported no tokens and count nothing. " + batch_note(prices)
        )
    return RunCost(
        judge_run_id=judge_run_id,
        endpoint=jrun.endpoint_name,
        model=jrun.model,
        prices=prices,
        total=usage(*total),
        by_rubric={row[0]: usage(*row[1:]) for row in rubrics},
        by_item={row[0]: usage(*row[1:]) for row in items},
        note=note,
    )


def batch_note(prices: Prices) -> str:
    """What the batch figure means for these prices."""
    if not prices.batch_discount:
        return "The batch price equals the live price: the endpoint sets no batch_discount."
    return (
        f"The batch price is the live price less batch_discount ({prices.batch_discount:g}): "
        "what the same tokens cost through the provider's batch API."
    )


# -- a generation or audit run's cost -------------------------------------------------------


@dataclass(frozen=True)
class AnswersCost:
    """The tokens and cost of a generation run's or an audit run's stored answers (one call
    each), live and at the batch price (None without prices: cost unknown)."""

    kind: str  # "generation" or "audit"
    run_id: int
    endpoint: str
    model: str
    answers: int
    prompt_tokens: int
    completion_tokens: int
    prices: Prices | None
    cost: float | None
    cost_batch: float | None
    note: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # recurses into ``prices``


def answers_cost(session: Session, kind: str, run_id: int, prices: Prices | None) -> AnswersCost:
    """Tokens and cost of a generation run's answers (``kind`` "generation") or an audit
    run's (``kind`` "audit", both turns), summed in SQL: a name audit holds 168,000 answers.
    NotFoundError for an unknown run."""
    run: GenerationRun | AuditRun | None
    if kind == "generation":
        run, table = session.get(GenerationRun, run_id), Response
    elif kind == "audit":
        run, table = session.get(AuditRun, run_id), AuditAnswer  # type: ignore[assignment]
    else:
        raise ValueError(f"kind must be 'generation' or 'audit', got {kind!r}")
    if run is None:
        raise NotFoundError(f"no {kind} run {run_id}")
    n, prompt, completion = session.execute(
        sa_select(
            func.count(),
            func.coalesce(func.sum(col(table.prompt_tokens)), 0),
            func.coalesce(func.sum(col(table.completion_tokens)), 0),
        ).where(col(table.run_id) == run_id)
    ).one()
    prompt, completion = int(prompt), int(completion)
    if prices is None:
        note = f"No cost: endpoint {run.endpoint_name!r} has no prices; "
        note += missing_prices_message(run.endpoint_name) + "."
    else:
        note = (
            "Cost at the endpoint's prices of the tokens it reported for these answers; an "
            "answer taken from the call cache counts the tokens of the call that filled it, a "
            "call that failed counts nothing. " + batch_note(prices)
        )
    if getattr(run, "source", "generated") != "generated":
        note += (
            " These answers were imported or copied, not asked by FairJudge: they count only "
            "the tokens their source reported, if any."
        )
    return AnswersCost(
        kind=kind,
        run_id=run_id,
        endpoint=run.endpoint_name,
        model=run.model,
        answers=int(n),
        prompt_tokens=prompt,
        completion_tokens=completion,
        prices=prices,
        cost=live_cost(prices, prompt, completion),
        cost_batch=batch_cost(prices, prompt, completion),
        note=note,
    )


# -- an estimate before sending ------------------------------------------------------------


@dataclass(frozen=True)
class Measure:
    """A figure an estimate uses, and in words where it came from."""

    value: float
    rule: str


ASSUMED_RATIO = Measure(
    1 / CHARS_PER_TOKEN,
    f"assumed: {CHARS_PER_TOKEN} characters per token (no measured ratio for this model)",
)


def measured_tokens_per_char(session: Session, model: str) -> Measure | None:
    """Prompt tokens per character of ``model``, from the prompts it answered as the model
    under test (``Response.prompt`` is the one message it was sent). None with fewer than
    ``MIN_MEASURED`` such answers.

    Judge prompts are not stored (only their hash), so a judge model that never answered a
    generation run has no measured ratio. The token counts include the chat template's few
    tokens per message, so the ratio errs high, the safe side for an estimate.
    """
    n, tokens, chars = session.execute(
        sa_select(
            func.count(),
            func.coalesce(func.sum(col(Response.prompt_tokens)), 0),
            func.coalesce(func.sum(func.length(col(Response.prompt))), 0),
        )
        .join(GenerationRun, col(GenerationRun.id) == col(Response.run_id))
        .where(
            col(GenerationRun.model) == model,
            # Imported answers carry whatever counts their source gave, if any.
            col(GenerationRun.source) == "generated",
            col(Response.prompt_tokens) > 0,
        )
    ).one()
    if n < MIN_MEASURED or not chars:
        return None
    ratio = int(tokens) / int(chars)
    return Measure(
        ratio,
        f"measured: {ratio:.3f} tokens per character ({1 / ratio:.2f} characters per token) "
        f"from {n} prompts {model} answered as the model under test",
    )


def measured_completion_tokens(session: Session, model: str) -> Measure | None:
    """Mean completion tokens per call of ``model``'s earlier judgments (those that got a
    reply); None with fewer than ``MIN_MEASURED`` of them."""
    n, calls, tokens = session.execute(
        sa_select(
            func.count(),
            func.coalesce(func.sum(col(Judgment.calls)), 0),
            func.coalesce(func.sum(col(Judgment.completion_tokens)), 0),
        ).where(col(Judgment.model) == model, col(Judgment.completion_tokens) > 0)
    ).one()
    if n < MIN_MEASURED or not calls:
        return None
    mean = int(tokens) / int(calls)
    return Measure(mean, f"measured: {mean:.1f} completion tokens per call over {n} judgments")


def measured_answer_tokens(session: Session, model: str) -> Measure | None:
    """Mean completion tokens of ``model``'s earlier answers as the model under test (those
    with tokens reported); None with fewer than ``MIN_MEASURED`` of them."""
    n, tokens = session.execute(
        sa_select(func.count(), func.coalesce(func.sum(col(Response.completion_tokens)), 0))
        .join(GenerationRun, col(GenerationRun.id) == col(Response.run_id))
        .where(
            col(GenerationRun.model) == model,
            col(GenerationRun.source) == "generated",
            col(Response.completion_tokens) > 0,
        )
    ).one()
    if n < MIN_MEASURED:
        return None
    mean = int(tokens) / int(n)
    return Measure(mean, f"measured: {mean:.1f} completion tokens per answer over {n} answers")


def measured_audit_tokens(session: Session, model: str, suite: str) -> Measure | None:
    """Mean completion tokens of ``model``'s earlier first-turn answers to the ``suite``
    audit (answers differ by suite: a number, a name, sixty lines); None with fewer than
    ``MIN_MEASURED`` of them."""
    n, tokens = session.execute(
        sa_select(func.count(), func.coalesce(func.sum(col(AuditAnswer.completion_tokens)), 0))
        .join(AuditRun, col(AuditRun.id) == col(AuditAnswer.run_id))
        .where(
            col(AuditRun.model) == model,
            col(AuditRun.suite) == suite,
            col(AuditAnswer.turn) == "main",
            col(AuditAnswer.completion_tokens) > 0,
        )
    ).one()
    if n < MIN_MEASURED:
        return None
    mean = int(tokens) / int(n)
    return Measure(
        mean, f"measured: {mean:.1f} completion tokens per answer over {n} {suite} audit answers"
    )


@dataclass(frozen=True)
class Estimate:
    """Calls, tokens and cost of sending some prompts, before sending them.

    ``prompt_tokens`` is estimated from characters (``tokens_per_char``, said how in
    ``prompt_rule``); ``completion_tokens_max`` assumes every reply runs to ``max_tokens``
    (a bound); ``completion_tokens_typical`` is set only when measured. Costs are None
    without prices: ``cost_min`` prompts alone, ``cost_typical`` with typical replies,
    ``cost_max`` with every reply at ``max_tokens``; the ``*_batch`` ones are the same tokens
    at the batch price (``batch_discount`` off). ``batch``: ``cost_*`` are batch prices too.
    """

    calls: int
    prompt_chars: int
    prompt_tokens: int
    completion_tokens_max: int
    completion_tokens_typical: int | None
    tokens_per_char: float
    prompt_rule: str
    completion_rule: str
    prices: Prices | None
    batch: bool
    cost_min: float | None
    cost_typical: float | None
    cost_max: float | None
    note: str
    cost_min_batch: float | None = None
    cost_typical_batch: float | None = None
    cost_max_batch: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # recurses into ``prices``


def estimate(
    prompts: Iterable[Messages],
    *,
    max_tokens: int,
    prices: Prices | None,
    tokens_per_char: Measure | None = None,
    completion_tokens: Measure | None = None,
    batch: bool = False,
    repairs: bool = True,
    unknown_prompt_tokens: int = 0,
) -> Estimate:
    """Estimate one call per prompt in ``prompts`` (each a list of chat messages).

    ``tokens_per_char``: a measured ratio (``measured_tokens_per_char``); without one, 4
    characters per token. ``completion_tokens``: a typical reply length
    (``measured_completion_tokens``), or None to give the bound only. ``repairs``: an
    unreadable reply gets a repair call (judging), which the note says comes on top.
    ``unknown_prompt_tokens``: prompt tokens whose text is not known yet (an earlier reply
    of the same conversation, at its bound), added to the estimate from characters.

    >>> e = estimate([[{"role": "user", "content": "x" * 400}]], max_tokens=100, prices=None)
    >>> e.calls, e.prompt_tokens, e.completion_tokens_max, e.cost_max
    (1, 100, 100, None)
    """
    if max_tokens < 1:
        raise InvalidInputError(f"max_tokens must be at least 1, got {max_tokens}")
    ratio = tokens_per_char or ASSUMED_RATIO
    if not (math.isfinite(ratio.value) and ratio.value > 0):
        raise InvalidInputError(f"tokens_per_char must be a number > 0, got {ratio.value!r}")
    calls = chars = 0
    for messages in prompts:
        calls += 1
        chars += sum(len(m.get("content") or "") for m in messages)
    _check_amount("unknown_prompt_tokens", unknown_prompt_tokens)
    prompt_tokens = math.ceil(chars * ratio.value) + unknown_prompt_tokens
    most = calls * max_tokens
    typical = None
    if completion_tokens is not None:
        typical = min(most, math.ceil(calls * completion_tokens.value))

    def cost(completion: int | None, *, at_batch: bool = batch) -> float | None:
        if prices is None or completion is None:
            return None
        return prices.cost(prompt_tokens, completion, batch=at_batch)

    note = (
        f"Prompt tokens {ratio.rule}"
        + (
            f", plus {unknown_prompt_tokens:,} tokens of earlier replies not known yet (at "
            "their bound, max_tokens each)"
            if unknown_prompt_tokens
            else ""
        )
        + f". Completion tokens: at most max_tokens ({max_tokens}) per call"
        + (f"; typically {completion_tokens.rule}" if completion_tokens else "")
        + ". One call per prompt"
        + (": a repair call for an unreadable reply would come on top." if repairs else ".")
    )
    if prices is None:
        note += " No cost: the endpoint has no prices (input_price_per_mtok, "
        note += "output_price_per_mtok)."
    else:
        note += " " + batch_note(prices)
    return Estimate(
        calls=calls,
        prompt_chars=chars,
        prompt_tokens=prompt_tokens,
        completion_tokens_max=most,
        completion_tokens_typical=typical,
        tokens_per_char=ratio.value,
        prompt_rule=ratio.rule,
        completion_rule=completion_tokens.rule if completion_tokens else "bound only",
        prices=prices,
        batch=batch,
        cost_min=cost(0),
        cost_typical=cost(typical),
        cost_max=cost(most),
        note=note,
        cost_min_batch=cost(0, at_batch=True),
        cost_typical_batch=cost(typical, at_batch=True),
        cost_max_batch=cost(most, at_batch=True),
    )


# -- the budget behind --max-cost ----------------------------------------------------------


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
        _check_amount("spent_before", spent_before)
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
        _check_amount("estimated_cost", estimated_cost)
        amount = Fraction(estimated_cost)
        with self._lock:
            if self._refused or not self._fits(self._spent + self._reserved + amount):
                self._refused += 1
                return False
            self._reserved += amount
            return True

    def settle(self, reserved: float, actual: float) -> None:
        """Replace a reservation of ``reserved`` by the call's ``actual`` cost."""
        _check_amount("reserved", reserved)
        _check_amount("actual", actual)
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


_RESULTS: dict[str, tuple[Any, Any, Any]] = {
    "generation": (GenerationRun, Response, "run_id"),
    "judge": (JudgeRun, Judgment, "judge_run_id"),
    "audit": (AuditRun, AuditAnswer, "run_id"),
}


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


def make_budget(max_cost: float | None, prices: Prices | None, endpoint: str) -> Budget | None:
    """The budget of ``--max-cost`` (None: no budget); ConfigError before any call when the
    endpoint has no prices."""
    if max_cost is None:
        return None
    return Budget(max_cost, prices, endpoint=endpoint)
