"""Building a benchmark with a model: asking an endpoint for test items cell by cell
(``fairjudge dataset generate`` for one cell, ``dataset plan`` for the whole grid).

A *cell* is (stage, sensitive factor, scenario). Each call asks for up to ``items_per_call``
items of one cell with the prompt of ``prompts/dataset_generation*`` and the reply's JSON
schema; ``judge.authoring.replies`` reads the reply and stores the call whole. Calls go through
the call cache (``cached_complete``) with the cell's *attempt* number as the sample index and
seed, so the same attempt asked again costs nothing.

How many calls. A cell that needs N new items gets ceil(N / items_per_call) calls at once;
while replies come back rejected or as duplicates, it gets further calls for what is still
missing, at most ``MAX_ATTEMPTS_FACTOR`` (3) times the calls it first needed. A call that
fails for good (the client has retried it) ends its cell's calls for this run: the endpoint is
struggling, and a rerun retries it. The summary says which cells fell short and why.

Resuming. Attempts stored for a cell are never asked again; a rerun uses the lowest attempt
numbers not stored (a failed attempt counts as not stored, so it is retried first). ``plan``
counts what each cell holds already, every item except rejected ones (drafts count), and
asks only for the shortfall; the same command run again after it finished makes no call.
One process at a time generates into a dataset (a lease, as for runs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from judge.authoring.replies import (
    FAILED,
    OK,
    UNREADABLE,
    Cell,
    ReadReply,
    read_reply,
)
from judge.authoring.stored_calls import (
    CallRecord,
    CallWriter,
    StoredCall,
    cell_counts,
    counts_by_kind,
    free_attempts,
    rejection_rows,
    split_asks,
    stored_attempts,
)
from judge.authoring.waves import CellCall, CellPrompts, CellState, next_wave
from judge.costs import MIN_MEASURED, Measure, estimate, measured_tokens_per_char
from judge.data.taxonomy import Taxonomy
from judge.errors import InvalidInputError
from judge.models.cache import CallCacheView, CallKeys, CallOutcome, cached_complete
from judge.models.client import ModelClient
from judge.prices import Prices
from judge.progress import Progress
from judge.prompts import PromptBook
from judge.runs import run_concurrently, run_lease
from judge.store.engine import session_scope
from judge.store.tables import Dataset, ItemGenerationCall
from judge.vocab import STAGES

DEFAULT_ITEMS_PER_CALL = 5
DEFAULT_TEMPERATURE = 0.9
"""Above 0 so that attempts (seeds) give different items; at 0 most endpoints answer every
attempt alike, and all but the first come back as duplicates."""
TOKENS_PER_ITEM = 400
"""Default ``max_tokens`` per item asked: an S2 item (two story openings of about 60 words,
what changed, the expected continuation) is about 250 tokens of JSON; 400 leaves room."""
MAX_ATTEMPTS_FACTOR = 3
"""A cell gets at most this many times the calls it first needed in one run."""
LEASE_KIND = "dataset_generation"
"""``RunLease.kind`` of a dataset being generated into (its ``run_id`` is the dataset id)."""


@dataclass(frozen=True)
class Options:
    """How items are asked for."""

    items_per_call: int = DEFAULT_ITEMS_PER_CALL
    temperature: float = DEFAULT_TEMPERATURE
    max_tokens: int | None = None
    """Longest reply; None: ``TOKENS_PER_ITEM`` per item a call may ask for."""
    threshold: float | None = None
    """Jaccard similarity at or above which an item is a near-duplicate; None:
    ``judge.data.dedupe.DEFAULT_THRESHOLD`` (0.5)."""

    def __post_init__(self) -> None:
        if isinstance(self.items_per_call, bool) or not 1 <= self.items_per_call <= 50:
            raise InvalidInputError(
                f"--items-per-call must be between 1 and 50, got {self.items_per_call!r}"
            )
        if not 0 <= self.temperature <= 2:
            raise InvalidInputError(f"--temperature must be in [0, 2], got {self.temperature!r}")
        if self.max_tokens is not None and self.max_tokens < 16:
            raise InvalidInputError(f"--max-tokens must be at least 16, got {self.max_tokens}")

    @property
    def tokens(self) -> int:
        return self.max_tokens or TOKENS_PER_ITEM * self.items_per_call

    def params(self, attempt: int) -> dict[str, Any]:
        """The parameters an item's provenance records."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.tokens,
            "seed": attempt,
            "items_per_call": self.items_per_call,
        }


