"""Bringing human ratings (and expert reviews) back from Label Studio into the store.

A pull reads the whole project in one export, checks every annotation, and only then writes,
in one transaction: Label Studio stopping or answering slowly halfway leaves the store as it
was, and the next pull completes. Pulling is idempotent: an annotation already stored with
the same values changes nothing; an edited one updates its ``HumanRating`` and keeps the old
value as a ``RatingChange``; one deleted in Label Studio is marked withdrawn (kept, with its
history, and no longer used). Annotations that cannot be used (a task that is not ours, a
score off the scale) are reported with the task id and the reason; the others are stored.

A review campaign's pull writes each reviewed item's decision (accepted, edited or rejected;
a draft waiting for review counts as not reviewed yet) into ``Item.review_status`` and the
reason, reviewer and edits into ``Item.review``; the item's own fields are never changed.

A pull first asks Label Studio for the project's counts and for tasks changed since the last
complete pull (two small requests); when nothing changed it reads no export at all, also when
the last pull found problems: they are kept with what it saw and reported again as they were.
The export itself is a snapshot Label Studio builds while we wait on it
(``annotation.labelstudio.exports``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session, col, func, select

from annotation.errors import CampaignError
from annotation.labelstudio import interface
from annotation.labelstudio.campaigns import get_campaign
from annotation.labelstudio.client import LabelStudioClient, Say
from annotation.labelstudio.counted import Sorted, campaign_tasks, read_scores, sort_annotations
from judge.data.items import DECIDED
from judge.store.rating_scope import campaign_scope
from judge.store.tables import Campaign, CampaignTask, HumanRating, Item, RatingChange, utcnow

SOURCE = "labelstudio"


@dataclass
class PullResult:
    campaign: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    withdrawn: int = 0
    skipped: int = 0  # annotations cancelled ("skipped") in Label Studio
    problems: list[tuple[int, str]] = field(default_factory=list)  # (task id, reason)
    rated_twice: list[tuple[str, str]] = field(default_factory=list)  # (rater, item key)
    # (task id, "rater: leaves X unscored"): annotations stored without the rubrics they
    # leave out (the scores they have are stored; the task is not complete)
    incomplete: list[tuple[int, str]] = field(default_factory=list)
    # (author, editor, item key): annotations last changed by someone other than their author
    cross_edited: list[tuple[str, str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "withdrawn": self.withdrawn,
            "skipped": self.skipped,
            "problems": [{"task": t, "reason": r} for t, r in self.problems],
            "rated_twice": [{"rater": r, "item": k} for r, k in self.rated_twice],
            "incomplete": [{"task": t, "reason": r} for t, r in self.incomplete],
            "cross_edited": [
                {"author": a, "editor": e, "item": k} for a, e, k in self.cross_edited
            ],
        }


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    text = str(value).replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class _Pulled:
    annotation_id: int
    item_id: int
    item_key: str
    rater: str
    rubric: str
    score: float
    rationale: str | None
    created_at: datetime | None
    updated_at: datetime | None
    lead_time_s: float | None


def pull_campaign(
    session: Session, client: LabelStudioClient, name: str, *, progress: Say | None = None
) -> PullResult:
    """Store the campaign's annotations (see the module docstring); ``progress`` hears a
    line now and then while Label Studio builds the export."""
    campaign = get_campaign(session, name)
    if campaign.ls_project_id is None:
        raise CampaignError(
            f"campaign {name!r} has no Label Studio project yet; run `fairjudge campaign "
            "create` again with the same options to finish creating it"
        )
    # Everything from Label Studio first: a failure here writes nothing.
    counts = client.project_counts(campaign.ls_project_id)
    if _nothing_new(session, client, campaign, counts):
        return _unchanged(session, campaign)
    exported = client.export_tasks(campaign.ls_project_id, tasks=counts["tasks"], progress=progress)
    users = client.users()
    tasks = campaign_tasks(session, campaign.id)
    result = PullResult(name)
    if campaign.kind == "review":
        _pull_reviews(session, campaign, exported, users, tasks, result)
    else:
        _pull_ratings(session, campaign, exported, users, tasks, result)
    campaign.pulled_at = utcnow()
    marks = [str(t["updated_at"]) for t in exported if t.get("updated_at")]
    campaign.design = {
        **campaign.design,
        MARK: {
            **counts,
            "updated_at": max(marks) if len(marks) == len(exported) and marks else None,
            "problems": len(result.problems) + len(result.incomplete),
            # Reported again by a pull that finds nothing new, so both say the same; with
            # them kept here, a campaign with a stored problem still pulls cheaply.
            "skipped_seen": result.skipped,
            REPORTED: _reported(result),
        },
    }
    session.add(campaign)
    session.commit()
    return result


# What the last complete pull saw, kept in the campaign's design: Label Studio's counts (read
# before the export) and the latest task ``updated_at`` in the export. A pull that finds the
# same counts and no task changed since that moment has nothing to read: creating, editing,
# deleting or skipping an annotation changes a count or moves its task's ``updated_at``.
MARK = "last_pull"


def _nothing_new(
    session: Session, client: LabelStudioClient, campaign: Campaign, counts: dict[str, int]
) -> bool:
    mark = campaign.design.get(MARK)
    if not isinstance(mark, dict) or not mark.get("updated_at"):
        return False
    if mark.get("problems") and not isinstance(mark.get(REPORTED), dict):
        return False  # a mark from before problems were kept: read them again once
    if any(mark.get(k) != v for k, v in counts.items()):
        return False
    assert campaign.ls_project_id is not None
    return client.tasks_updated_after(campaign.ls_project_id, str(mark["updated_at"])) == 0


def _unchanged(session: Session, campaign: Campaign) -> PullResult:
    """The result of a pull that found nothing new: every live rating is unchanged."""
    live = session.exec(
        select(func.count())
        .select_from(HumanRating)
        .where(HumanRating.campaign_id == campaign.id, col(HumanRating.withdrawn_at).is_(None))
    ).one()
    if campaign.kind == "review":
        live = session.exec(
            select(func.count())
            .select_from(CampaignTask)
            .join(Item, col(Item.id) == CampaignTask.item_id)
            .where(CampaignTask.campaign_id == campaign.id, col(Item.review_status).in_(DECIDED))
        ).one()
    campaign.pulled_at = utcnow()
    session.add(campaign)
    session.commit()
    mark = campaign.design.get(MARK, {})
    # A mark written before "skipped_seen" existed has Label Studio's own count of the project.
    skipped = int(mark.get("skipped_seen", mark.get("skipped", 0)))
    reported = mark.get(REPORTED)
    if not isinstance(reported, dict):
        return PullResult(campaign.name, unchanged=int(live), skipped=skipped)
    # What the last full pull read, reported again as it said it: its problems, and as
    # unchanged the ratings it read (not those it left in place beside a problem).
    return PullResult(
        campaign.name,
        unchanged=int(reported.get("read", live)),
        skipped=skipped,
        problems=[(int(t), str(r)) for t, r in reported.get("problems", [])],
        rated_twice=[(str(a), str(k)) for a, k in reported.get("rated_twice", [])],
        incomplete=[(int(t), str(r)) for t, r in reported.get("incomplete", [])],
        cross_edited=[(str(a), str(e), str(k)) for a, e, k in reported.get("cross_edited", [])],
    )


REPORTED = "reported"  # the last full pull's problems, in its mark


def _reported(result: PullResult) -> dict[str, Any]:
    """What a pull that finds nothing new says again (``_unchanged``)."""
    return {
        "read": result.added + result.updated + result.unchanged,
        "problems": [list(p) for p in result.problems],
        "rated_twice": [list(p) for p in result.rated_twice],
        "incomplete": [list(p) for p in result.incomplete],
        "cross_edited": [list(p) for p in result.cross_edited],
    }


def _read(
    exported: list[dict[str, Any]],
    users: dict[int, str],
    tasks: dict[str, tuple[CampaignTask, str]],
    result: PullResult,
) -> Sorted:
    """The annotations that count (``annotation.labelstudio.counted``, the rule ``campaign
    status`` follows too), the others reported in ``result``."""
    found = sort_annotations(exported, users, tasks)
    result.skipped += len(found.skipped)
    result.problems.extend(found.problems)
    result.rated_twice.extend(found.rated_twice)
    result.cross_edited.extend(found.cross_edited)
    return found


def _pull_ratings(
    session: Session,
    campaign: Campaign,
    exported: list[dict[str, Any]],
    users: dict[int, str],
    tasks: dict[str, tuple[CampaignTask, str]],
    result: PullResult,
) -> None:
    """Store a rating campaign's export: new ratings added, changed ones updated with their
    old value kept as history, and ratings whose annotation is gone marked withdrawn."""
    assert campaign.generation_run_id is not None and campaign.id is not None
    pulled, unreadable = _pulled_scores(campaign, _read(exported, users, tasks, result), result)
    # Only this campaign's own ratings: another campaign over the same answers keeps its own
    # rows (and history), whichever was pulled last.
    scope = campaign_scope(campaign.id)
    stored = {
        (r.item_id, r.rubric, r.rater): r
        for r in session.exec(
            select(HumanRating).where(
                HumanRating.generation_run_id == campaign.generation_run_id,
                HumanRating.scope == scope,
            )
        )
    }
    now = utcnow()
    seen = _store_pulled(session, campaign, scope, pulled, stored, now, result)
    _withdraw_gone(session, stored, seen, unreadable, now, result)


def _pulled_scores(
    campaign: Campaign, found: Sorted, result: PullResult
) -> tuple[list[_Pulled], set[tuple[int, str]]]:
    """One ``_Pulled`` per score of each annotation that counts, and the (item, rater) pairs
    whose stored ratings stay as they are: an annotation that could not be read (reported,
    not withdrawn) or one held out as cross-edited (its author's rating is kept)."""
    pulled: list[_Pulled] = []
    unreadable: set[tuple[int, str]] = set(found.held)
    for counted in found.counted:
        ann, task, item_key, rater = (
            counted.annotation,
            counted.task,
            counted.item_key,
            counted.rater,
        )
        try:
            # A rubric left unscored is not an error here: the scores given are stored and the
            # annotation is reported incomplete. A rubric the task lacks is one.
            values, missing = read_scores(campaign, counted)
        except CampaignError as exc:
            result.problems.append((int(task.ls_task_id or 0), f"{rater}: {exc}"))
            unreadable.add((task.item_id, rater))
            continue
        if missing:
            result.incomplete.append(
                (
                    int(task.ls_task_id or 0),
                    f"{rater} left {', '.join(missing)} unscored on item {item_key}"
                    + ("; the other rubric(s) were stored" if values else ""),
                )
            )
        for rubric, value in values.items():
            pulled.append(
                _Pulled(
                    int(ann["id"]),
                    task.item_id,
                    item_key,
                    rater,
                    rubric,
                    float(value.score),
                    value.rationale,
                    _time(ann.get("created_at")),
                    _time(ann.get("updated_at")),
                    float(ann["lead_time"]) if ann.get("lead_time") is not None else None,
                )
            )
    return pulled, unreadable


def _store_pulled(
    session: Session,
    campaign: Campaign,
    scope: str,
    pulled: list[_Pulled],
    stored: dict[tuple[int, str, str], HumanRating],
    now: datetime,
    result: PullResult,
) -> set[int]:
    """Add each pulled score that has no stored rating, and update (keeping the old value as
    a ``RatingChange``) each that differs; returns the ids (``id()``) of the rows seen."""
    assert campaign.generation_run_id is not None
    seen: set[int] = set()
    for p in pulled:
        row = stored.get((p.item_id, p.rubric, p.rater))
        if row is None:
            row = HumanRating(
                generation_run_id=campaign.generation_run_id,
                item_id=p.item_id,
                rubric=p.rubric,
                rater=p.rater,
                score=p.score,
                rationale=p.rationale,
                source=SOURCE,
                scope=scope,
                created_at=p.created_at or now,
                campaign_id=campaign.id,
                annotation_id=p.annotation_id,
                updated_at=p.updated_at,
                lead_time_s=p.lead_time_s,
            )
            session.add(row)
            result.added += 1
        else:
            # Same values: unchanged, even when they now come from another annotation of the
            # same person in this campaign (the row keeps its origin).
            same = (
                row.score == p.score and row.rationale == p.rationale and row.withdrawn_at is None
            )
            if same:
                result.unchanged += 1
            else:
                session.flush()
                assert row.id is not None
                change = "restored" if row.withdrawn_at is not None else "edited"
                session.add(
                    RatingChange(
                        rating_id=row.id,
                        change=change,
                        score=row.score,
                        rationale=row.rationale,
                        valid_until=p.updated_at or now,
                    )
                )
                row.score, row.rationale = p.score, p.rationale
                row.updated_at, row.lead_time_s = p.updated_at, p.lead_time_s
                row.annotation_id, row.withdrawn_at = p.annotation_id, None
                session.add(row)
                result.updated += 1
        seen.add(id(row))
    return seen


def _withdraw_gone(
    session: Session,
    stored: dict[tuple[int, str, str], HumanRating],
    seen: set[int],
    unreadable: set[tuple[int, str]],
    now: datetime,
    result: PullResult,
) -> None:
    """Mark withdrawn (kept, with a ``RatingChange``) each live stored rating the pull did not
    see, unless its annotation was unreadable or held out."""
    for row in stored.values():
        if row.withdrawn_at is not None or id(row) in seen:
            continue
        if (row.item_id, row.rater) in unreadable:
            continue
        assert row.id is not None
        session.add(
            RatingChange(
                rating_id=row.id,
                change="withdrawn",
                score=row.score,
                rationale=row.rationale,
                valid_until=now,
            )
        )
        row.withdrawn_at = now
        session.add(row)
        result.withdrawn += 1


def _pull_reviews(
    session: Session,
    campaign: Campaign,
    exported: list[dict[str, Any]],
    users: dict[int, str],
    tasks: dict[str, tuple[CampaignTask, str]],
    result: PullResult,
) -> None:
    by_item: dict[int, list[tuple[dict[str, Any], str]]] = defaultdict(list)
    for counted in _read(exported, users, tasks, result).counted:
        by_item[counted.task.item_id].append((counted.annotation, counted.rater))
    items = {
        i.id: i
        for i in session.exec(select(Item).where(Item.dataset_id == campaign.dataset_id))
        if i.id in by_item
    }
    for item_id, anns in by_item.items():
        item = items[item_id]
        anns.sort(key=lambda pair: str(pair[0].get("updated_at", "")))
        reviews = []
        for ann, rater in anns:
            try:
                value = interface.parse_review(ann.get("result", []), item.fields)
            except CampaignError as exc:
                result.problems.append((int(ann.get("task", 0) or 0), str(exc)))
                continue
            reviews.append(
                {
                    "decision": value.decision,
                    "reason": value.reason,
                    "edits": value.edits,
                    "reviewer": rater,
                    "annotation": ann.get("id"),
                    "at": str(ann.get("updated_at") or ann.get("created_at") or ""),
                }
            )
        if not reviews:
            continue
        latest = reviews[-1]
        status = {"accept": "accepted", "edit": "edited", "reject": "rejected"}[
            str(latest["decision"])
        ]
        review = {**latest, "campaign": campaign.name, "all": reviews}
        if item.review_status == status and item.review == review:
            result.unchanged += 1
            continue
        first = item.review_status not in DECIDED  # never reviewed, or a draft
        result.added += first
        result.updated += not first
        item.review_status, item.review = status, review
        session.add(item)
