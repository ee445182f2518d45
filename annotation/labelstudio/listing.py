"""Reading campaigns back: the list of campaigns, a campaign's ratings exported in the long
format ``ratings import`` reads, and the blind check (no judge output in any task)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from annotation.labelstudio.campaigns import get_campaign, strategy_label
from annotation.labelstudio.client import LabelStudioClient
from judge.store.tables import Campaign, HumanRating, Item, Judgment

# --- blind check ---------------------------------------------------------------------------


def blind_check(session: Session, client: LabelStudioClient, name: str) -> int:
    """Read every task of the campaign back from Label Studio and raise CampaignError if any
    judge output of its judge run (explanation or raw reply) appears in one; returns the
    number of tasks checked."""
    campaign = get_campaign(session, name)
    if campaign.ls_project_id is None or campaign.judge_run_id is None:
        return 0
    forbidden: set[str] = set()
    for explanation, raw in session.exec(
        select(Judgment.explanation, Judgment.raw_output).where(
            Judgment.judge_run_id == campaign.judge_run_id
        )
    ):
        forbidden.update(t for t in (explanation, raw) if t and len(t.strip()) >= 12)
    exported = client.export_tasks(campaign.ls_project_id)
    for task in exported:
        text = json.dumps(task, ensure_ascii=False)
        for secret in forbidden:
            if secret in text:
                raise CampaignError(
                    f"task {task.get('id')} of campaign {name!r} contains judge output: "
                    f"{secret[:60]!r}"
                )
        if task.get("predictions"):
            raise CampaignError(f"task {task.get('id')} of campaign {name!r} has predictions")
    return len(exported)


# --- list and export -------------------------------------------------------------------------


def list_campaigns(session: Session) -> list[dict[str, Any]]:
    """Every campaign as the store has it, with its live ratings counted, oldest first."""
    out = []
    for c in session.exec(select(Campaign).order_by(col(Campaign.id))):
        ratings = session.exec(
            select(HumanRating.id).where(
                HumanRating.campaign_id == c.id, col(HumanRating.withdrawn_at).is_(None)
            )
        ).all()
        out.append(
            {
                "name": c.name,
                "kind": c.kind,
                "judge_run": c.judge_run_id,
                "dataset": c.dataset_id,
                "strategy": strategy_label(c),
                "size": c.size,
                "population": c.population,
                "annotators": c.annotators,
                "project": c.ls_project_id,
                "ratings": len(ratings),
                "pulled_at": c.pulled_at.isoformat() if c.pulled_at else None,
            }
        )
    return out


EXPORT_COLUMNS = ("item_id", "rubric", "rater", "score", "rationale")


def export_campaign(session: Session, name: str, path: str | Path) -> int:
    """Write the campaign's current ratings in the long format ``ratings import`` reads (CSV,
    or JSONL when ``path`` ends in .jsonl); returns the number of rows."""
    campaign = get_campaign(session, name)
    rows = session.exec(
        select(HumanRating, Item.key)
        .join(Item, col(Item.id) == HumanRating.item_id)
        .where(HumanRating.campaign_id == campaign.id, col(HumanRating.withdrawn_at).is_(None))
        .order_by(col(Item.key), col(HumanRating.rubric), col(HumanRating.rater))
    ).all()
    records = [
        {
            "item_id": key,
            "rubric": r.rubric,
            "rater": r.rater,
            "score": r.score,
            "rationale": r.rationale or "",
        }
        for r, key in rows
    ]
    path = Path(path)
    try:
        with path.open("w", encoding="utf-8", newline="") as handle:
            if path.suffix == ".jsonl":
                for record in records:
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            else:
                writer = csv.DictWriter(handle, fieldnames=EXPORT_COLUMNS)
                writer.writeheader()
                writer.writerows(records)
    except OSError as exc:
        from judge.errors import OutputError

        raise OutputError(f"cannot write {path}: {exc.strerror}") from None
    return len(records)
