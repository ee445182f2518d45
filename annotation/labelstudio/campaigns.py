"""Annotation campaigns: which answers of a judge run go to humans, as Label Studio tasks.

``create_campaign`` draws the sample (``annotation.sampling``), records it with each item's
inclusion probability, creates the Label Studio project (its interface built from the same
rubrics the judge used) and imports one task per item. Every step is stored before the next
starts, and tasks are matched to our ids on Label Studio's side before importing, so running
``create`` again after a failure finishes the job without duplicating a task.

Blind rating: a task carries the item's texts and the model's answers, never a judgment
(``annotation.labelstudio.listing.blind_check`` reads every task back to see it).

Beside this module: ``population`` (what can be drawn), ``projects`` (the Label Studio
project and its tasks), ``listing`` (list, export, blind check), ``reviews`` (review
campaigns), ``status`` (live progress) and ``pull`` (ratings back).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.population import Population, check_rubrics, population
from annotation.labelstudio.projects import Say, ensure_project, push_tasks, quiet
from judge.errors import NotFoundError
from judge.grading.rubrics import RubricSet
from judge.store.queries import get_judge_run
from judge.store.tables import Campaign, CampaignTask, HumanRating, Item, Judgment

if TYPE_CHECKING:  # annotation.sampling (scipy.stats) is imported where a sample is drawn
    from annotation.labelstudio.gold import GoldRow
    from annotation.sample_size import SizePlan
    from annotation.sampling import Sample


def get_campaign(session: Session, name: str) -> Campaign:
    campaign = session.exec(select(Campaign).where(Campaign.name == name)).first()
    if campaign is None:
        known = ", ".join(session.exec(select(Campaign.name)).all()) or "none yet"
        raise NotFoundError(
            f"no campaign named {name!r} (known: {known}); see `fairjudge campaign list`"
        )
    return campaign


# --- create -----------------------------------------------------------------------------


@dataclass
class CreateResult:
    campaign: Campaign
    created: bool  # False: an existing campaign of that name was finished or found complete
    imported: int  # tasks sent to Label Studio by this call
    already_there: int  # tasks Label Studio already held (matched on our ids)
    size_plan: SizePlan | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        c = self.campaign
        out: dict[str, Any] = {
            "campaign": c.name,
            "created": self.created,
            "strategy": strategy_label(c),
            "population": c.population,
            "size": c.size,
            "annotators": c.annotators,
            "project": c.ls_project_id,
            "url": f"{c.ls_url.rstrip('/')}/projects/{c.ls_project_id}",
            "imported": self.imported,
            "already_there": self.already_there,
            "strata": c.design.get("strata", {}),
            "shortfall": c.design.get("shortfall", {}),
            "gold_items": len(c.design.get("gold", {})),
            "notes": self.notes,
        }
        if self.size_plan is not None:
            out["size_plan"] = {
                "n": self.size_plan.n,
                "rho": self.size_plan.rho,
                "rho_source": self.size_plan.rho_source,
                "half_width": self.size_plan.half_width,
                "reason": self.size_plan.reason,
            }
        return out


def default_name(judge_run_id: int, strategy: str, seed: int) -> str:
    return f"run{judge_run_id}-{strategy}-seed{seed}"


# Why a design can fall back to another (asked, used): the sampler's note says it at length.
FALLBACK_REASONS = {
    ("disagreement", "random"): "the judge drew one sample per item, so no disagreement to use"
}


def strategy_label(campaign: Campaign) -> str:
    """The design that drew the campaign's items, as lists and status show it: its strategy,
    or for a design that fell back, ``random (fell back from disagreement: why)``."""
    asked = campaign.design.get("asked_strategy")
    if not asked or asked == campaign.strategy:
        return campaign.strategy
    why = FALLBACK_REASONS.get((str(asked), campaign.strategy), "see the campaign's notes")
    return f"{campaign.strategy} (fell back from {asked}: {why})"


def plan_size(
    session: Session,
    half_width: float,
    *,
    pilot: str | None = None,
) -> SizePlan:
    """The sample size for a 95 % CI of Spearman's rho of the given half-width; rho is taken
    from a pilot campaign's ratings against its judge when ``pilot`` names one."""
    from annotation.sample_size import size_for_half_width, size_from_pilot

    if pilot is None:
        return size_for_half_width(half_width)
    judge, human = _pilot_pairs(session, get_campaign(session, pilot))
    if not human:
        raise CampaignError(
            f"pilot campaign {pilot!r} has no pulled ratings scored by its judge; "
            f"run `fairjudge campaign pull {pilot}` first"
        )
    return size_from_pilot(half_width, judge, human)


