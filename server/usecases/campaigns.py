"""Annotation campaigns in Label Studio: rating campaigns of a judge run's answers, review
campaigns of a dataset's items, their gold items, pulls, status and exports, the annotators,
and the award audit's follow-up campaigns."""

from __future__ import annotations

import csv
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.errors import InvalidInputError
from server.usecases.context import labelstudio
from server.usecases.rubrics import rubrics

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from annotation.labelstudio.annotators import NewAnnotator
    from annotation.labelstudio.audit_campaign import FollowupPull
    from annotation.labelstudio.campaigns import CreateResult
    from annotation.labelstudio.client import LabelStudioClient
    from annotation.labelstudio.pull import PullResult
    from annotation.labelstudio.service import LabelStudioService
    from judge.config import Settings
    from judge.errors import FairJudgeError
    from judge.store.tables import Campaign

Note = Callable[[str], None]
"""Where a long step says what it is doing (a line of text)."""


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


@contextmanager
def labelstudio_session(
    engine: Engine, settings: Settings
) -> Iterator[tuple[Session, LabelStudioClient, LabelStudioService | None]]:
    """A client for the Label Studio campaigns use (its manager too when it is FairJudge's
    own; LabelStudioError first when it does not answer), then a store session committed at
    the end."""
    from judge.store.engine import session_scope

    client, service = labelstudio(settings)
    with session_scope(engine) as session:
        yield session, client, service


def get_campaign(session: Session, name: str) -> Campaign:
    """The campaign called ``name``; NotFoundError naming the known ones."""
    from annotation.labelstudio.campaigns import get_campaign as get

    return get(session, name)


def create_rating_campaign(
    engine: Engine, settings: Settings, *, gold_file: str | Path | None = None, **options: Any
) -> dict[str, Any]:
    """``create_campaign`` with the gold items of ``gold_file`` (read, and refused when bad,
    before anything else: every problem of the file at once), in a session of its own."""
    from annotation.labelstudio.gold import read_gold
    from judge.store.engine import session_scope

    gold = read_gold(gold_file, strict=False) if gold_file is not None else ()
    with session_scope(engine) as session:
        result, _ = create_campaign(session, settings, gold=gold, **options)
        return result.to_dict()


def add_gold(
    engine: Engine, settings: Settings, name: str, path: str | Path, progress: Note
) -> dict[str, Any]:
    """Add the gold items of a CSV (item_id, rubric, score) to rating campaign ``name`` and
    send their tasks to Label Studio; the same file again adds nothing."""
    from annotation.labelstudio.campaigns import add_gold as add
    from annotation.labelstudio.gold import read_gold

    rows = read_gold(path, strict=False)  # every problem listed once the rows are checked
    with labelstudio_session(engine, settings) as (session, client, _):
        found = get_campaign(session, name)
        applied = rubrics(settings, session, judge_run_id=found.judge_run_id)
        added, imported = add(session, client, applied, name, rows, progress=progress)
        total = len(found.design.get("gold", {}))
    return {"campaign": name, "added": added, "imported": imported, "gold_items": total}


