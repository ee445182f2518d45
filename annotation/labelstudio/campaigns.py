"""Annotation campaigns: which answers of a judge run go to humans, as Label Studio tasks.

``create_campaign`` draws the sample (``annotation.sampling``), records it with each item's
inclusion probability, creates the Label Studio project (its interface built from the same
rubrics the judge used) and imports one task per item. Every step is stored before the next
starts, and tasks are matched to our ids on Label Studio's side before importing, so running
``create`` again after a failure finishes the job without duplicating a task.

Blind rating: a task carries the item's texts and the model's answers, never a judgment.
``blind_check`` reads every task of a campaign back from Label Studio and looks for the
judge's explanations and raw outputs in it.
"""

from __future__ import annotations

import csv
import json
import statistics
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from annotation.errors import CampaignError, LabelStudioError
from annotation.labelstudio import interface
from annotation.labelstudio.client import LabelStudioClient
from judge.data.items import status_filter, status_name
from judge.errors import NotFoundError
from judge.grading.rubrics import Rubric, RubricSet
from judge.store.queries import get_dataset, get_judge_run, responses_by_item
from judge.store.tables import (
    Campaign,
    CampaignTask,
    GenerationRun,
    HumanRating,
    Item,
    Judgment,
)

if TYPE_CHECKING:  # annotation.sampling (scipy.stats) is imported where a sample is drawn
    from annotation.labelstudio.gold import GoldRow
    from annotation.sampling import SizePlan, Unit

Say = Callable[[str], None]
"""Receives one line for people about a long step (the project being made, tasks imported);
lines of words, unlike ``judge.progress.Progress``, which counts finished tasks."""
ANSWERED = ("ok", "truncated", "refusal")  # answers a human can rate (as ratings import allows)
IMPORT_CHUNK = 1000


def _quiet(_: str) -> None:
    pass


def get_campaign(session: Session, name: str) -> Campaign:
    campaign = session.exec(select(Campaign).where(Campaign.name == name)).first()
    if campaign is None:
        known = ", ".join(session.exec(select(Campaign.name)).all()) or "none yet"
        raise NotFoundError(
            f"no campaign named {name!r} (known: {known}); see `fairjudge campaign list`"
        )
    return campaign


# --- the population and the sample ---------------------------------------------------------


@dataclass(frozen=True)
class Population:
    """The items of a judge run that humans can rate with the chosen rubrics."""

    units: list[Unit]
    rubrics: dict[int, tuple[str, ...]]  # item id -> the campaign rubrics for its stage
    excluded: int  # items of the run left out (no answer, or no chosen rubric for its stage)


def population(
    session: Session, judge_run_id: int, rubric_set: RubricSet, rubrics: Sequence[str]
) -> Population:
    from annotation.sampling import Unit

    run = get_judge_run(session, judge_run_id)
    chosen = _check_rubrics(rubric_set, rubrics)
    answers = responses_by_item(session, run.generation_run_id)
    # The run's dataset, filtered here: an IN list of 10,000s of ids is slow or refused.
    dataset_id = session.exec(
        select(GenerationRun.dataset_id).where(GenerationRun.id == run.generation_run_id)
    ).one()
    items = [
        i
        for i in session.exec(
            select(Item).where(Item.dataset_id == dataset_id).order_by(col(Item.id))
        )
        if i.id in answers
    ]
    samples: dict[int, dict[str, list[int | None]]] = defaultdict(lambda: defaultdict(list))
    for item_id, rubric, score in session.exec(
        select(Judgment.item_id, Judgment.rubric, Judgment.score)
        .where(Judgment.judge_run_id == judge_run_id)
        .order_by(col(Judgment.item_id), col(Judgment.rubric), col(Judgment.sample_index))
    ):
        samples[item_id][rubric].append(score)
    units, per_item, excluded = [], {}, 0
    for item in items:
        assert item.id is not None
        names = tuple(r for r in rubric_set.for_stage(item.stage) if r in chosen)
        parts = answers[item.id]
        needed = {p for r in names for p in rubric_set[r].parts}
        if not names or any(p not in parts or parts[p].flag not in ANSWERED for p in needed):
            excluded += 1
            continue
        per_item[item.id] = names
        scores = {r: list(samples[item.id].get(r, [])) for r in names}
        units.append(Unit(item.id, item.stage, item.factor, scores))
    return Population(units, per_item, excluded)


