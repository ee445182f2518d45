"""Pairwise judgments made elsewhere: imported from files, and their position bias, repetition
stability, win rates and Bradley-Terry strengths per judge (``fairjudge judgments``, ``GET
/api/v1/pairwise/position``). The domain is ``judge.trust.pairwise*``; this is its door."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.usecases.requests import apply_overrides

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.config import Settings
    from judge.progress import Progress
    from judge.trust.pairwise_import import PairwiseImportSummary
    from server.usecases.requests import JudgePairsRequest

FORMATS = ("shi2024", "csv", "jsonl")


class PositionOptions(BaseModel):
    """How the figures are computed (the options of ``fairjudge judgments position``)."""

    model_config = ConfigDict(extra="forbid")
    judge: str | None = Field(
        default=None, min_length=1, max_length=200, description="Only this judge (default: all)."
    )
    inconsistent: Literal["tie", "apart"] = Field(
        default="tie",
        description="An inconsistent pair (the verdict follows the position): counted as a "
        "tie, or kept apart (left out of win rates and Bradley-Terry, counted on its own).",
    )
    level: float = Field(default=0.95, gt=0.5, lt=1, description="Confidence of the intervals.")
    n_bootstrap: int = Field(
        default=1000, ge=100, le=10_000, description="Bootstrap resamples of each interval."
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="The bootstrap's seed.")


def import_judgments(
    engine: Engine,
    path: str | Path,
    fmt: str,
    *,
    judge: str | None = None,
    repetition: int | None = None,
    models: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Store the pairwise judgments of ``path`` (a file, or a folder of shi2024 records),
    checked whole: ``InvalidInputError`` lists every problem and nothing is stored."""
    from judge.trust.pairwise_import import import_pairwise

    summary = import_pairwise(engine, path, fmt, judge=judge, repetition=repetition, models=models)
    return asdict(summary)


def import_judgments_text(
    engine: Engine,
    text: str,
    fmt: str,
    *,
    judge: str | None = None,
    models: Sequence[str] | None = None,
) -> PairwiseImportSummary:
    """``import_judgments`` of a request's text (one file's content): checked whole, every
    problem listed, nothing stored from a bad text."""
    from judge.trust.pairwise_files import read_pairwise_text
    from judge.trust.pairwise_import import store_source

    read = read_pairwise_text(text, fmt, judge=judge)
    return store_source(engine, read, "request body", fmt, models)


def pairwise_position(session: Session, options: PositionOptions) -> dict[str, Any]:
    """Every judge's figures (of ``options.judge`` alone when given) as JSON-ready data;
    ``NotFoundError`` when no verdict is stored (for that judge)."""
    found = pairwise_position_or_none(session, options)
    if found is None:
        from judge.errors import NotFoundError

        who = f" of judge {options.judge!r}" if options.judge else ""
        raise NotFoundError(
            f"no pairwise judgments{who} stored: import some with `fairjudge judgments import`"
        )
    return found


def pairwise_position_or_none(session: Session, options: PositionOptions) -> dict[str, Any] | None:
    """``pairwise_position``'s figures, or None when no verdict is stored (the dashboard's
    page then says so)."""
    from judge.trust.pairwise import load_verdicts, pairwise_figures

    verdicts = load_verdicts(session, options.judge)
    if not verdicts:
        return None
    result = pairwise_figures(
        verdicts, inconsistent=options.inconsistent, level=options.level,
        n_bootstrap=options.n_bootstrap, seed=options.seed,
    )  # fmt: skip
    return result.to_json()


def _pair_setup(
    settings: Settings, session: Session, request: JudgePairsRequest
) -> tuple[Any, Any]:
    """The judge endpoint's client (no /models check) and the prompt book, after checking
    that every run exists and the criterion is known (``check_pairs``)."""
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook

    book = PromptBook(settings.prompts_path())
    check_pairs(session, book, request)
    name = settings.judge.endpoint
    return ModelClient(name, settings.endpoint(name)), book


def check_pairs(session: Session, book: Any, request: JudgePairsRequest) -> None:
    """NotFoundError for a generation run that does not exist, InvalidInputError for an
    unknown criterion: before any call (the request itself holds two runs or more, each
    once)."""
    from judge.grading.pairs import pair_criterion
    from judge.store.queries import get_generation_run

    for run in request.runs:
        get_generation_run(session, run)
    pair_criterion(book, request.criterion)