# -- which cells ---------------------------------------------------------------------------


def check_cell(taxonomy: Taxonomy, stage: str, factor: str, scenario: str) -> Cell:
    """The cell named on a command line, or InvalidInputError before any call: an unknown
    stage, factor or scenario (with the scenario id it most likely means)."""
    _check_stages([stage])
    _check_factors(taxonomy, [factor])
    _check_scenarios(taxonomy, [scenario])
    return Cell(stage, factor, scenario)


def unmapped_warning(taxonomy: Taxonomy, cell: Cell) -> str | None:
    """A warning for a cell whose pair the taxonomy does not list (asked for all the same)."""
    if taxonomy.is_mapped(cell.factor, cell.scenario):
        return None
    return (
        f"the taxonomy ({taxonomy.source.name}) does not list scenario {cell.scenario!r} for "
        f"factor {cell.factor!r}; items are generated as asked"
    )


def grid_cells(
    taxonomy: Taxonomy,
    *,
    stages: Sequence[str] = (),
    factors: Sequence[str] = (),
    scenarios: Sequence[str] = (),
) -> list[Cell]:
    """Stages x factors x each factor's scenarios in the taxonomy, in that order, kept to
    the ``stages``, ``factors`` and ``scenarios`` named (none named: all). Unknown names, and
    a choice that leaves no cell, raise InvalidInputError."""
    _check_stages(stages)
    _check_factors(taxonomy, factors)
    _check_scenarios(taxonomy, scenarios)
    stages = tuple(dict.fromkeys(stages))  # a name given twice is one choice
    cells = [
        Cell(stage, f.id, scenario)
        for stage in (stages or STAGES)
        for f in taxonomy.factors
        if not factors or f.id in factors
        for scenario in f.scenarios
        if not scenarios or scenario in scenarios
    ]
    if not cells:
        raise InvalidInputError(
            "no cell of the taxonomy has the factor(s) and scenario(s) chosen: "
            + "; ".join(
                f"{f.id}: {', '.join(f.scenarios)}"
                for f in taxonomy.factors
                if not factors or f.id in factors
            )
        )
    return cells


def _check_stages(stages: Iterable[str]) -> None:
    bad = [s for s in stages if s not in STAGES]
    if bad:
        raise InvalidInputError(f"unknown stage {bad[0]!r}: use one of {', '.join(STAGES)}")


def _check_factors(taxonomy: Taxonomy, factors: Iterable[str]) -> None:
    for factor in factors:
        if factor not in taxonomy.factor_ids:
            raise InvalidInputError(
                f"unknown factor {factor!r} (the taxonomy {taxonomy.source.name} has "
                f"{', '.join(taxonomy.factor_ids)}); add your own with --taxonomy FILE"
            )


def _check_scenarios(taxonomy: Taxonomy, scenarios: Iterable[str]) -> None:
    for scenario in scenarios:
        if scenario in taxonomy.scenario_ids:
            continue
        hint = taxonomy.suggest_scenario(scenario)
        why = f"unknown scenario {scenario!r}"
        if hint:
            raise InvalidInputError(f"{why}: did you mean {hint!r}?")
        raise InvalidInputError(
            f"{why} (see the scenario ids in {taxonomy.source.name}); add your own with "
            "--taxonomy FILE"
        )


# -- a run (its calls, wave by wave: judge.authoring.waves) ---------------------------------


@dataclass
class GenerationSummary:
    """What one ``generate`` or ``plan`` did. ``short`` lists the cells that did not get
    all the items they needed, with why; ``rejections`` every item (or whole reply) not
    stored and ``duplicate_items`` every near-duplicate skipped, each with its raw text."""

    dataset: str
    endpoint: str
    model: str
    cells: int
    cells_asked: int
    wanted: int
    asked: int = 0
    added: int = 0
    calls: int = 0
    cached: int = 0
    failed_calls: int = 0
    unreadable_calls: int = 0
    http_attempts: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    short: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[dict[str, Any]] = field(default_factory=list)
    duplicate_items: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    max_attempts: str = f"{MAX_ATTEMPTS_FACTOR} x the calls a cell needs"

    @property
    def complete(self) -> bool:
        return not self.short

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}