def _check_rubrics(rubric_set: RubricSet, rubrics: Sequence[str]) -> tuple[str, ...]:
    if not rubrics:
        return tuple(rubric_set.rubrics)
    names = tuple(r.strip().upper() for r in rubrics)
    unknown = [r for r in names if r not in rubric_set.rubrics]
    if unknown:
        # A campaign rates what its judge run judged, built-in or registered: a rubric the
        # run did not apply has no judge scores to set the ratings against.
        raise CampaignError(
            f"unknown rubric(s) {', '.join(unknown)} for this judge run, which applied "
            f"{', '.join(rubric_set.rubrics)}; to rate another rubric, judge the answers with "
            "it first (`fairjudge judge GENERATION_RUN --rubrics NAME,...`)"
        )
    return names


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
    from annotation.sampling import size_for_half_width, size_from_pilot

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
    progress: Say = _quiet,
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
    _ensure_project(session, client, rubric_set, result.campaign, progress)
    result.imported, result.already_there = _push_tasks(
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
    from annotation.labelstudio.gold import resolve_gold, store_gold
    from annotation.sampling import draw

    run = get_judge_run(session, judge_run_id)
    found = population(session, judge_run_id, rubric_set, rubrics)
    if not found.units:
        raise CampaignError(
            f"judge run {judge_run_id} has no answered items for rubric(s) "
            f"{', '.join(_check_rubrics(rubric_set, rubrics))}"
        )
    # Gold items are checked before anything is stored, and kept out of the draw.
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
    sample = draw(found.units, strategy, size if size is not None else 0.2, seed)
    item_dataset = session.get(Item, found.units[0].item_id)
    assert item_dataset is not None
    notes = list(sample.notes)
    if found.excluded:
        notes.append(
            f"{found.excluded} item(s) of the run have no answer humans can rate with these "
            "rubrics and were left out of the population"
        )
    if gold:
        notes.append(f"{len(gold)} gold item(s) added outside the sample")
    used = sorted(
        {r for names in found.rubrics.values() for r in names}, key=list(rubric_set.rubrics).index
    )
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
    campaign = Campaign(
        name=name,
        kind="rating",
        dataset_id=item_dataset.dataset_id,
        generation_run_id=run.generation_run_id,
        judge_run_id=judge_run_id,
        rubrics=used,
        strategy=sample.strategy,
        seed=seed,
        population=sample.population,
        size=len(sample.drawn),
        annotators=annotators,
        design=design,
        ls_url=client.url,
    )
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
                task_key=f"{name}:{keys[d.item_id]}",
                stratum=d.stratum,
                inclusion_probability=d.inclusion_probability,
            )
        )
    session.commit()
    if gold:
        store_gold(session, campaign, gold)
    return CreateResult(campaign, True, 0, 0, size_plan, notes)


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
    progress: Say = _quiet,
) -> tuple[int, int]:
    """Add gold items to an existing rating campaign and send their tasks to Label Studio;
    (gold tasks added, tasks imported). The same file again adds nothing."""
    campaign = get_campaign(session, name)
    added = _add_gold(session, rubric_set, campaign, rows)
    _ensure_project(session, client, rubric_set, campaign, progress)
    imported, _ = _push_tasks(session, client, rubric_set, campaign, progress)
    return added, imported


def _rubrics_of(rubric_set: RubricSet, names: Iterable[str]) -> list[Rubric]:
    return [rubric_set[n] for n in names]


def _ensure_project(
    session: Session,
    client: LabelStudioClient,
    rubric_set: RubricSet,
    campaign: Campaign,
    progress: Say,
) -> None:
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
        config = interface.label_config(_rubrics_of(rubric_set, campaign.rubrics))
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


def _push_tasks(
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
            _rubrics_of(rubric_set, campaign.rubrics),
            item.fields,
            texts,
            campaign.name,
        )
    assert data[interface.TASK_KEY] == task.task_key
    return data


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


# --- review campaigns ------------------------------------------------------------------------


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
    progress: Say = _quiet,
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
    _ensure_project(session, client, rubric_set, result.campaign, progress)
    result.imported, result.already_there = _push_tasks(
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
