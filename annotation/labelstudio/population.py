"""The population of a rating campaign: the items of a judge run that humans can rate with
the chosen rubrics, each with the judge's scores (the sampler draws from it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from judge.grading.rubrics import RubricSet
from judge.store.queries import get_judge_run, responses_by_item
from judge.store.tables import GenerationRun, Item, Judgment

if TYPE_CHECKING:  # annotation.sampling (scipy.stats) is imported where a sample is drawn
    from annotation.sampling import Unit

ANSWERED = ("ok", "truncated", "refusal")  # answers a human can rate (as ratings import allows)


@dataclass(frozen=True)
class Population:
    """The items of a judge run that humans can rate with the chosen rubrics."""

    units: list[Unit]
    rubrics: dict[int, tuple[str, ...]]  # item id -> the campaign rubrics for its stage
    excluded: int  # items of the run left out (no answer, or no chosen rubric for its stage)


def population(
    session: Session, judge_run_id: int, rubric_set: RubricSet, rubrics: Sequence[str]
) -> Population:
    """The judge run's items humans can rate with ``rubrics`` (all of the run's when empty),
    each with the judge's scores per rubric, and how many were left out."""
    from annotation.sampling import Unit

    run = get_judge_run(session, judge_run_id)
    chosen = check_rubrics(rubric_set, rubrics)
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


def check_rubrics(rubric_set: RubricSet, rubrics: Sequence[str]) -> tuple[str, ...]:
    """The rubrics asked for, upper-cased (all of the set's when none); CampaignError naming
    any the judge run did not apply."""
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