def generate_items(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    taxonomy: Taxonomy,
    dataset: str,
    cell: Cell,
    count: int,
    *,
    options: Options | None = None,
    progress: Progress | None = None,
) -> GenerationSummary:
    """Ask ``client`` for ``count`` new items of ``cell`` and store them in ``dataset``
    (created if new) as drafts; see the module docstring for how many calls that takes."""
    if count < 1:
        raise InvalidInputError(f"--count must be at least 1, got {count}")
    warning = unmapped_warning(taxonomy, cell)
    summary = _run(
        engine, client, book, taxonomy, dataset, [cell],
        lambda _have: {cell: count}, options or Options(), progress,
    )  # fmt: skip
    if warning:
        summary.warnings.append(warning)
    return summary


def plan_items(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    taxonomy: Taxonomy,
    dataset: str,
    cells: Sequence[Cell],
    per_cell: int,
    *,
    options: Options | None = None,
    progress: Progress | None = None,
) -> GenerationSummary:
    """Fill every cell of ``cells`` in ``dataset`` (created if new) up to ``per_cell`` items
    that are not rejected, asking only for the shortfall; resumable (module docstring)."""
    _check_per_cell(per_cell)

    def targets(have: dict[Cell, int]) -> dict[Cell, int]:
        return shortfall(cells, per_cell, have)

    return _run(
        engine, client, book, taxonomy, dataset, cells, targets, options or Options(), progress
    )


def _check_per_cell(per_cell: int) -> None:
    if per_cell < 1:
        raise InvalidInputError(f"--per-cell must be at least 1, got {per_cell}")


def shortfall(cells: Sequence[Cell], per_cell: int, have: dict[Cell, int]) -> dict[Cell, int]:
    """The items each cell still needs to hold ``per_cell`` (cells already full left out).

    >>> a, b = Cell("S1", "gender", "x"), Cell("S2", "gender", "x")
    >>> shortfall([a, b], 3, {a: 1, b: 4}) == {a: 2}
    True
    """
    return {c: per_cell - have.get(c, 0) for c in cells if have.get(c, 0) < per_cell}


def _dataset_id(session: Session, name: str, *, create: bool) -> int | None:
    dataset = session.exec(select(Dataset).where(Dataset.name == name)).first()
    if dataset is None and create:
        dataset = Dataset(name=name, description="test items generated by a model")
        session.add(dataset)
        session.flush()
    return None if dataset is None else dataset.id


def _run(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    taxonomy: Taxonomy,
    dataset: str,
    cells: Sequence[Cell],
    targets: Callable[[dict[Cell, int]], dict[Cell, int]],
    options: Options,
    progress: Progress | None,
) -> GenerationSummary:
    with session_scope(engine) as session:
        dataset_id = _dataset_id(session, dataset, create=True)
    assert dataset_id is not None
    prompts = CellPrompts(book, taxonomy)
    k = options.items_per_call
    with run_lease(engine, LEASE_KIND, dataset_id):
        with session_scope(engine) as session:
            wanted = targets(cell_counts(session, dataset_id))
            stored = stored_attempts(session, dataset_id)
        states = {
            cell: CellState(
                need,
                MAX_ATTEMPTS_FACTOR * math.ceil(need / k),
                {a for a, status in stored.get(cell, {}).items() if status != FAILED},
            )
            for cell, need in wanted.items()
        }
        summary = GenerationSummary(
            dataset, client.name, client.model, len(cells), len(states), sum(wanted.values())
        )
        cache = CallCacheView(engine, client.model)

        def work(call: CellCall) -> tuple[CellCall, CallOutcome, ReadReply | None]:
            outcome = cached_complete(
                client, cache, call.prompt.messages, sample_index=call.attempt,
                temperature=options.temperature, max_tokens=options.tokens, schema=call.schema,
            )  # fmt: skip
            done = outcome.completion
            reply = None
            if done is not None:
                reply = read_reply(
                    done.text, call.cell, asked=call.asked, taxonomy=taxonomy,
                    finish_reason=done.finish_reason,
                )  # fmt: skip
            return call, outcome, reply

        finished = total = 0
        wave = next_wave(states, prompts, k)
        if not wave:  # nothing to ask: no near-duplicate index to build
            return _finish(summary, states)
        # The writer's near-duplicate index needs scikit-learn (a second or more to import)
        # and reads every item of the dataset: it is made on a thread of its own while the
        # first calls are out, and waited for when their replies are to be stored.
        with ThreadPoolExecutor(max_workers=1) as opener, ExitStack() as closing:
            opening = opener.submit(CallWriter, engine, dataset_id, threshold=options.threshold)
            closing.callback(_close_when_made, opening)
            while wave:
                total += len(wave)
                for batch in run_concurrently(wave, work, concurrency=client.config.concurrency):
                    writer = opening.result()
                    # The calls that have arrived are stored together, in one transaction.
                    records = [(_record(client, options, c, o), r) for c, o, r in batch]
                    for (call, outcome, _), result in zip(
                        batch, writer.store_all(records), strict=True
                    ):
                        _count(summary, states[call.cell], call, outcome, result)
                    finished += len(batch)
                    if progress:
                        progress(finished, total)
                wave = next_wave(states, prompts, k)
    return _finish(summary, states)


