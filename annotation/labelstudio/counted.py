"""Which annotations of a Label Studio export count as ratings: the one rule the pull
(``annotation.labelstudio.pull``) and ``campaign status`` (``annotation.labelstudio.status``)
both follow, so that what status shows is what the pull stores.

An annotation counts when it is a task of the campaign, was not skipped, has a known author,
and was last changed by its author; of several annotations by one person on one task, the
latest counts. An annotation last changed by someone else (Label Studio Community lets any
member edit anyone's annotation) is held out: its values are neither the author's nor the
editor's own rating, so the author's stored rating stays until the author submits again.
A rating annotation's scores are read by ``read_scores``: a rubric the task lacks, or one the
campaign does not rate, makes it unreadable; a rubric left unscored makes it incomplete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from annotation.labelstudio import interface
from annotation.labelstudio.client import annotations_of
from judge.store.tables import Campaign, CampaignTask, Item


@dataclass(frozen=True)
class Counted:
    """An annotation that counts, with its campaign task, item key, author and task data."""

    annotation: dict[str, Any]
    task: CampaignTask
    item_key: str
    rater: str
    data: dict[str, Any]


@dataclass
class Sorted:
    """An export's annotations sorted by the rule of the module docstring."""

    counted: list[Counted] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (annotator, item key)
    problems: list[tuple[int, str]] = field(default_factory=list)  # (task id, reason)
    rated_twice: list[tuple[str, str]] = field(default_factory=list)  # (rater, item key)
    # (author, editor, item key) of held-out annotations, and their (item id, author) pairs
    cross_edited: list[tuple[str, str, str]] = field(default_factory=list)
    held: set[tuple[int, str]] = field(default_factory=set)


def campaign_tasks(
    session: Session, campaign_id: int | None
) -> dict[str, tuple[CampaignTask, str]]:
    """The campaign's tasks by our task key, each with its item's key: what
    ``sort_annotations`` matches an export's tasks against."""
    return {
        task.task_key: (task, key)
        for task, key in session.exec(
            select(CampaignTask, Item.key)
            .join(Item, col(Item.id) == CampaignTask.item_id)
            .where(CampaignTask.campaign_id == campaign_id)
        )
    }


def sort_annotations(
    exported: list[dict[str, Any]],
    users: dict[int, str],
    tasks: dict[str, tuple[CampaignTask, str]],
) -> Sorted:
    """The annotations of ``exported`` that count, and why the others do not (``tasks``:
    our task key -> (campaign task, item key); ``users``: Label Studio user id -> e-mail)."""
    out = Sorted()
    latest: dict[tuple[str, str], Counted] = {}
    for task in exported:
        task_id = int(task.get("id", 0))
        data = task.get("data", {})
        key = data.get(interface.TASK_KEY)
        if key not in tasks:
            if annotations_of(task):
                out.problems.append(
                    (task_id, "not a task of this campaign (no FairJudge id); left alone")
                )
            continue
        ours, item_key = tasks[key]
        for ann in annotations_of(task):
            user = ann.get("completed_by")
            rater = users.get(user) if isinstance(user, int) else None
            if ann.get("was_cancelled"):
                out.skipped.append((rater or f"user {user}", item_key))
                continue
            if rater is None:
                out.problems.append((task_id, f"annotation {ann.get('id')} has no known author"))
                continue
            editor = ann.get("updated_by")
            if isinstance(editor, int) and editor != user:
                by = users.get(editor, f"user {editor}")
                out.cross_edited.append((rater, by, item_key))
                out.problems.append(
                    (
                        task_id,
                        f"annotation {ann.get('id')} by {rater} was last changed by {by}: "
                        f"held out until {rater} submits it again",
                    )
                )
                out.held.add((ours.item_id, rater))
                continue
            pair = (rater, item_key)
            if pair in latest:
                out.rated_twice.append(pair)
                if str(ann.get("updated_at", "")) < str(
                    latest[pair].annotation.get("updated_at", "")
                ):
                    continue
            latest[pair] = Counted(ann, ours, item_key, rater, data)
    out.counted = list(latest.values())
    return out


def read_scores(
    campaign: Campaign, counted: Counted
) -> tuple[dict[str, interface.RatingValue], list[str]]:
    """A counted rating annotation's scores (rubric -> value, each on the scale its task
    offered) and the task's rubrics it leaves unscored; CampaignError when it cannot be read
    or scores a rubric the task lacks or the campaign does not rate."""
    data = counted.data
    scales = interface.offered_scales(data)
    values = interface.parse_rating(counted.annotation.get("result", []), scales=scales)
    wanted = list(data.get("fj_rubrics") or values)
    extra = sorted(set(values) - set(wanted))
    if extra:
        raise CampaignError(f"annotation scores {', '.join(extra)}, which the task lacks")
    unknown = sorted(set(values) - set(campaign.rubrics))
    if unknown:
        raise CampaignError(f"rubric(s) {', '.join(unknown)} are not in the campaign")
    return values, [r for r in wanted if r not in values]