def _pilot_pairs(session: Session, campaign: Campaign) -> tuple[list[float], list[float]]:
    """(judge, human) per rated item x rubric of a campaign: the mean of the judge's scored
    samples and the mean of the live human ratings."""
    human: dict[tuple[int, str], list[float]] = defaultdict(list)
    gold = set(
        session.exec(
            select(CampaignTask.item_id).where(
                CampaignTask.campaign_id == campaign.id, CampaignTask.stratum == "gold"
            )
        )
    )
    for r in session.exec(
        select(HumanRating).where(
            HumanRating.campaign_id == campaign.id, col(HumanRating.withdrawn_at).is_(None)
        )
    ):
        if r.item_id not in gold:  # gold items test the annotators; they were not drawn
            human[(r.item_id, r.rubric)].append(r.score)
    judge: dict[tuple[int, str], list[int]] = defaultdict(list)
    for j in session.exec(
        select(Judgment).where(
            Judgment.judge_run_id == campaign.judge_run_id, Judgment.status == "scored"
        )
    ):
        if j.score is not None:
            judge[(j.item_id, j.rubric)].append(j.score)
    keys = sorted(k for k in human if k in judge)
    return (
        [statistics.fmean(judge[k]) for k in keys],
        [statistics.fmean(human[k]) for k in keys],
    )


def create_campaign(
    session: Session,
    client: LabelStudioClient,
    rubric_set: RubricSet,
    *,
    judge_run_id: int,
    rubrics: Sequence[str] = (),
    size: float | None = 0.2,
    annotators: int = 3,
    seed: int = 0,
    strategy: str = "random",
    size_plan: SizePlan | None = None,
    name: str | None = None,
    gold: Sequence[GoldRow] = (),
    progress: Say = quiet,
) -> CreateResult:
    """Draw the sample, create the project and import its tasks; idempotent (see module).
    ``gold`` (annotation.labelstudio.gold) adds gold items, kept out of the draw."""
    if annotators < 1:
        raise CampaignError("--annotators must be at least 1")
    name = name or default_name(judge_run_id, strategy, seed)
    existing = session.exec(select(Campaign).where(Campaign.name == name)).first()
    if existing is not None:
        _same_request(existing, judge_run_id, strategy, seed, annotators)
        result = CreateResult(existing, False, 0, 0)
        if gold:
            _add_gold(session, rubric_set, existing, gold)
    else:
        result = _new_campaign(
            session,
            client,
            rubric_set,
            name=name,
            judge_run_id=judge_run_id,
            rubrics=rubrics,
            size=size_plan.n if size_plan is not None else size,
            annotators=annotators,
            seed=seed,
            strategy=strategy,
            size_plan=size_plan,
            gold_rows=gold,
        )
    ensure_project(session, client, rubric_set, result.campaign, progress)
    result.imported, result.already_there = push_tasks(
        session, client, rubric_set, result.campaign, progress
    )
    return result


def _same_request(
    campaign: Campaign, judge_run_id: int, strategy: str, seed: int, annotators: int
) -> None:
    asked = (judge_run_id, strategy, seed, annotators)
    # A design that fell back is stored as the one used; the same request still matches it.
    held_strategy = campaign.design.get("asked_strategy") or campaign.strategy
    held = (campaign.judge_run_id, held_strategy, campaign.seed, campaign.annotators)
    if asked != held:
        raise CampaignError(
            f"campaign {campaign.name!r} already exists with judge run {held[0]}, strategy "
            f"{held[1]}, seed {held[2]} and {held[3]} annotators; choose another --name"
        )


def _new_campaign(
    session: Session,
    client: LabelStudioClient,
    rubric_set: RubricSet,
    *,
    name: str,
    judge_run_id: int,
    rubrics: Sequence[str],
    size: float | None,
    annotators: int,
    seed: int,
    strategy: str,
    size_plan: SizePlan | None,
    gold_rows: Sequence[GoldRow] = (),
) -> CreateResult:
    """Draw a new rating campaign's sample and store the campaign with one task per drawn
    item (and its gold items); nothing is sent to Label Studio here."""
    from annotation.labelstudio.gold import store_gold
    from annotation.sampling import draw

    found, gold = _drawable(session, rubric_set, judge_run_id, rubrics, gold_rows)
    sample = draw(found.units, strategy, size if size is not None else 0.2, seed)
    notes = _notes(sample, found, gold)
    used = sorted(
        {r for names in found.rubrics.values() for r in names}, key=list(rubric_set.rubrics).index
    )
    campaign = Campaign(
        name=name,
        kind="rating",
        dataset_id=_dataset_of(session, found),
        generation_run_id=get_judge_run(session, judge_run_id).generation_run_id,
        judge_run_id=judge_run_id,
        rubrics=used,
        strategy=sample.strategy,
        seed=seed,
        population=sample.population,
        size=len(sample.drawn),
        annotators=annotators,
        design=_design(sample, notes, strategy, size_plan),
        ls_url=client.url,
    )
    _store_tasks(session, campaign, sample)
    if gold:
        store_gold(session, campaign, gold)
    return CreateResult(campaign, True, 0, 0, size_plan, notes)


