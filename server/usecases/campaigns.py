"""Annotation campaigns: creating one in Label Studio for a generation run's answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from server.usecases.context import labelstudio
from server.usecases.rubrics import rubrics

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlmodel import Session

    from annotation.labelstudio.campaigns import CreateResult
    from judge.config import Settings


def create_campaign(
    session: Session,
    settings: Settings,
    *,
    target_half_width: float | None = None,
    pilot: str | None = None,
    **options: Any,
) -> tuple[CreateResult, str | None]:
    """Sample a judge run's answers into a Label Studio campaign (``options``: those of
    ``annotation.labelstudio.campaigns.create_campaign``); with ``target_half_width`` the
    size is planned for that CI width instead. Returns the result and the plan's reason."""
    from annotation.labelstudio.campaigns import create_campaign as create
    from annotation.labelstudio.campaigns import plan_size
    from judge.errors import InvalidInputError

    if target_half_width is not None and options.get("size") is not None:
        raise InvalidInputError("give a size or a target half width, not both")
    client, _ = labelstudio(settings)
    plan = None if target_half_width is None else plan_size(session, target_half_width, pilot=pilot)
    if plan is not None and "progress" in options:
        options["progress"](plan.reason)
    # Any rubric the judge run applied, built-in or registered, of any number of levels: the
    # interface offers each rubric's own levels and pulls check scores against them.
    applied = rubrics(settings, session, judge_run_id=options["judge_run_id"])
    result = create(session, client, applied, size_plan=plan, **options)
    return result, None if plan is None else plan.reason