def _close_when_made(opening: Future[CallWriter]) -> None:
    """Close the writer once it is made; one that could not be made has nothing to close
    (its error, if nobody asked for the writer, was not the reason the run stopped)."""
    try:
        writer = opening.result()
    except Exception:
        return
    writer.close()


def _finish(summary: GenerationSummary, states: dict[Cell, CellState]) -> GenerationSummary:
    summary.short = [
        {"cell": str(cell), "wanted": s.wanted, "added": s.added, "calls": s.calls,
         "why": _why_short(s)}
        for cell, s in states.items()
        if s.short
    ]  # fmt: skip
    return summary


def _record(
    client: ModelClient, options: Options, call: CellCall, outcome: CallOutcome
) -> CallRecord:
    done, failure = outcome.completion, outcome.failure
    return CallRecord(
        cell=call.cell,
        attempt=call.attempt,
        asked=call.asked,
        endpoint=client.name,
        base_url=client.config.base_url,
        model=client.model,
        prompt_version=call.prompt.template_version,
        prompt_hash=call.prompt.prompt_hash,
        params=options.params(call.attempt),
        cache_key=outcome.key,
        cached=outcome.cached,
        text=done.text if done else None,
        finish_reason=done.finish_reason if done else None,
        error=failure.reason if failure else None,
        prompt_tokens=done.prompt_tokens if done else 0,
        cached_prompt_tokens=done.cached_prompt_tokens if done else 0,
        completion_tokens=done.completion_tokens if done else 0,
        latency_s=done.latency_s if done else 0.0,
        cache_rows=outcome.new_rows,
    )


def _count(
    summary: GenerationSummary,
    state: CellState,
    call: CellCall,
    outcome: CallOutcome,
    stored: StoredCall,
) -> None:
    summary.asked += call.asked
    summary.added += len(stored.added)
    summary.cached += outcome.cached
    summary.calls += not outcome.cached
    summary.http_attempts += outcome.attempts
    summary.failed_calls += stored.status == FAILED
    summary.unreadable_calls += stored.status == UNREADABLE
    summary.duplicates += len(stored.duplicates)
    for kind, n in counts_by_kind(stored.rejections).items():
        summary.rejected[kind] = summary.rejected.get(kind, 0) + n
    summary.rejections.extend(rejection_rows(stored))
    summary.duplicate_items.extend(
        {"cell": str(stored.cell), "attempt": stored.attempt, **d} for d in stored.duplicates
    )
    state.added += len(stored.added)
    if stored.status == FAILED:
        state.failed = stored.error or "the call failed"


def _why_short(state: CellState) -> str:
    if state.failed is not None:
        return f"a call failed ({state.failed}); run the same command again to retry it"
    return (
        f"its {state.calls} call(s) ({MAX_ATTEMPTS_FACTOR} x the calls it needed) returned "
        "too few valid new items (see rejections and duplicates); run the command again to "
        "try further attempts"
    )