def _drawable(
    session: Session,
    rubric_set: RubricSet,
    judge_run_id: int,
    rubrics: Sequence[str],
    gold_rows: Sequence[GoldRow],
) -> tuple[Population, dict[int, dict[str, int]]]:
    """The population the sample is drawn from, and the gold items (item id -> rubric ->
    known score). Gold items are checked before anything is stored, and kept out of the
    draw; a run with nothing left to draw is refused."""
    from annotation.labelstudio.gold import resolve_gold

    found = population(session, judge_run_id, rubric_set, rubrics)
    if not found.units:
        raise CampaignError(
            f"judge run {judge_run_id} has no answered items for rubric(s) "
            f"{', '.join(check_rubrics(rubric_set, rubrics))}"
        )
    gold = (
        resolve_gold(session, rubric_set, found.rubrics, _dataset_of(session, found), gold_rows)
        if gold_rows
        else {}
    )
    if gold:
        kept = [u for u in found.units if u.item_id not in gold]
        if not kept:
            raise CampaignError(
                "every item humans can rate is a gold item; nothing is left to draw"
            )
        found = Population(kept, found.rubrics, found.excluded)
    return found, gold


def _notes(sample: Sample, found: Population, gold: dict[int, dict[str, int]]) -> list[str]:
    """What the user should know about the draw: the sampler's notes, the items left out of
    the population, and the gold items added beside the sample."""
    notes = list(sample.notes)
    if found.excluded:
        notes.append(
            f"{found.excluded} item(s) of the run have no answer humans can rate with these "
            "rubrics and were left out of the population"
        )
    if gold:
        notes.append(f"{len(gold)} gold item(s) added outside the sample")
    return notes


def _design(
    sample: Sample, notes: list[str], strategy: str, size_plan: SizePlan | None
) -> dict[str, Any]:
    """The design a campaign keeps: its strata, notes, expected draws and shortfalls, the
    strategy asked for when the sampler fell back, and the size plan when one set the size."""
    design: dict[str, Any] = {
        "strata": {k: list(v) for k, v in sample.strata.items()},
        "notes": notes,
        # Each stratum's expected draw (it differs from the drawn count where a tie was
        # broken at random) and the strata that got fewer items than the design's minimum.
        "expected": dict(sample.expected),
        "shortfall": {k: list(v) for k, v in sample.shortfall.items()},
    }
    if sample.strategy != strategy:  # e.g. disagreement fell back to random: say what was used
        design["asked_strategy"] = strategy
    if size_plan is not None:
        design["size_plan"] = {
            "n": size_plan.n,
            "rho": size_plan.rho,
            "rho_source": size_plan.rho_source,
            "half_width": size_plan.half_width,
            "reason": size_plan.reason,
        }
    return design


def _store_tasks(session: Session, campaign: Campaign, sample: Sample) -> None:
    """Store the new campaign and one task per drawn item, keyed ``NAME:ITEM_KEY``, with its
    stratum and inclusion probability."""
    session.add(campaign)
    session.flush()
    assert campaign.id is not None
    keys = dict(
        session.exec(select(Item.id, Item.key).where(Item.dataset_id == campaign.dataset_id)).all()
    )
    for d in sample.drawn:
        session.add(
            CampaignTask(
                campaign_id=campaign.id,
                item_id=d.item_id,
                task_key=f"{campaign.name}:{keys[d.item_id]}",
                stratum=d.stratum,
                inclusion_probability=d.inclusion_probability,
            )
        )
    session.commit()


def _dataset_of(session: Session, found: Population) -> int:
    item = session.get(Item, found.units[0].item_id)
    assert item is not None
    return item.dataset_id


def _add_gold(
    session: Session, rubric_set: RubricSet, campaign: Campaign, rows: Sequence[GoldRow]
) -> int:
    """Check gold rows against the campaign's rateable items and store them; the number of
    gold tasks added."""
    from annotation.labelstudio.gold import resolve_gold, store_gold

    if campaign.kind != "rating" or campaign.judge_run_id is None:
        raise CampaignError(f"campaign {campaign.name!r} is not a rating campaign: no gold items")
    found = population(session, campaign.judge_run_id, rubric_set, campaign.rubrics)
    gold = resolve_gold(session, rubric_set, found.rubrics, campaign.dataset_id, rows)
    return store_gold(session, campaign, gold)


def add_gold(
    session: Session,
    client: LabelStudioClient,
    rubric_set: RubricSet,
    name: str,
    rows: Sequence[GoldRow],
    progress: Say = quiet,
) -> tuple[int, int]:
    """Add gold items to an existing rating campaign and send their tasks to Label Studio;
    (gold tasks added, tasks imported). The same file again adds nothing."""
    campaign = get_campaign(session, name)
    added = _add_gold(session, rubric_set, campaign, rows)
    ensure_project(session, client, rubric_set, campaign, progress)
    imported, _ = push_tasks(session, client, rubric_set, campaign, progress)
    return added, imported
