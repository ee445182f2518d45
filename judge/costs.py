"""What runs cost: a judge run's tokens and cost by rubric and item, the tokens and cost of a
generation or audit run's answers, an estimate before anything is sent (``--dry-run``), and
``make_budget`` for ``--max-cost``. The prices themselves are in ``judge.prices``; the budget
and the gate that holds calls to it in ``judge.budgets``.

Every cost is given twice: at the endpoint's prices for calls sent one by one (live), and at
the batch price (``batch_discount`` taken off both prices), what the same tokens cost through
a provider's batch API. Prices are per million tokens in whatever currency the user wrote
them in; nothing here converts currencies or rounds (reports round for display). Without
prices a cost is None ("unknown"), never 0. Every figure that is a guess says how it was
guessed, so a report never shows an assumption as a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, func

from judge.budgets import Budget
from judge.errors import InvalidInputError, NotFoundError
from judge.hashing import Messages
from judge.prices import Prices, batch_cost, check_amount, live_cost, missing_prices_message
from judge.store.queries import get_judge_run
from judge.store.tables import (
    AuditAnswer,
    AuditRun,
    GenerationRun,
    Item,
    Judgment,
    Response,
)

CHARS_PER_TOKEN = 4
"""The rule of thumb for English text when no ratio was measured (OpenAI's own guide)."""
MIN_MEASURED = 10
"""Fewest stored calls a measured ratio or typical reply length is taken from."""


# -- a judge run's cost -------------------------------------------------------------------


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
    cached_prompt_tokens: int = 0
    """Of ``prompt_tokens``, those the endpoint served from its prompt cache (priced at
    ``cached_input_price_per_mtok``)."""

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
        func.coalesce(func.sum(col(Judgment.cached_prompt_tokens)), 0),
    )
    of_run = col(Judgment.judge_run_id) == judge_run_id

    def usage(n: int, calls: int, prompt: int, completion: int, cached: int) -> Usage:
        prompt, completion, cached = int(prompt), int(completion), int(cached)
        cost = prices.cost(prompt, completion, batch=batch, cached=cached) if prices else None
        return Usage(
            int(n), int(calls), prompt, completion, cost,
            batch_cost(prices, prompt, completion, cached), cached,
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
            "reported no tokens and count nothing. " + batch_note(prices) + cached_note(prices)
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


def cached_note(prices: Prices) -> str:
    """What the cached prompt tokens cost at these prices."""
    if prices.cached_input_per_mtok is None:
        return (
            " Prompt tokens the endpoint served from its prompt cache cost the input price: "
            "the endpoint sets no cached_input_price_per_mtok."
        )
    return (
        f" Prompt tokens the endpoint served from its prompt cache cost "
        f"{prices.cached_input_per_mtok:g} per million (cached_input_price_per_mtok)."
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
    cached_prompt_tokens: int = 0
    """Of ``prompt_tokens``, those served from the endpoint's prompt cache."""

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
    n, prompt, completion, cached = session.execute(
        sa_select(
            func.count(),
            func.coalesce(func.sum(col(table.prompt_tokens)), 0),
            func.coalesce(func.sum(col(table.completion_tokens)), 0),
            func.coalesce(func.sum(col(table.cached_prompt_tokens)), 0),
        ).where(col(table.run_id) == run_id)
    ).one()
    prompt, completion, cached = int(prompt), int(completion), int(cached)
    if prices is None:
        note = f"No cost: endpoint {run.endpoint_name!r} has no prices; "
        note += missing_prices_message(run.endpoint_name) + "."
    else:
        note = (
            "Cost at the endpoint's prices of the tokens it reported for these answers; an "
            "answer taken from the call cache counts the tokens of the call that filled it, a "
            "call that failed counts nothing. " + batch_note(prices) + cached_note(prices)
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
        cost=live_cost(prices, prompt, completion, cached),
        cost_batch=batch_cost(prices, prompt, completion, cached),
        note=note,
        cached_prompt_tokens=cached,
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
    cached_prompt_tokens: int = 0
    """At most this many of ``prompt_tokens`` could come from the provider's prompt cache:
    each prompt's opening shared with the prompt before it, where that opening is at least
    the endpoint's ``cache_min_prompt_tokens`` long (``cacheable_chars``)."""
    cost_min_cached: float | None = None
    cost_typical_cached: float | None = None
    cost_max_cached: float | None = None
    """The live costs with ``cached_prompt_tokens`` at the cached price (None without a
    ``cached_input_price_per_mtok``: then they equal the live costs)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # recurses into ``prices``


def _joined(messages: Messages) -> str:
    """A prompt as one text, in the order a provider reads it (role, then content)."""
    return "".join(f"\x00{m.get('role', '')}\x00{m.get('content') or ''}" for m in messages)


def shared_opening(a: str, b: str) -> int:
    """The length of the longest opening ``a`` and ``b`` share, found by halving (slice
    comparisons run in C, so a 168,000-prompt dry run stays quick).

    >>> shared_opening("rubric: ICS. answer 1", "rubric: ICS. answer 2")
    20
    >>> shared_opening("abc", ""), shared_opening("abc", "abd"), shared_opening("ab", "ab")
    (0, 2, 2)
    """
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _count_prompts(
    prompts: Iterable[Messages], tokens_per_char: float, least: int | None
) -> tuple[int, int, int]:
    """Calls, characters, and the tokens of openings shared with the prompt before (counted
    from ``least`` tokens on; None: not counted) of ``prompts``, read once."""
    calls = chars = cached = 0
    before = ""
    for messages in prompts:
        calls += 1
        chars += sum(len(m.get("content") or "") for m in messages)
        if least is not None:
            text = _joined(messages)
            opening = math.floor(shared_opening(before, text) * tokens_per_char)
            cached += opening if opening >= max(least, 1) else 0
            before = text
    return calls, chars, cached


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
    least = prices.cache_min_tokens if prices is not None else None
    calls, chars, cached_tokens = _count_prompts(prompts, ratio.value, least)
    check_amount("unknown_prompt_tokens", unknown_prompt_tokens)
    prompt_tokens = math.ceil(chars * ratio.value) + unknown_prompt_tokens
    cached_tokens = min(cached_tokens, prompt_tokens)
    most = calls * max_tokens
    typical = None
    if completion_tokens is not None:
        typical = min(most, math.ceil(calls * completion_tokens.value))

    def cost(completion: int | None, *, at_batch: bool = batch, cached: int = 0) -> float | None:
        if prices is None or completion is None:
            return None
        return prices.cost(prompt_tokens, completion, batch=at_batch, cached=cached)

    priced_cached = prices is not None and prices.cached_input_per_mtok is not None

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
        note += (
            f" Up to {cached_tokens:,} prompt tokens open as the prompt before them does (an "
            f"opening of at least cache_min_prompt_tokens, {prices.cache_min_tokens:,}): a "
            "provider's prompt cache could serve them"
            + (" at the cached price (the *_cached costs)." if priced_cached else ".")
        )
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
        cached_prompt_tokens=cached_tokens,
        cost_min_cached=cost(0, at_batch=False, cached=cached_tokens) if priced_cached else None,
        cost_typical_cached=(
            cost(typical, at_batch=False, cached=cached_tokens) if priced_cached else None
        ),
        cost_max_cached=cost(most, at_batch=False, cached=cached_tokens) if priced_cached else None,
    )


# -- the budget behind --max-cost ----------------------------------------------------------


def make_budget(max_cost: float | None, prices: Prices | None, endpoint: str) -> Budget | None:
    """The budget of ``--max-cost`` (None: no budget); ConfigError before any call when the
    endpoint has no prices."""
    if max_cost is None:
        return None
    return Budget(max_cost, prices, endpoint=endpoint)
