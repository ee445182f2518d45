"""What a judge run's report says, read from the store once and handed to every section.

One report used to read the same run again in each section: the judge run a dozen times,
the per-item scores twice, self-preference three times, the answers four times.
``load_run_facts`` reads the run, its generation run, its dataset, every judgment (with its
item and the judge call's finish reason) and every answer in five statements; the section
builders compute from the ``RunFacts`` they are given. A section that needs rows no other
section reads (human ratings, counterfactual copies, costs) still reads them itself.

Rows keep the order they were stored in (their id): wherever that order reaches a number (a
bootstrap over pairs, a float sum, the order of keys in report.json) a report is the same on
every database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from sqlmodel import Session

from judge.grading.injection import injection_signs
from judge.metrics import ItemScore, combine_item_scores, truncated_answer_parts
from judge.prices import Prices
from judge.store.queries import get_generation_run, get_judge_run, run_answers, run_judgments
from judge.store.tables import Dataset, GenerationRun, Item, JudgeRun, Judgment, Response


@dataclass(frozen=True)
class JudgedRow:
    """One judgment with its item and the finish reason of the judge's call."""

    judgment: Judgment
    item: Item
    finish_reason: str | None


@dataclass(frozen=True)
class RunFacts:
    """A judge run and what its report reads: ``judgments`` and ``answers`` (the generation
    run's, each with its item) in the order they were stored, the item scores combined once
    by the run's aggregation, the self-preference line (None when the judge model is not the
    model under test) and the judge endpoint's prices (None: cost in tokens only)."""

    judge_run: JudgeRun
    generation_run: GenerationRun
    dataset: Dataset | None
    judgments: tuple[JudgedRow, ...]
    answers: tuple[tuple[Response, Item], ...]
    item_scores: tuple[ItemScore, ...]
    self_preference: str | None
    prices: Prices | None = None

    @property
    def judge_run_id(self) -> int:
        assert self.judge_run.id is not None, "a stored run has an id"
        return self.judge_run.id

    @property
    def generation_run_id(self) -> int:
        assert self.generation_run.id is not None, "a stored run has an id"
        return self.generation_run.id

    def judgments_in_item_order(self) -> list[JudgedRow]:
        """The judgments by item id, rubric and sample (how tables and the browser list them)."""
        return _in_item_order(self.judgments)

    @cached_property
    def answers_by_item(self) -> dict[int, dict[str, Response]]:
        """Item id -> part -> answer."""
        out: dict[int, dict[str, Response]] = {}
        for response, _ in self.answers:
            out.setdefault(response.item_id, {})[response.part] = response
        return out

    @cached_property
    def injection_signs(self) -> dict[int, list[str]]:
        """Answer id -> the signs that its text addresses the judge (``judge.grading.
        injection``), found once for the stage metrics' count and the item browser's flags
        (on a 10,000-judgment run each pass took about 1.5 s)."""
        return {r.id: injection_signs(r.raw_text) for r, _ in self.answers if r.id is not None}

    @cached_property
    def scores_by_key(self) -> dict[tuple[int, str], float | None]:
        """(item id, rubric) -> combined score, in the order each cell's first judgment was
        stored (the order the judge's checks pair and resample them)."""
        first = sorted(self.item_scores, key=lambda s: min(s.judgment_ids, default=0))
        return {(s.item_id, s.rubric): s.score for s in first}


def load_run_facts(
    session: Session, judge_run_id: int, *, prices: Prices | None = None
) -> RunFacts:
    """Read a judge run's facts (NotFoundError for an unknown run): five statements."""
    jrun = get_judge_run(session, judge_run_id)
    grun = get_generation_run(session, jrun.generation_run_id)
    dataset = session.get(Dataset, grun.dataset_id)
    judgments = tuple(
        JudgedRow(j, item, reason) for j, item, reason in run_judgments(session, judge_run_id)
    )
    answers = tuple(run_answers(session, jrun.generation_run_id))
    cut = truncated_answer_parts(r for r, _ in answers)
    ordered = ((r.judgment, r.item) for r in _in_item_order(judgments))
    scores = combine_item_scores(ordered, jrun.aggregation, cut)
    return RunFacts(
        judge_run=jrun,
        generation_run=grun,
        dataset=dataset,
        judgments=judgments,
        answers=answers,
        item_scores=tuple(scores),
        self_preference=self_preference_note(jrun.model, grun.model),
        prices=prices,
    )


def _in_item_order(rows: Iterable[JudgedRow]) -> list[JudgedRow]:
    return sorted(rows, key=lambda r: (r.item.id or 0, r.judgment.rubric, r.judgment.sample_index))


def self_preference_note(judge_model: str, tested_model: str) -> str | None:
    """A line saying the judge model is the model under test (None when it is not; names
    compared without case or surrounding spaces).

    >>> self_preference_note("gpt-x", "other") is None
    True
    >>> self_preference_note("GPT-x ", "gpt-x")[:52]
    'Self-preference risk: the judge model (GPT-x ) is th'
    """
    if judge_model.strip().casefold() != tested_model.strip().casefold():
        return None
    return (
        f"Self-preference risk: the judge model ({judge_model}) is the model under test; a "
        "judge may favour its own model's writing, so read its scores with care."
    )
