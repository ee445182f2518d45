"""``/api/v1/generation-runs`` and ``/api/v1/judge-runs``: runs, answers, metrics, agreement."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from server import usecases
from server.api import blueprint, page
from server.db import get_session
from server.schemas import (
    AgreementOut,
    AgreementQuery,
    ComputingOut,
    GenerationRunOut,
    JudgeRunOut,
    MetricsOut,
    Page,
    PageQuery,
    ResponseOut,
    RunPath,
)
from server.usecases import browse
from server.usecases.runs import page_generation_runs, page_judge_runs

bp = blueprint("runs", __name__, "runs")


@bp.get("/generation-runs", responses={200: Page[GenerationRunOut]})
def generation_runs(query: PageQuery) -> Any:
    """Generation runs (generated or imported answers), oldest first."""
    rows, total = page_generation_runs(get_session(), limit=query.limit, offset=query.offset)
    return page(GenerationRunOut, [asdict(r) for r in rows], total, query.limit, query.offset)


@bp.get("/generation-runs/<int:run_id>", responses={200: GenerationRunOut})
def generation_run(path: RunPath) -> Any:
    """One generation run."""
    return asdict(usecases.generation_run_info(get_session(), path.run_id))


@bp.get("/generation-runs/<int:run_id>/responses", responses={200: Page[ResponseOut]})
def responses(path: RunPath, query: PageQuery) -> Any:
    """One page of the run's answers."""
    rows, total = browse.list_responses(
        get_session(), path.run_id, limit=query.limit, offset=query.offset
    )
    return page(ResponseOut, rows, total, query.limit, query.offset)


@bp.get("/judge-runs", responses={200: Page[JudgeRunOut]})
def judge_runs(query: PageQuery) -> Any:
    """Judge runs with their scored and unscored counts, oldest first."""
    rows, total = page_judge_runs(get_session(), limit=query.limit, offset=query.offset)
    return page(JudgeRunOut, [asdict(r) for r in rows], total, query.limit, query.offset)


@bp.get("/judge-runs/<int:run_id>", responses={200: JudgeRunOut})
def judge_run(path: RunPath) -> Any:
    """One judge run."""
    from server.usecases.standing import judge_run_with_standing

    return asdict(judge_run_with_standing(get_session(), path.run_id))


@bp.get("/judge-runs/<int:run_id>/metrics", responses={200: MetricsOut})
def metrics(path: RunPath) -> Any:
    """FairMonitor's stage metrics of the run, per factor and overall, with CIs."""
    return usecases.run_metrics(get_session(), path.run_id)


@bp.get("/judge-runs/<int:run_id>/agreement", responses={200: AgreementOut, 202: ComputingOut})
def agreement(path: RunPath, query: AgreementQuery) -> Any:
    """Judge-human and human-human agreement for the run's answers (needs human ratings), on
    the ratings of the campaigns named (every campaign's when none is).

    The shape of `fairjudge agreement --json`: per rubric, the humans among themselves and
    this judge run against them, every coefficient as numbers (null when undefined, with
    the reason). Served kept while the run's rows are unchanged; after a write, the latest
    kept answer (`X-Figures-Stale: true` and a `stale` field) while it is computed again;
    202 with `Retry-After` while none was ever kept (ask again)."""
    from server.kept.serving import api_answer, kept_figures
    from server.usecases.agreement import AgreementRequest
    from server.usecases.dashboard import agreement_json_options, page_key

    options = query.model_dump(exclude={"campaign"})
    request = AgreementRequest(judge_run=path.run_id, campaigns=query.campaign, **options)
    key = page_key("agreement-json", path.run_id, agreement_json_options(request))
    return api_answer(kept_figures(key), lambda value: value)
