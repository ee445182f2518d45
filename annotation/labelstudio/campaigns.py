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
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from annotation.labelstudio import interface
from annotation.labelstudio.client import LabelStudioClient, annotations_of
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
    from annotation.sampling import SizePlan, Unit

Progress = Callable[[str], None]
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
    names = tuple(r.upper() for r in rubrics)
    unknown = [r for r in names if r not in rubric_set.rubrics]
    if unknown:
        raise CampaignError(
            f"unknown rubric(s) {', '.join(unknown)} (known: {', '.join(rubric_set.rubrics)})"
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
            "strategy": c.strategy,
            "population": c.population,
            "size": c.size,
            "annotators": c.annotators,
            "project": c.ls_project_id,
            "url": f"{c.ls_url.rstrip('/')}/projects/{c.ls_project_id}",
            "imported": self.imported,
            "already_there": self.already_there,
            "strata": c.design.get("strata", {}),
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
    for r in session.exec(
        select(HumanRating).where(
            HumanRating.campaign_id == campaign.id, col(HumanRating.withdrawn_at).is_(None)
        )
    ):
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
    progress: Progress = _quiet,
) -> CreateResult:
    """Draw the sample, create the project and import its tasks; idempotent (see module)."""
    if annotators < 1:
        raise CampaignError("--annotators must be at least 1")
    name = name or default_name(judge_run_id, strategy, seed)
    existing = session.exec(select(Campaign).where(Campaign.name == name)).first()
    if existing is not None:
        _same_request(existing, judge_run_id, strategy, seed, annotators)
        result = CreateResult(existing, False, 0, 0)
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
    held = (campaign.judge_run_id, campaign.strategy, campaign.seed, campaign.annotators)
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
) -> CreateResult:
    from annotation.sampling import draw

    run = get_judge_run(session, judge_run_id)
    found = population(session, judge_run_id, rubric_set, rubrics)
    if not found.units:
        raise CampaignError(
            f"judge run {judge_run_id} has no answered items for rubric(s) "
            f"{', '.join(_check_rubrics(rubric_set, rubrics))}"
        )
    sample = draw(found.units, strategy, size if size is not None else 0.2, seed)
    item_dataset = session.get(Item, found.units[0].item_id)
    assert item_dataset is not None
    notes = list(sample.notes)
    if found.excluded:
        notes.append(
            f"{found.excluded} item(s) of the run have no answer humans can rate with these "
            "rubrics and were left out of the population"
        )
    used = sorted(
        {r for names in found.rubrics.values() for r in names}, key=list(rubric_set.rubrics).index
    )
    design: dict[str, Any] = {
        "strata": {k: list(v) for k, v in sample.strata.items()},
        "notes": notes,
    }
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
        strategy=strategy,
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
    return CreateResult(campaign, True, 0, 0, size_plan, notes)


def _rubrics_of(rubric_set: RubricSet, names: Iterable[str]) -> list[Rubric]:
    return [rubric_set[n] for n in names]


