"""A campaign's Label Studio project: found again or made once (its interface built from the
rubrics, or the review interface), and the campaign's tasks pushed to it, never twice."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from sqlmodel import Session, col, select

from annotation.errors import CampaignError, LabelStudioError
from annotation.labelstudio import interface
from annotation.labelstudio.client import LabelStudioClient
from judge.grading.rubrics import Rubric, RubricSet
from judge.store.queries import responses_by_item
from judge.store.tables import Campaign, CampaignTask, Item

Say = Callable[[str], None]
"""Receives one line for people about a long step (the project being made, tasks imported);
lines of words, unlike ``judge.progress.Progress``, which counts finished tasks."""
IMPORT_CHUNK = 1000


def quiet(_: str) -> None:
    """A ``Say`` that says nothing."""
    pass


def rubrics_of(rubric_set: RubricSet, names: Iterable[str]) -> list[Rubric]:
    """The rubrics of ``rubric_set`` named in ``names``, in that order."""
    return [rubric_set[n] for n in names]


def ensure_project(
    session: Session,
    client: LabelStudioClient,
    rubric_set: RubricSet,
    campaign: Campaign,
    progress: Say,
) -> None:
    """Give the campaign its Label Studio project (found again or made, with the rating or
    review interface); CampaignError when its stored project is gone from the server."""
    if campaign.ls_project_id is not None:
        if client.project_exists(campaign.ls_project_id):
            return
        raise CampaignError(
            f"campaign {campaign.name!r}'s project {campaign.ls_project_id} is gone from "
            f"{client.url}; its ratings stay stored, but its tasks cannot be reached"
        )
    if campaign.kind == "review":
        config = interface.review_config()
        instructions = "Accept, edit or reject each test item; give a reason for a rejection."
    else:
        config = interface.label_config(rubrics_of(rubric_set, campaign.rubrics))
        instructions = (
            "Rate each answer on every scale shown, reading each level's definition. "
            "Judge scores are not shown, on purpose."
        )
    campaign.ls_project_id = _find_or_create_project(
        session, client, campaign, instructions, config, progress
    )
    session.add(campaign)
    session.commit()


PROJECT_KEY = "project_key"  # the design key of the marker our project's description carries


def _find_or_create_project(
    session: Session,
    client: LabelStudioClient,
    campaign: Campaign,
    instructions: str,
    config: str,
    progress: Say,
) -> int:
    """The campaign's project: found again by the key its description carries (a create whose
    answer was lost, or that Label Studio failed after making the project), else made once.
    The key is stored before the project is asked for, so every retry looks for the same."""
    key = campaign.design.get(PROJECT_KEY)
    if not isinstance(key, str):
        key = uuid.uuid4().hex
        campaign.design = {**campaign.design, PROJECT_KEY: key}
        session.add(campaign)
        session.commit()
    title, marker = f"FairJudge {campaign.name}", f"[FairJudge campaign key {key}]"
    found = client.find_projects(title, marker)
    if not found:
        progress(f"creating the Label Studio project for campaign {campaign.name!r}")
        try:
            return client.create_project(
                title=title,
                description=f"{instructions}\n\n{marker}",
                label_config=config,
                overlap=campaign.annotators,
            )
        except LabelStudioError:
            found = client.find_projects(title, marker)  # made before the error answer?
            if not found:
                raise
    if len(found) > 1:
        progress(
            f"{len(found)} Label Studio projects carry campaign {campaign.name!r}'s key "
            f"({', '.join(map(str, found))}); using the first, {found[0]}"
        )
    progress(f"found campaign {campaign.name!r}'s Label Studio project {found[0]} again")
    return found[0]


def push_tasks(
    session: Session,
    client: LabelStudioClient,
    rubric_set: RubricSet,
    campaign: Campaign,
    progress: Say,
) -> tuple[int, int]:
    """Import the campaign's tasks Label Studio lacks; (imported, already there)."""
    assert campaign.ls_project_id is not None and campaign.id is not None
    tasks = session.exec(
        select(CampaignTask)
        .where(CampaignTask.campaign_id == campaign.id)
        .order_by(col(CampaignTask.id))
    ).all()
    there = client.task_ids_by_key(campaign.ls_project_id)
    already = 0
    for task in tasks:
        if task.task_key in there and task.ls_task_id != there[task.task_key]:
            task.ls_task_id = there[task.task_key]
            session.add(task)
        if task.task_key in there:
            already += 1
    session.commit()
    missing = [t for t in tasks if t.task_key not in there]
    if not missing:
        return 0, already
    wanted = {t.item_id for t in missing}
    items = {
        i.id: i
        for i in session.exec(select(Item).where(Item.dataset_id == campaign.dataset_id))
        if i.id in wanted
    }
    answers = (
        responses_by_item(session, campaign.generation_run_id)
        if campaign.generation_run_id is not None
        else {}
    )
    imported = 0
    for start in range(0, len(missing), IMPORT_CHUNK):
        chunk = missing[start : start + IMPORT_CHUNK]
        data = [_task_data(campaign, rubric_set, t, items[t.item_id], answers) for t in chunk]
        ids = client.import_tasks(campaign.ls_project_id, data)
        for task, task_id in zip(chunk, ids, strict=True):
            task.ls_task_id = task_id
            session.add(task)
        session.commit()
        imported += len(chunk)
        progress(f"imported {imported + already} of {len(tasks)} tasks")
    return imported, already


def _task_data(
    campaign: Campaign,
    rubric_set: RubricSet,
    task: CampaignTask,
    item: Item,
    answers: dict[int, dict[str, Any]],
) -> dict[str, Any]:
    if campaign.kind == "review":
        data = interface.review_task_data(item.key, item.stage, item.fields, campaign.name)
    else:
        texts = {part: row.raw_text or "" for part, row in answers.get(item.id or -1, {}).items()}
        data = interface.task_data(
            item.key,
            item.stage,
            rubrics_of(rubric_set, campaign.rubrics),
            item.fields,
            texts,
            campaign.name,
        )
    assert data[interface.TASK_KEY] == task.task_key
    return data
