"""The award audit's follow-up explanations classified by the judge (indecisive, justified or
irrational): the run, resumable, and what it would send and cost before it starts (a dry run,
which sizes an audit-classify job against the server's limits: server/usecases/gates.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judge.progress import Progress
from server.usecases.audit_requests import AuditClassifyRequest
from server.usecases.context import make_client

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from judge.runs import RunSummary

__all__ = ["classify_dry_run", "classify_followups"]


def classify_followups(
    engine: Engine,
    settings: Settings,
    run_id: int,
    *,
    endpoint: str | None = None,
    progress: Progress | None = None,
) -> RunSummary:
    """The judge's class for every follow-up explanation of an award run (the judge endpoint
    unless ``endpoint`` names another), at the judge's temperature."""
    from judge.audits.followup import check_award_run
    from judge.audits.followup import classify_followups as classify
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope

    with session_scope(engine) as session:  # a wrong run is named before any endpoint is tried
        check_award_run(session, run_id)
    cfg = settings.judge
    return classify(
        engine,
        make_client(settings, endpoint or cfg.endpoint),
        PromptBook(settings.prompts_path()),
        run_id,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        progress=progress,
    )


def classify_dry_run(
    engine: Engine, settings: Settings, request: AuditClassifyRequest
) -> dict[str, Any]:
    """What ``classify_followups`` would send and cost at the endpoint's prices (one call per
    follow-up not classified yet, none for those the call cache answers), nothing sent."""
    from judge.audits.followup import classify_dry_run as dry_run
    from judge.costs import Prices
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook

    cfg = settings.judge
    name = request.endpoint or cfg.endpoint
    endpoint = settings.endpoint(name)
    return dry_run(
        engine,
        ModelClient(name, endpoint),  # no /models check: a dry run sends nothing
        PromptBook(settings.prompts_path()),
        request.run_id,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        prices=Prices.of(endpoint),
    )
