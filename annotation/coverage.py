"""Which strata of a campaign's sampling design the rated items cover.

A weighted (1 / inclusion probability) estimate stands for the whole judge run only through
the items that were rated. A stratum none of whose items was rated (it got no item in the
sample, or its items are not rated yet) is not in the estimate at all, so the estimate's note
names such strata and the share of the run they hold (``annotation.sampling``'s
``empty_strata_note``). The campaign is found from the rated items themselves: the one rating
campaign that holds every one of them with the very inclusion probabilities being weighted by.

A rubric rates some stages only (ETCS rates S2): the strata of the stages it cannot rate are
neither counted nor named in its note, and the share is of the items it can rate.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlmodel import Session, col, select

from annotation.sampling import empty_strata_note, stratum_stage
from judge.store.tables import Campaign, CampaignTask, Item, Judgment


def uncovered_strata_note(
    session: Session, probabilities: Mapping[int, float], rubric: str | None = None
) -> str:
    """A line naming the strata of the campaign behind ``probabilities`` (rated item ->
    inclusion probability) that have no rated item, with the share of the run they hold;
    "" when every stratum has one, or when no single campaign's design matches. With
    ``rubric``, only the strata of the stages the campaign's judge run rates with it count."""
    if not probabilities:
        return ""
    first = next(iter(probabilities))
    candidates = session.exec(
        select(Campaign)
        .join(CampaignTask, col(CampaignTask.campaign_id) == Campaign.id)
        .where(CampaignTask.item_id == first, Campaign.kind == "rating")
    ).all()
    found: list[tuple[Campaign, set[str]]] = []
    for campaign in candidates:
        strata = campaign.design.get("strata")
        if not isinstance(strata, dict):
            continue
        tasks = {
            int(i): (s, float(p))
            for i, s, p in session.exec(
                select(
                    CampaignTask.item_id, CampaignTask.stratum, CampaignTask.inclusion_probability
                ).where(CampaignTask.campaign_id == campaign.id)
            )
        }
        if all(i in tasks and tasks[i][1] == p for i, p in probabilities.items()):
            found.append((campaign, {str(tasks[i][0]) for i in probabilities}))
    if len(found) != 1:
        return ""
    campaign, covered = found[0]
    strata = campaign.design["strata"]
    whole = "the run"
    if rubric is not None:
        stages = rated_stages(session, campaign, rubric)
        strata = {k: v for k, v in strata.items() if stratum_stage(k) in (None, *stages)}
        if len(strata) < len(campaign.design["strata"]):
            whole = f"the items {rubric} rates"
    empty = [k for k in strata if k not in covered]
    note = empty_strata_note(strata, empty, whole=whole)
    if note and whole != "the run":
        left = len(campaign.design["strata"]) - len(strata)
        note += f" ({left} other strata hold stages {rubric} does not rate)"
    return f"in campaign {campaign.name}, {note}" if note else ""


def rated_stages(session: Session, campaign: Campaign, rubric: str) -> set[str]:
    """The stages of the items the campaign's judge run judged with ``rubric``: the stages
    the rubric applies to in this run."""
    if campaign.judge_run_id is None:
        return set()
    found = session.exec(
        select(Item.stage)
        .join(Judgment, col(Judgment.item_id) == Item.id)
        .where(Judgment.judge_run_id == campaign.judge_run_id, Judgment.rubric == rubric)
        .distinct()
    ).all()
    return {str(s) for s in found}