def _ensure_project(
    session: Session,
    client: LabelStudioClient,
    rubric_set: RubricSet,
    campaign: Campaign,
    progress: Progress,
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
    progress(f"creating the Label Studio project for campaign {campaign.name!r}")
    campaign.ls_project_id = client.create_project(
        title=f"FairJudge {campaign.name}",
        description=instructions,
        label_config=config,
        overlap=campaign.annotators,
    )
    session.add(campaign)
    session.commit()


def _push_tasks(
    session: Session,
    client: LabelStudioClient,
    rubric_set: RubricSet,
    campaign: Campaign,
    progress: Progress,
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


# --- status --------------------------------------------------------------------------------


@dataclass
class AnnotatorProgress:
    email: str
    done: int
    skipped: int
    median_lead_time_s: float | None
    flags: list[str] = field(default_factory=list)


@dataclass
class CampaignStatus:
    campaign: Campaign
    tasks: int
    annotators: list[AnnotatorProgress]
    short: dict[str, int]  # item key -> distinct ratings, for items below the campaign's N
    rated_twice: list[tuple[str, str]]  # (annotator, item key)
    skipped_items: dict[str, int]  # item key -> skips

    def to_dict(self) -> dict[str, Any]:
        c = self.campaign
        return {
            "campaign": c.name,
            "kind": c.kind,
            "tasks": self.tasks,
            "needed_per_item": c.annotators,
            "annotators": [
                {
                    "email": a.email,
                    "done": a.done,
                    "skipped": a.skipped,
                    "median_lead_time_s": a.median_lead_time_s,
                    "flags": a.flags,
                }
                for a in self.annotators
            ],
            "items_short": self.short,
            "rated_twice": [list(p) for p in self.rated_twice],
            "skipped_items": self.skipped_items,
        }


def campaign_status(session: Session, client: LabelStudioClient, name: str) -> CampaignStatus:
    """Progress read live from Label Studio (nothing is stored)."""
    campaign = get_campaign(session, name)
    assert campaign.id is not None
    tasks = session.exec(select(CampaignTask).where(CampaignTask.campaign_id == campaign.id)).all()
    keys = {
        t.task_key: key
        for t, key in session.exec(
            select(CampaignTask, Item.key)
            .join(Item, col(Item.id) == CampaignTask.item_id)
            .where(CampaignTask.campaign_id == campaign.id)
        )
    }
    exported = client.export_tasks(campaign.ls_project_id) if campaign.ls_project_id else []
    users = client.users()
    raters: dict[str, set[str]] = defaultdict(set)  # item key -> annotators
    done: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    skipped_items: Counter[str] = Counter()
    lead: dict[str, list[float]] = defaultdict(list)
    seen: Counter[tuple[str, str]] = Counter()
    scores: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for task in exported:
        key = keys.get(str(task.get("data", {}).get(interface.TASK_KEY, "")))
        if key is None:
            continue
        for ann in annotations_of(task):
            author = ann.get("completed_by")
            who = users.get(author, f"user {author}") if isinstance(author, int) else "unknown"
            if ann.get("was_cancelled"):
                skipped[who] += 1
                skipped_items[key] += 1
                continue
            seen[(who, key)] += 1
            raters[key].add(who)
            done[who] += 1
            if ann.get("lead_time") is not None:
                lead[who].append(float(ann["lead_time"]))
            if campaign.kind == "rating":
                try:
                    for rubric, value in interface.parse_rating(ann.get("result", [])).items():
                        scores[who][(key, rubric)] = float(value.score)
                except CampaignError:
                    pass
    people = sorted(set(done) | set(skipped))
    progress = [
        AnnotatorProgress(
            p,
            done[p],
            skipped[p],
            statistics.median(lead[p]) if lead[p] else None,
        )
        for p in people
    ]
    _flag(progress, scores)
    short = {
        key: len(raters.get(key, set()))
        for key in sorted(keys.values())
        if len(raters.get(key, set())) < campaign.annotators
    }
    twice = sorted(p for p, n in seen.items() if n > 1)
    return CampaignStatus(campaign, len(tasks), progress, short, twice, dict(skipped_items))


CONSTANT_MIN = 5  # ratings before "always the same score" is worth a flag
FAST_FACTOR = 3.0  # median lead time this many times below the others' median
AGREEMENT_GAP = 0.3  # Spearman below the others' own mean pairwise Spearman by this much


def _flag(
    progress: list[AnnotatorProgress], scores: dict[str, dict[tuple[str, str], float]]
) -> None:
    """Mark annotators worth a look: one who gives a single score to everything, one far
    faster than the rest, one who agrees with the others much less than they agree among
    themselves (Spearman on shared ratings)."""
    from scipy.stats import spearmanr

    def rho(a: str, b: str) -> float | None:
        shared = sorted(set(scores[a]) & set(scores[b]))
        if len(shared) < CONSTANT_MIN:
            return None
        x = [scores[a][k] for k in shared]
        y = [scores[b][k] for k in shared]
        if len(set(x)) == 1 or len(set(y)) == 1:
            return None  # undefined for a constant rater (flagged on its own)
        value = spearmanr(x, y).statistic
        return None if math.isnan(value) else float(value)

    medians = {p.email: p.median_lead_time_s for p in progress}
    people = [p.email for p in progress]
    for p in progress:
        values = list(scores[p.email].values())
        if len(values) >= CONSTANT_MIN and len(set(values)) == 1:
            p.flags.append(f"gives every item the same score ({values[0]:g})")
        others = [m for e, m in medians.items() if e != p.email and m is not None]
        if p.median_lead_time_s is not None and others:
            typical = statistics.median(others)
            if p.median_lead_time_s * FAST_FACTOR < typical:
                p.flags.append(
                    f"much faster than the others (median {p.median_lead_time_s:.1f} s "
                    f"per task against {typical:.1f} s)"
                )
        mine = [r for q in people if q != p.email and (r := rho(p.email, q)) is not None]
        theirs = [
            r
            for i, a in enumerate(people)
            for b in people[i + 1 :]
            if p.email not in (a, b) and (r := rho(a, b)) is not None
        ]
        if mine and theirs:
            own, rest = statistics.fmean(mine), statistics.fmean(theirs)
            if own < rest - AGREEMENT_GAP:
                p.flags.append(
                    f"agrees with the others less than they agree among themselves "
                    f"(mean Spearman {own:.2f} against {rest:.2f})"
                )


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
                "strategy": c.strategy,
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
    progress: Progress = _quiet,
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
