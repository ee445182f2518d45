"""Review campaigns: a dataset's items put before experts (accept, edit or reject), kept by
their selection so that asking again adds the items that match since."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from annotation.labelstudio.campaigns import CreateResult
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.projects import Say, ensure_project, push_tasks, quiet
from judge.data.items import status_filter, status_name
from judge.grading.rubrics import RubricSet
from judge.store.queries import get_dataset
from judge.store.tables import Campaign, CampaignTask, Item


def create_review(
    session: Session,
    client: LabelStudioClient,
    rubric_set: RubricSet,
    *,
    dataset: str,
    item_keys: Sequence[str] = (),
    statuses: Sequence[str] = (),
    reviewers: int = 1,
    name: str | None = None,
    progress: Say = quiet,
) -> CreateResult:
    """Put a dataset's items before experts as a review campaign: all of them, or those named
    in ``item_keys`` and/or whose review status is in ``statuses`` (e.g. ``("draft",)`` for
    the generated items waiting for review; ``"unreviewed"`` names items never reviewed).

    The campaign keeps its selection. Asking again with the same name and selection finishes
    an interrupted creation and adds the items that match now and are not in it yet (drafts
    generated since), one task each, never twice; a different selection under the same name
    is refused. A new campaign with no matching item is refused."""
    data = get_dataset(session, dataset)
    assert data.id is not None
    wanted = sorted(status_name(s) for s in status_filter(statuses, argument="--status"))
    selection = {"items": sorted(set(item_keys)), "statuses": wanted}
    name = name or review_name(dataset, wanted)
    campaign = session.exec(select(Campaign).where(Campaign.name == name)).first()
    items: list[Item] = []
    if campaign is not None:
        if campaign.kind != "review" or campaign.dataset_id != data.id:
            raise CampaignError(f"campaign {name!r} already exists for something else")
        held = campaign.design.get("selection")
        if held is not None and (held != selection or campaign.annotators != reviewers):
            raise CampaignError(
                f"review campaign {name!r} already exists with {_described(held)} and "
                f"{campaign.annotators} reviewer(s) per item; give the same options to add "
                "new matching items to it, or choose another --name"
            )
    # A campaign made before selections were kept is only finished, never added to.
    if campaign is None or "selection" in campaign.design:
        items = _review_items(session, data.id, dataset, item_keys, wanted)
    if campaign is None:
        if not items:
            raise CampaignError(f"dataset {dataset!r} has no {_described(selection)} to review")
        campaign = Campaign(
            name=name,
            kind="review",
            dataset_id=data.id,
            strategy="all",
            population=0,
            size=0,
            annotators=reviewers,
            design={"selection": selection},
            ls_url=client.url,
        )
        session.add(campaign)
        session.flush()
    assert campaign.id is not None
    present = set(
        session.exec(select(CampaignTask.item_id).where(CampaignTask.campaign_id == campaign.id))
    )
    added = [i for i in items if i.id not in present]
    for item in added:
        assert item.id is not None
        session.add(
            CampaignTask(campaign_id=campaign.id, item_id=item.id, task_key=f"{name}:{item.key}")
        )
    created = not present
    campaign.population = campaign.size = len(present) + len(added)
    session.add(campaign)
    session.commit()
    result = CreateResult(campaign, created, 0, 0)
    if present and added:
        result.notes.append(f"{len(added)} item(s) added to the {len(present)} already in it")
    ensure_project(session, client, rubric_set, result.campaign, progress)
    result.imported, result.already_there = push_tasks(
        session, client, rubric_set, result.campaign, progress
    )
    return result


def review_name(dataset: str, statuses: Sequence[str] = ()) -> str:
    """The default name of a review campaign: review-DATASET, plus the statuses it selects
    (review-DATASET-draft for the drafts), so that a review of the drafts does not take the
    name of a review of the whole dataset."""
    return "-".join(["review", dataset, *statuses])


def _described(selection: dict[str, Any]) -> str:
    """A review selection in words, e.g. 'draft items' or 'items among s1-a, s1-b'."""
    statuses = " or ".join(selection.get("statuses", []))
    keys = selection.get("items", [])
    named = f" among {', '.join(keys[:10])}" if keys else ""
    return f"{statuses + ' ' if statuses else ''}items{named}"


def _review_items(
    session: Session, dataset_id: int, dataset: str, item_keys: Sequence[str], statuses: list[str]
) -> list[Item]:
    """The dataset's items a review selection matches, in id order."""
    items = list(
        session.exec(select(Item).where(Item.dataset_id == dataset_id).order_by(col(Item.id)))
    )
    if item_keys:
        wanted = set(item_keys)
        unknown = sorted(wanted - {i.key for i in items})
        if unknown:
            raise CampaignError(f"dataset {dataset!r} has no item(s) {', '.join(unknown[:10])}")
        items = [i for i in items if i.key in wanted]
    if statuses:
        items = [i for i in items if status_name(i.review_status) in statuses]
    return items