# -- a dry run -----------------------------------------------------------------------------


def plan_dry_run(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    taxonomy: Taxonomy,
    dataset: str,
    cells: Sequence[Cell],
    per_cell: int,
    *,
    options: Options | None = None,
    prices: Prices | None = None,
    counts: dict[Cell, int] | None = None,
) -> dict[str, Any]:
    """What ``plan_items`` with these settings would ask for and cost, with nothing sent or
    stored: the cells short of ``per_cell``, the first calls (as many as the shortfall
    needs), those the call cache answers, an estimate of the rest (``judge.costs``) and the
    most calls the run may make if replies are rejected. ``counts``: new items wanted per
    cell whatever the cell holds (``generate_items``' ``count``), instead of the shortfall."""
    if counts is None:
        _check_per_cell(per_cell)
    options = options or Options()
    k = options.items_per_call
    with session_scope(engine) as session:
        dataset_id = _dataset_id(session, dataset, create=False)
        have = cell_counts(session, dataset_id) if dataset_id is not None else {}
        stored = stored_attempts(session, dataset_id) if dataset_id is not None else {}
        ratio = measured_tokens_per_char(session, client.model)
        typical = _measured_reply_tokens(session, client.model)
    prompts = CellPrompts(book, taxonomy)
    cache = CallCacheView(engine, client.model)
    wanted = shortfall(cells, per_cell, have) if counts is None else counts
    first = cached = 0
    to_send = []
    # One key maker per reply schema (a cell's prompts and schemas are rendered once, so the
    # attempts of a cell share them): each prompt's key is hashed once for all its attempts.
    keys: dict[int, tuple[dict[str, Any], CallKeys]] = {}
    for cell, need in wanted.items():
        n = math.ceil(need / k)
        taken = {a for a, status in stored.get(cell, {}).items() if status != FAILED}
        for attempt, asked in zip(free_attempts(taken, n), split_asks(need, k, n), strict=True):
            prompt, schema = prompts(cell, asked)
            first += 1
            if id(schema) not in keys:
                keys[id(schema)] = (schema, CallKeys(
                    client, temperature=options.temperature, max_tokens=options.tokens,
                    schema=schema,
                ))  # fmt: skip
            key = keys[id(schema)][1](prompt.messages, attempt)
            if cache.has(key):
                cached += 1
            else:
                to_send.append(prompt.messages)
    guess = estimate(
        to_send, max_tokens=options.tokens, prices=prices, tokens_per_char=ratio,
        completion_tokens=typical,
    )  # fmt: skip
    return {
        "dataset": dataset,
        "endpoint": client.name,
        "model": client.model,
        "cells": len(cells),
        "cells_short": len(wanted),
        "items_wanted": sum(wanted.values()),
        "items_per_call": k,
        "calls_planned": first,
        "cached_calls": cached,
        "calls_to_send": len(to_send),
        "max_calls": MAX_ATTEMPTS_FACTOR * first,
        "estimate": guess.to_json(),
        "note": (
            f"calls_planned is one call per {k} items missing; replies rejected or found to "
            f"be duplicates bring further calls, up to max_calls ({MAX_ATTEMPTS_FACTOR} x), "
            "and the cost grows in proportion."
        ),
    }


def _measured_reply_tokens(session: Session, model: str) -> Measure | None:
    """Mean completion tokens of ``model``'s earlier item-generation calls that got a reply;
    None with fewer than ``MIN_MEASURED`` of them."""
    n, tokens = session.execute(
        select(
            func.count(), func.coalesce(func.sum(col(ItemGenerationCall.completion_tokens)), 0)
        ).where(
            col(ItemGenerationCall.model) == model,
            col(ItemGenerationCall.status).in_([OK, UNREADABLE]),
            col(ItemGenerationCall.completion_tokens) > 0,
        )
    ).one()
    if n < MIN_MEASURED:
        return None
    mean = int(tokens) / int(n)
    return Measure(mean, f"measured: {mean:.1f} completion tokens per call over {n} item calls")