def add_gold_rows(
    engine: Engine, settings: Settings, name: str, rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``add_gold`` for gold rows sent as JSON objects (item_id, rubric, score), read exactly
    like the lines of a gold CSV file; a problem names the row (row 1 is the first)."""

    from annotation.errors import CampaignError

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gold.csv"
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["item_id", "rubric", "score"])
            writer.writerows([r.get("item_id"), r.get("rubric"), r.get("score")] for r in rows)
        try:
            return add_gold(engine, settings, name, path, progress=lambda _: None)
        except CampaignError as exc:
            # the file's line N is row N - 1 of the request
            message = (
                re.sub(r"line (\d+)", lambda m: f"row {int(m.group(1)) - 1}", str(exc))
                .replace(f"gold file {path}", "the gold rows")
                .replace(str(path), "the gold rows")
            )
            raise CampaignError(message) from None


def create_review(engine: Engine, settings: Settings, **options: Any) -> dict[str, Any]:
    """A review campaign of a dataset's items (``options``: those of
    ``annotation.labelstudio.reviews.create_review``)."""
    from annotation.labelstudio.reviews import create_review as create

    with labelstudio_session(engine, settings) as (session, client, _):
        return create(session, client, rubrics(settings), **options).to_dict()


def pull_campaign(
    engine: Engine, settings: Settings, name: str, progress: Note | None = None
) -> PullResult:
    """Store the campaign's ratings (or reviews) from Label Studio (idempotent); ``progress``
    hears a line now and then while Label Studio builds a long export."""
    from annotation.labelstudio.pull import pull_campaign as pull

    with labelstudio_session(engine, settings) as (session, client, _):
        return pull(session, client, name, progress=progress)


def campaign_status(
    session: Session,
    client: LabelStudioClient,
    name: str,
    *,
    offset_margin: float | None = None,
    min_kappa: float | None = None,
) -> dict[str, Any]:
    """Progress read live from Label Studio (nothing is stored); unset thresholds are the
    domain's defaults (``annotation.labelstudio.status.campaign_status``)."""
    from annotation.labelstudio.status import campaign_status as status

    given = {"offset_margin": offset_margin, "min_kappa": min_kappa}
    thresholds = {k: v for k, v in given.items() if v is not None}
    return status(session, client, name, **thresholds).to_dict()


def list_campaigns(session: Session) -> list[dict[str, Any]]:
    """Every campaign with its design and the ratings pulled so far."""
    from annotation.labelstudio.listing import list_campaigns as listed

    return listed(session)


def list_campaigns_in(engine: Engine) -> list[dict[str, Any]]:
    """``list_campaigns`` in a session of its own."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return list_campaigns(session)


def export_campaign(engine: Engine, name: str, path: str | Path) -> int:
    """Write the campaign's ratings in the long format ``ratings import`` reads; the rows."""
    from annotation.labelstudio.listing import export_campaign as export
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return export(session, name, path)


def export_campaign_text(engine: Engine, name: str) -> str:
    """``export_campaign`` as CSV text (what ``campaign export`` writes to its file)."""

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ratings.csv"
        export_campaign(engine, name, path)
        return path.read_text(encoding="utf-8")


def add_annotator(engine: Engine, settings: Settings, email: str, name: str) -> NewAnnotator:
    """A Label Studio user for ``email`` (and how the person logs in)."""
    from annotation.labelstudio.annotators import add_annotator as add

    with labelstudio_session(engine, settings) as (session, client, service):
        return add(session, client, email, name, service=service)


def list_annotators(engine: Engine) -> list[dict[str, Any]]:
    """Each annotator with their campaigns and progress as of the last pull."""
    from annotation.labelstudio.annotators import list_annotators as listed
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return listed(session)


def create_followup_campaign(
    engine: Engine,
    settings: Settings,
    run_id: int,
    *,
    title: str | None = None,
    annotators: int = 2,
    project_id: int | None = None,
) -> dict[str, Any]:
    """Send an award audit run's follow-up explanations to Label Studio, one task each, for
    people to classify (the chosen student's group is not shown)."""
    from annotation.labelstudio.audit_campaign import create_followup_campaign as create

    client, _ = labelstudio(settings)
    made = create(engine, client, run_id, title=title, annotators=annotators, project_id=project_id)
    return made.to_dict()


def pull_followup_labels(
    engine: Engine, settings: Settings, run_id: int, project_id: int
) -> FollowupPull:
    """Store each person's class of an award run's follow-ups from the Label Studio
    project (idempotent; a changed choice replaces the stored one)."""
    from annotation.labelstudio.audit_campaign import pull_followup_labels as pull

    client, _ = labelstudio(settings)
    return pull(engine, client, run_id, project_id)


def task_problems(message: str, problems: list[tuple[int, str]]) -> FairJudgeError:
    """The error a pull ends with when some annotations could not be stored (the rest
    were): ``message`` and each problem."""
    from annotation.errors import TaskProblemsError

    return TaskProblemsError(message, problems)
