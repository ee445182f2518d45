"""Runs: the model under test answering (generation), the judge scoring (judging), their info,
metrics and the counts a job shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from judge.progress import Progress
from server.usecases.context import make_client, run_prices
from server.usecases.requests import GenerateRequest, JudgeRequest, apply_overrides
from server.usecases.rubrics import rubrics
from server.usecases.transport import call_transport

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.config import Settings
    from judge.models.transport import Transport as CallTransport
    from judge.runs import RunPart, RunSummary
    from judge.store.queries import GenerationRunInfo, JudgeRunInfo, RunListing


_EXAMPLES = {
    "GenerateRequest": 'GenerateRequest(dataset="sample")',
    "JudgeRequest": "JudgeRequest(generation_run_id=3)",
}


def typed(request: object, kind: type) -> None:
    """Refuse, with what to write instead, a request that is not a ``kind`` (an id or a
    dataset's name alone, as these functions once took): a TypeError naming the fix."""
    if not isinstance(request, kind):
        example = _EXAMPLES.get(kind.__name__, f"{kind.__name__}(...)")
        raise TypeError(
            f"expected a {kind.__name__} (for instance {example}), got "
            f"{type(request).__name__} {request!r}"
        )


def generate(
    engine: Engine,
    settings: Settings,
    request: GenerateRequest,
    *,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    part: RunPart | None = None,
    threads: int | None = None,
) -> RunSummary:
    """Answers from the model under test for ``request.dataset`` (resumes a run with the same
    settings), the calls sent as ``request.transport`` says (live by default); the request's
    settings overrides are applied here. ``request.max_cost``: stop before spending more, at
    the endpoint's prices (refused before any call without them). ``on_run`` hears the run's
    id before any call. ``part``: only these items, for a run split between workers
    (``server.usecases.parts``)."""
    summary, _, _ = generate_with(
        engine, settings, request, progress=progress, on_run=on_run, part=part, threads=threads
    )
    return summary


def generate_with(
    engine: Engine,
    settings: Settings,
    request: GenerateRequest,
    *,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    part: RunPart | None = None,
    threads: int | None = None,
) -> tuple[RunSummary, Settings, CallTransport]:
    """``generate``, and also the settings it ran with (the request's overrides applied) and
    the transport, whose account ``server.usecases.batch`` reports; internal to this package
    (not in the Python face)."""
    typed(request, GenerateRequest)
    from judge.answers import collect
    from judge.costs import Prices, make_budget
    from judge.prompts import PromptBook

    settings = apply_overrides(settings, request)
    cfg = settings.generation
    transport = call_transport(settings, cfg.endpoint, request.transport)
    # refused before any call when the endpoint has no prices
    prices = Prices.of(settings.endpoint(cfg.endpoint))
    budget = make_budget(request.max_cost, prices, cfg.endpoint)
    summary = collect.generate(
        engine,
        make_client(settings, cfg.endpoint),
        PromptBook(settings.prompts_path()),
        request.dataset,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        limit=request.limit,
        accepted_only=request.accepted_only,
        include_drafts=request.include_drafts,
        new=request.new,
        progress=progress,
        on_run=on_run,
        part=part,
        threads=threads,
        budget=budget,
        max_unusable=settings.runs.max_unusable_share,
        transport=transport,
    )
    return summary, settings, transport


def generate_dry_run(
    engine: Engine, settings: Settings, request: GenerateRequest
) -> dict[str, Any]:
    """What ``generate`` with these settings would send and cost, with nothing sent or
    stored: answers to ask, those the call cache holds, and an estimate of the rest (prompt
    tokens from the model's measured tokens per character where there is one, completion
    tokens at most ``max_tokens`` and typically the model's measured mean answer; cost live
    and at the batch price)."""
    from judge.answers import collect
    from judge.costs import Prices, estimate, measured_answer_tokens, measured_tokens_per_char
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope

    typed(request, GenerateRequest)
    settings = apply_overrides(settings, request)
    cfg = settings.generation
    endpoint = settings.endpoint(cfg.endpoint)
    client = ModelClient(cfg.endpoint, endpoint)  # no /models check: a dry run sends nothing
    planned = collect.plan_answers(
        engine, client, PromptBook(settings.prompts_path()), request.dataset,
        temperature=cfg.temperature, max_tokens=cfg.max_tokens, limit=request.limit,
        accepted_only=request.accepted_only, include_drafts=request.include_drafts,
        new=request.new,
    )  # fmt: skip
    with session_scope(engine) as session:
        ratio = measured_tokens_per_char(session, client.model)
        typical = measured_answer_tokens(session, client.model)
    guess = estimate(
        planned.to_send, max_tokens=cfg.max_tokens, prices=Prices.of(endpoint),
        tokens_per_char=ratio, completion_tokens=typical, repairs=False,
    )  # fmt: skip
    return {
        "generation_run_id": planned.run_id,
        "dataset": request.dataset,
        "endpoint": cfg.endpoint,
        "model": client.model,
        "answers_to_ask": planned.answers,
        "cached_calls": planned.cached,
        "calls_to_send": len(planned.to_send),
        "left_out": planned.left_out,
        "estimate": guess.to_json(),
    }


def judge(
    engine: Engine,
    settings: Settings,
    request: JudgeRequest,
    *,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    part: RunPart | None = None,
    threads: int | None = None,
) -> RunSummary:
    """Rubric scores for ``request.generation_run_id``'s answers (resumes a run with the same
    settings), the calls sent as ``request.transport`` says (live by default); the request's
    settings overrides are applied here. ``request.rubric_set``: "fairmonitor" (the default)
    or registered or built-in rubric names, comma-separated; another set is another judge
    run. ``request.swap_order``: judge every pair in both orders (another judge run).
    ``request.max_cost``: stop before spending more, at the judge endpoint's prices (refused
    without them). ``on_run`` hears the judge run's id before any call. ``part``: only these
    items, for a run split between workers (``server.usecases.parts``)."""
    summary, _, _ = judge_with(
        engine, settings, request, progress=progress, on_run=on_run, part=part, threads=threads
    )
    return summary


def judge_with(
    engine: Engine,
    settings: Settings,
    request: JudgeRequest,
    *,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
    part: RunPart | None = None,
    threads: int | None = None,
) -> tuple[RunSummary, Settings, CallTransport]:
    """``judge``, and also the settings it ran with (the request's overrides applied) and the
    transport, whose account ``server.usecases.batch`` reports; internal to this package (not
    in the Python face)."""
    typed(request, JudgeRequest)
    from judge.costs import Prices, make_budget
    from judge.grading import judging
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope
    from judge.store.queries import get_generation_run

    settings = apply_overrides(settings, request)
    name = settings.judge.endpoint
    transport = call_transport(settings, name, request.transport)
    with session_scope(engine) as session:
        get_generation_run(session, request.generation_run_id)  # missing: fails before a call
        chosen = rubrics(settings, session, rubric_set=request.rubric_set)
    # refused before any call when the endpoint has no prices
    budget = make_budget(request.max_cost, Prices.of(settings.endpoint(name)), name)
    summary = judging.judge(
        engine,
        make_client(settings, name),
        PromptBook(settings.prompts_path()),
        chosen,
        settings.judge,
        request.generation_run_id,
        progress=progress,
        on_run=on_run,
        swap_order=bool(request.swap_order),
        budget=budget,
        part=part,
        threads=threads,
        max_unusable=settings.runs.max_unusable_share,
        transport=transport,
    )
    return summary, settings, transport


def judge_dry_run(engine: Engine, settings: Settings, request: JudgeRequest) -> dict[str, Any]:
    """What ``judge`` with these settings would send and cost, with nothing sent or stored:
    judgments to make, first calls the cache answers, and an estimate of the rest (tokens
    from this machine's measured ratio where there is one, cost at the endpoint's prices)."""
    from judge.costs import Prices, estimate, measured_completion_tokens, measured_tokens_per_char
    from judge.grading import judging
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope
    from judge.store.queries import get_generation_run

    typed(request, JudgeRequest)
    settings = apply_overrides(settings, request)
    run_id = request.generation_run_id
    name = settings.judge.endpoint
    endpoint = settings.endpoint(name)
    client = ModelClient(name, endpoint)  # no /models check: a dry run sends nothing
    with session_scope(engine) as session:
        get_generation_run(session, run_id)
        chosen = rubrics(settings, session, rubric_set=request.rubric_set)
        ratio = measured_tokens_per_char(session, client.model)
        typical = measured_completion_tokens(session, client.model)
    planned = judging.plan_calls(
        engine, client, PromptBook(settings.prompts_path()), chosen, settings.judge,
        run_id, swap_order=bool(request.swap_order),
    )  # fmt: skip
    guess = estimate(
        planned.to_send, max_tokens=settings.judge.max_tokens, prices=Prices.of(endpoint),
        tokens_per_char=ratio, completion_tokens=typical,
    )  # fmt: skip
    return {
        "judge_run_id": planned.run_id,
        "endpoint": name,
        "model": client.model,
        "judgments_to_make": planned.judgments,
        "missing_answers": planned.missing_answers,
        "cached_calls": planned.cached,
        "calls_to_send": len(planned.to_send),
        "estimate": guess.to_json(),
    }


def preload_runners() -> None:
    """Import the generation and judging code (openai among it, about a second) now: for a
    long-lived worker, before its first job is timed by its user."""
    import judge.answers.collect  # noqa: F401
    import judge.grading.judging  # noqa: F401


def summary_line(kind: str, s: RunSummary) -> str:
    """One line for people about a pass over a run, e.g. 'judge run 2: 64 to do, 64 model
    calls, 0 from cache, 66 HTTP requests; 60 scored, 4 unscored'."""
    outcome = ", ".join(f"{n:,} {flag}" for flag, n in sorted(s.flags.items())) or "nothing new"
    return (
        f"{kind} run {s.run_id}: {s.tasks:,} to do, {s.model_calls:,} model calls, "
        f"{s.cached:,} from cache, {s.http_attempts:,} HTTP requests; {outcome}"
    )


def run_status(engine: Engine, kind: str, run_id: int) -> tuple[str, str | None]:
    """A generation, judge or audit run's status and its status line (``kind``:
    "generation", "judge" or "audit"); NotFoundError for a run that does not exist."""
    from judge.audits.runner import get_run
    from judge.store.engine import session_scope
    from judge.store.queries import get_generation_run, get_judge_run

    getters = {"judge": get_judge_run, "generation": get_generation_run, "audit": get_run}
    with session_scope(engine) as session:
        run = getters[kind](session, run_id)
        return str(run.status), run.status_detail


def list_runs(session: Session) -> RunListing:
    """Every generation run and judge run, with their counts (``judge.store.queries``)."""
    from judge.store.queries import list_runs as listing

    return listing(session)


def page_generation_runs(
    session: Session, *, limit: int, offset: int
) -> tuple[list[GenerationRunInfo], int]:
    """One page of generation runs, paged in SQL, and how many there are."""
    from judge.store.queries import page_generation_runs as paging

    return paging(session, limit=limit, offset=offset)


def page_judge_runs(session: Session, *, limit: int, offset: int) -> tuple[list[JudgeRunInfo], int]:
    """One page of judge runs, paged in SQL, and how many there are."""
    from judge.store.queries import page_judge_runs as paging

    return paging(session, limit=limit, offset=offset)


def judgment_counts(session: Session, judge_run_id: int) -> dict[str, int]:
    """A judge run's judgments by status (scored, unscored)."""
    from sqlmodel import col, func, select

    from judge.store.tables import Judgment

    rows = session.exec(
        select(Judgment.status, func.count())
        .where(col(Judgment.judge_run_id) == judge_run_id)
        .group_by(Judgment.status)
    ).all()
    return {str(status): int(n) for status, n in rows}


def generation_run_info(session: Session, run_id: int) -> GenerationRunInfo:
    """One generation run as ``list_runs`` lists it (its dataset, endpoint, counts and cost);
    an unknown id raises ``NotFoundError``."""
    from judge.store.queries import get_generation_run, list_runs

    get_generation_run(session, run_id)
    return list_runs(session, generation_run=run_id).generation_runs[0]


def judge_run_info(session: Session, run_id: int) -> JudgeRunInfo:
    """One judge run as ``list_runs`` lists it (its judge, rubrics, counts and cost); an
    unknown id raises ``NotFoundError``."""
    from judge.store.queries import get_judge_run, list_runs

    get_judge_run(session, run_id)
    return list_runs(session, judge_run=run_id).judge_runs[0]


def run_metrics(session: Session, judge_run_id: int) -> dict[str, Any]:
    """FairMonitor's stage metrics of a judge run: per factor and over all factors."""
    from judge.metrics import item_scores, metric_dicts, stage_metrics
    from judge.store.queries import get_generation_run, get_judge_run

    jrun = get_judge_run(session, judge_run_id)
    model = get_generation_run(session, jrun.generation_run_id).model
    scores = item_scores(session, judge_run_id, jrun.aggregation)
    return {
        "judge_run": judge_run_id,
        "aggregation": jrun.aggregation,
        "overall": metric_dicts(stage_metrics(scores, model, by_factor=False)),
        "by_factor": metric_dicts(stage_metrics(scores, model)),
    }


def job_counts(
    session: Session, result: dict[str, Any] | None, settings: Settings | None = None
) -> dict[str, Any] | None:
    """What a job's run holds so far: rows by status (judgments, audit answers) or flag
    (answers), the tokens they used and, with ``settings``, their cost at the run's
    endpoint's prices, live and at the batch price (null: no prices); None before the job
    knows its run."""
    from sqlalchemy import select
    from sqlmodel import col, func

    from judge.store.tables import (
        AuditAnswer,
        AuditRun,
        GenerationRun,
        JudgeRun,
        Judgment,
        Response,
    )

    if not result:
        return None
    runs: Any
    if "audit_run_id" in result:
        table: Any = AuditAnswer
        column, run = AuditAnswer.status, AuditAnswer.run_id
        run_id, runs = result["audit_run_id"], AuditRun
    elif "judge_run_id" in result:
        table, column, run = Judgment, Judgment.status, Judgment.judge_run_id
        run_id, runs = result["judge_run_id"], JudgeRun
    elif "generation_run_id" in result:
        table, column, run = Response, Response.flag, Response.run_id  # type: ignore[assignment]
        run_id, runs = result["generation_run_id"], GenerationRun
    else:
        return None
    rows = session.execute(
        select(
            col(column),
            func.count(),
            func.coalesce(func.sum(table.prompt_tokens), 0),
            func.coalesce(func.sum(table.completion_tokens), 0),
            func.coalesce(func.sum(table.cached_prompt_tokens), 0),
        )
        .where(run == run_id)
        .group_by(column)
    ).all()
    counts: dict[str, Any] = {
        "by_status": {str(status): int(n) for status, n, *_ in rows},
        "prompt_tokens": sum(int(p) for _, _, p, _, _ in rows),
        "completion_tokens": sum(int(c) for _, _, _, c, _ in rows),
        "cached_prompt_tokens": sum(int(c) for *_, c in rows),
    }
    held = session.get(runs, run_id)
    if settings is not None and held is not None:
        counts["cost"] = tokens_cost(
            settings, held.endpoint_name, counts["prompt_tokens"], counts["completion_tokens"],
            cached=counts["cached_prompt_tokens"],
        )  # fmt: skip
    return counts


def tokens_cost(
    settings: Settings, endpoint: str, prompt_tokens: int, completion_tokens: int, cached: int = 0
) -> dict[str, Any]:
    """What these tokens cost at ``endpoint``'s prices as the config gives them now (``cached``
    of the prompt tokens at the cached price): live (``cost``), at the batch price
    (``cost_batch``) and the discount between them; the costs are None (unknown, never 0)
    without prices, and ``note`` says what to set."""
    from judge.costs import batch_cost, live_cost, missing_prices_message

    prices = run_prices(settings, endpoint)
    return {
        "cost": live_cost(prices, prompt_tokens, completion_tokens, cached),
        "cost_batch": batch_cost(prices, prompt_tokens, completion_tokens, cached),
        "batch_discount": None if prices is None else prices.batch_discount,
        "note": None if prices is not None else "cost unknown: " + missing_prices_message(endpoint),
    }


def run_cost(engine: Engine, settings: Settings, kind: str, run_id: int) -> dict[str, Any]:
    """A generation, audit or judge run's calls, tokens and cost so far (``kind``), at its
    endpoint's prices as the config gives them now, live and at the batch price. Without
    prices the costs are None (unknown, never 0) and ``note`` says what to set."""
    from judge.costs import answers_cost, judge_run_cost, missing_prices_message
    from judge.store.engine import session_scope
    from judge.store.queries import get_judge_run

    with session_scope(engine) as session:
        if kind == "judge":
            endpoint = get_judge_run(session, run_id).endpoint_name
            cost = judge_run_cost(session, run_id, run_prices(settings, endpoint))
            total = cost.total
            data: dict[str, Any] = {
                "kind": kind, "run_id": run_id, "endpoint": endpoint, "model": cost.model,
                "judgments": total.judgments, "calls": total.calls,
                "prompt_tokens": total.prompt_tokens,
                "cached_prompt_tokens": total.cached_prompt_tokens,
                "completion_tokens": total.completion_tokens, "cost": total.cost,
                "cost_batch": total.cost_batch, "note": cost.note,
            }  # fmt: skip
        else:
            endpoint = answers_cost(session, kind, run_id, None).endpoint
            data = answers_cost(session, kind, run_id, run_prices(settings, endpoint)).to_json()
            data.pop("prices")
    if data["cost"] is None:
        data["note"] = missing_prices_message(endpoint)
    return data