def judge_pairs_dry_run(
    engine: Engine, settings: Settings, request: JudgePairsRequest
) -> dict[str, Any]:
    """What ``judge_pairs`` would send for each pair of the request's runs and cost, with
    nothing sent or stored: verdicts to get, first calls the cache answers, an estimate of
    the rest (and their sums over the pairs)."""
    from judge.costs import Prices, estimate, measured_completion_tokens, measured_tokens_per_char
    from judge.grading.pairs import cached_share, plan_pairs
    from judge.store.engine import session_scope

    settings = apply_overrides(settings, request)
    criterion, repeats = request.criterion, request.repeats
    pairs = []
    to_send: list[Any] = []
    with session_scope(engine) as s:
        client, book = _pair_setup(settings, s, request)
        ratio = measured_tokens_per_char(s, client.model)
        typical = measured_completion_tokens(s, client.model)
        for a, b in itertools.combinations(request.runs, 2):
            plan = plan_pairs(s, client, book, settings.judge, a, b,
                              criterion=criterion, repeats=repeats)  # fmt: skip
            todo = plan.todo
            hits, sends = cached_share(engine, client, settings.judge, todo)
            to_send += sends
            pairs.append({
                "runs": [a, b], "pairwise_run_id": plan.run_id, "judge": plan.judge,
                "verdicts_to_get": len(todo), "cached_calls": hits, "calls_to_send": len(sends),
                "questions_missing_an_answer": len(plan.missing),
            })  # fmt: skip
    guess = estimate(
        to_send, max_tokens=settings.judge.max_tokens, prices=Prices.of(client.config),
        tokens_per_char=ratio, completion_tokens=typical, repairs=False,
    )  # fmt: skip
    return {
        "endpoint": client.name, "model": client.model, "pairs": pairs,
        "verdicts_to_get": sum(p["verdicts_to_get"] for p in pairs),
        "cached_calls": sum(p["cached_calls"] for p in pairs),
        "calls_to_send": len(to_send), "estimate": guess.to_json(),
    }  # fmt: skip


def judge_pairs(
    engine: Engine,
    settings: Settings,
    request: JudgePairsRequest,
    *,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Judge each pair of the request's runs pairwise with the judge endpoint (resumable,
    cached); one pairwise judge run per pair, every verdict in the pairwise tables. Returns
    each pass's summary and cost, and the judge's label (``judgments position --judge
    LABEL``). ``max_cost``: one bound over the pairs' runs, at the judge endpoint's prices
    (refused before any call without them), kept with each run as ``judge`` keeps its
    (``pairs_budget``). The CLI's ``judge-pairs`` and a judge-pairs job both call this."""
    from judge.costs import Prices
    from judge.grading.pairs import judge_pairs as run_pairs
    from judge.grading.pairs import keep_bound, pairs_budget, pairs_cost, plan_pairs
    from judge.store.engine import session_scope
    from server.usecases.context import make_client

    settings = apply_overrides(settings, request)
    criterion, repeats = request.criterion, request.repeats
    with session_scope(engine) as s:
        _, book = _pair_setup(settings, s, request)  # a missing run fails before any call
    name = settings.judge.endpoint
    prices = Prices.of(settings.endpoint(name))
    client = make_client(settings, name)
    pairs = list(itertools.combinations(request.runs, 2))
    with session_scope(engine) as s:  # each pair's tasks, for one progress over all pairs
        plans = [
            plan_pairs(s, client, book, settings.judge, a, b, criterion=criterion, repeats=repeats)
            for a, b in pairs
        ]
        budget = pairs_budget(s, client, settings.judge, plans, request.max_cost, prices, name)
    sizes = [len(plan.tasks) for plan in plans]
    passes = []
    for i, (a, b) in enumerate(pairs):
        done = run_pairs(engine, client, book, settings.judge, a, b, criterion=criterion,
                         repeats=repeats, budget=budget,
                         progress=_overall(progress, sum(sizes[:i]), sum(sizes)))  # fmt: skip
        if budget is not None:
            keep_bound(engine, done.summary.run_id, budget.max_cost)
        with session_scope(engine) as s:
            plan = plan_pairs(s, client, book, settings.judge, a, b,
                              criterion=criterion, repeats=repeats)  # fmt: skip
            cost = pairs_cost(s, client, settings.judge, plan)
        money = (
            None
            if prices is None
            else prices.cost(
                cost.prompt_tokens, cost.completion_tokens, cached=cost.cached_prompt_tokens
            )
        )
        passes.append({
            "runs": [a, b], **asdict(done.summary), "judge": done.judge,
            "questions_missing_an_answer": done.missing, "calls_failed": done.failed,
            "budget_stopped": done.budget_stopped,
            "cost": {**asdict(cost), "cost": money,
                     "note": None if prices is not None else f"endpoint {name!r} has no prices"},
        })  # fmt: skip
        if done.budget_stopped:
            break
    bound = None if budget is None else {"max_cost": budget.max_cost, "spent": budget.spent}
    return {"judge": passes[0]["judge"], "passes": passes, "bound": bound}


class _Overall:
    """One pair's progress as a share of every pair's: ``before`` tasks are the earlier
    pairs', ``total`` all pairs' (a job shows one bar over the call, as a judge job does;
    the CLI's bar hears ``begin`` with the same offset)."""

    def __init__(self, progress: Progress, before: int, total: int) -> None:
        self.progress, self.before, self.total = progress, before, total

    def __call__(self, done: int, of: int) -> None:
        self.progress(self.before + done, max(self.total, self.before + of))

    def begin(self, stored: int, of: int) -> None:
        from judge.progress import begin

        begin(self.progress, self.before + stored, max(self.total, self.before + of))


def _overall(progress: Progress | None, before: int, total: int) -> Progress | None:
    return None if progress is None else _Overall(progress, before, total)
