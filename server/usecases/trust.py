"""The judge's counterfactual check: judging swapped copies of a run's answers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.endpoint_url import check_same_server
from judge.progress import Progress
from server.usecases.context import make_client
from server.usecases.reports import diagnostics_report
from server.usecases.requests import CounterfactualRequest
from server.usecases.rubrics import rubrics

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook
    from judge.reports.sections import Report
    from judge.trust.rejudge import CounterfactualRun
    from judge.trust.swaps import Swap


def swap_kinds(chosen: Sequence[str], available: Sequence[str]) -> list[str]:
    """The swap kinds asked for: ``all`` means every kind of the list."""
    kinds = list(dict.fromkeys(chosen))
    return list(available) if "all" in kinds else kinds


def counterfactual_audit(
    engine: Engine,
    settings: Settings,
    judge_run_id: int | CounterfactualRequest,
    *,
    swap: Sequence[str] = (),
    swaps_file: str | Path | None = None,
    limit: int | None = None,
    max_cost: float | None = None,
    progress: Progress | None = None,
) -> CounterfactualRun:
    """Judge a counterfactual copy of a judge run's answers (``swap``: names, gender, race
    or all; ``swaps_file``: a swap list of the user's own) with the run's own endpoint and
    settings; resumable. Everything is checked before any call: the swap list, the kinds,
    that the run scored something, that its judge can be reproduced and, with ``max_cost``
    (stop before spending more), that the judge endpoint has prices. ``judge_run_id``: the
    run's id with the other fields as keywords, or the whole request."""
    from judge.costs import Prices, make_budget
    from judge.trust.rejudge import run_counterfactual

    request = _request(judge_run_id, swap, swaps_file, limit, max_cost)
    endpoint, _, book, rubric_set, kinds, chosen = _judge_of(engine, settings, request)
    budget = make_budget(request.max_cost, Prices.of(settings.endpoint(endpoint)), endpoint)
    return run_counterfactual(
        engine, make_client(settings, endpoint), book, rubric_set, request.judge_run_id,
        kinds, chosen, limit=request.limit, progress=progress, budget=budget,
        max_unusable=settings.runs.max_unusable_share, swap_in=request.swap_in,
    )  # fmt: skip


def counterfactual_dry_run(
    engine: Engine, settings: Settings, request: CounterfactualRequest
) -> dict[str, Any]:
    """What ``counterfactual_audit`` would send and cost, with nothing sent or stored (the
    copy of the answers is made in memory when it does not exist yet): the judgments to
    make, those without an answer, the first calls the cache answers, and an estimate of the
    rest at the judge endpoint's prices, live and at the batch price (prompt tokens from a
    measured tokens per character where there is one, completion tokens at most the run's
    ``max_tokens`` and typically the judge model's measured mean)."""
    from judge.costs import Prices, estimate, measured_completion_tokens, measured_tokens_per_char
    from judge.store.engine import session_scope
    from judge.trust.rejudge import plan_counterfactual

    endpoint, client, book, rubric_set, kinds, chosen = _judge_of(engine, settings, request)
    planned = plan_counterfactual(
        engine, client, book, rubric_set, request.judge_run_id, kinds, chosen,
        limit=request.limit, swap_in=request.swap_in,
    )  # fmt: skip
    with session_scope(engine) as session:
        ratio = measured_tokens_per_char(session, client.model)
        typical = measured_completion_tokens(session, client.model)
    guess = estimate(
        planned.to_send, max_tokens=planned.max_tokens,
        prices=Prices.of(settings.endpoint(endpoint)), tokens_per_char=ratio,
        completion_tokens=typical,
    )  # fmt: skip
    return {
        "checked_judge_run_id": request.judge_run_id,
        "copy_run_id": planned.copy_run_id,
        "judge_run_id": planned.judge_run_id,
        "endpoint": endpoint,
        "model": client.model,
        "items_copied": planned.items_copied,
        "items_skipped": planned.items_skipped,
        "judgments_to_make": planned.judgments,
        "missing_answers": planned.missing_answers,
        "cached_calls": planned.cached,
        "calls_to_send": len(planned.to_send),
        "estimate": guess.to_json(),
    }


def _request(
    judge_run_id: int | CounterfactualRequest,
    swap: Sequence[str],
    swaps_file: str | Path | None,
    limit: int | None,
    max_cost: float | None,
) -> CounterfactualRequest:
    if isinstance(judge_run_id, CounterfactualRequest):
        return judge_run_id
    return CounterfactualRequest.build(
        judge_run_id=judge_run_id, swap=list(swap), swaps_file=swaps_file, limit=limit,
        max_cost=max_cost,
    )  # fmt: skip


def _judge_of(
    engine: Engine, settings: Settings, request: CounterfactualRequest
) -> tuple[str, ModelClient, PromptBook, Any, list[str], tuple[Swap, ...]]:
    """The run's judge endpoint, a client for it that has not called it (a dry run sends
    nothing), the prompts, the run's rubric set, the swap kinds and pairs: every check a
    counterfactual makes before it sends anything."""
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope
    from judge.store.queries import get_judge_run
    from judge.trust.swaps import load_swaps

    swaps = load_swaps(request.swaps_file)
    kinds = swap_kinds(request.swap, swaps.kinds)
    chosen = swaps.select(kinds)
    with session_scope(engine) as session:
        jrun = get_judge_run(session, request.judge_run_id)
        endpoint, judged_at = jrun.endpoint_name, jrun.base_url
        rubric_set = rubrics(settings, session, judge_run_id=request.judge_run_id)
    # The copy must be judged by the same server as the run, or the comparison mixes two.
    check_same_server(
        f"judge run {request.judge_run_id}", judged_at, endpoint,
        settings.endpoint(endpoint).base_url,
    )  # fmt: skip
    client = ModelClient(endpoint, settings.endpoint(endpoint))
    return endpoint, client, PromptBook(settings.prompts_path()), rubric_set, kinds, chosen


def diagnostics(
    engine: Engine,
    settings: Settings,
    judge_run_id: int,
    *,
    tolerance: float = 0.0,
    margin: float | None = None,
) -> Report:
    """The judge diagnostics report of one judge run (``checks show``), read in a
    session of its own: self-preference, counterfactual copies, order, length, cost."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return diagnostics_report(
            session, judge_run_id, tolerance=tolerance, settings=settings, margin=margin
        )


def judge_run_status(engine: Engine, judge_run_id: int) -> tuple[str, str | None]:
    """A judge run's status and its detail (why it is incomplete, say)."""
    from judge.store.engine import session_scope
    from judge.store.queries import get_judge_run

    with session_scope(engine) as session:
        run = get_judge_run(session, judge_run_id)
        return run.status, run.status_detail
