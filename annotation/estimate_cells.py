"""One cell of ``annotation.estimates``: what the run's data is (``RunData``), the targets it
is estimated for (a stage metric in percent, a rubric's mean on its scale), and a cell's three
estimates (judge-only, human-only, prediction-powered) from its judge and human values.

Pure over what was read: the store is read once by ``annotation.estimates.load_run_data``,
and the whole-run tables (``annotation.estimates``) and the gaps between groups
(``annotation.estimate_gaps``) are both made of these cells.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from annotation.estimate_results import (
    ALL,
    HUMAN_ONLY,
    JUDGE_ONLY,
    JUDGED,
    PPI,
    CellEstimate,
    Design,
    Estimate,
)
from judge.errors import InvalidInputError
from judge.metrics import STAGE_METRICS, ItemScore, StageMetric, unit_interval
from judge.stats.ppi import Group, classical_mean, judge_only_mean, ppi_mean
from judge.stats.ppi_run import RunGroup, ppi_run_mean, run_classical_mean
from judge.store.rating_scope import RatingSelection
from judge.vocab import SCALE, Scale

# ---------------------------------------------------------------- what was read


@dataclass(frozen=True)
class RunData:
    """What the estimates read, once: the judge run's item scores, the combined human score
    of every rated item per rubric, the ratings' selection, registered rubrics' scales."""

    run_id: int
    generation_run: int
    scores: list[ItemScore]
    human: dict[str, dict[int, float]]  # rubric -> item -> combined human score
    selection: RatingSelection
    scales: dict[str, Scale]

    def scale(self, rubric: str) -> Scale:
        return self.scales.get(rubric, SCALE)


# ---------------------------------------------------------------- one cell


def metric_value(metric: StageMetric, score: float, scale: Scale = SCALE) -> float:
    """An item's value for a stage metric, in percent: 100 or 0 for a share, the score as a
    percentage of the scale's maximum for a mean.

    >>> share, mean = STAGE_METRICS[0], STAGE_METRICS[1]
    >>> metric_value(share, 3), metric_value(share, 2.5), metric_value(mean, 4)
    (100.0, 0.0, 80.0)
    """
    if metric.kind == "share":
        return 100.0 if score >= metric.threshold else 0.0
    return score / scale.high * 100


def _weighting(design: Design, items: Sequence[int]) -> tuple[Any, Any, str]:
    """Weights and strata for these rated items, and the design's name as used here. Strata
    are left out (a conservative interval) where one holds fewer than 2 of the items."""
    if not design.weights:
        return None, None, design.name
    weights = [design.weights[i] for i in items]
    if not design.strata:
        return weights, None, f"{design.name}, weighted"
    strata = [design.strata.get(i, "") for i in items]
    if min(Counter(strata).values()) < 2:
        return weights, None, f"{design.name}, weighted (a stratum has < 2 rated items here)"
    return weights, strata, f"{design.name}, weighted"


def _few(n: int, what: str) -> str:
    return f"{'no' if n == 0 else f'only {n}'} {what} in this cell (2 are needed)"


def judge_only_estimate(
    values: Sequence[float], kind: str, bounds: tuple[float, float], design: str = JUDGED
) -> Estimate:
    """The judge's figure over its scored items with the interval every table and chart of
    the run gives it (``judge.metrics.unit_interval``: Wilson for a share, t for a mean)."""
    m = judge_only_mean(values)
    ci = unit_interval(kind, values, bounds)
    return Estimate(
        JUDGE_ONLY, m.estimate, ci.low, ci.high, m.se, 0, len(values), None, None, None, design,
        False, ci.reason, ci.method if ci.low is not None else "",
    )  # fmt: skip


def cell_estimates(
    judge: Mapping[int, float],
    human: Mapping[int, float],
    design: Design,
    alpha: float,
    bounds: tuple[float, float],
    kind: str = "mean",
) -> tuple[Estimate, Estimate, Estimate]:
    """Judge-only, human-only and prediction-powered estimates of one cell: ``judge`` holds
    the judge's value of each scored item, ``human`` the human value of each rated item;
    ``kind`` ("share" or a mean) picks the judge-only interval. Pure: what every table of
    estimates is made of, and what the tests check against ppi_py."""
    N, rated = len(judge), sorted(human)
    labelled = [i for i in rated if i in judge]
    if judge:
        judge_only = judge_only_estimate(list(judge.values()), kind, bounds)
    else:
        judge_only = Estimate.refused(JUDGE_ONLY, 0, 0, JUDGED, "the judge scored no item here")
    if not design.usable:
        return (
            judge_only,
            Estimate.refused(HUMAN_ONLY, len(rated), N, design.name, design.reason),
            Estimate.refused(PPI, len(labelled), N, design.name, design.reason),
        )
    if len(rated) < 2:
        why = _few(len(rated), "rated item(s)")
        human_only = Estimate.refused(HUMAN_ONLY, len(rated), N, design.name, why)
    else:
        human_only = _human_only(judge, human, design, alpha, bounds)
    if len(labelled) < 2:
        why = _few(len(labelled), "rated item(s) the judge scored")
        return judge_only, human_only, Estimate.refused(PPI, len(labelled), N, design.name, why)
    return judge_only, human_only, _prediction_powered(judge, human, design, alpha, bounds)


def _human_only(
    judge: Mapping[int, float],
    human: Mapping[int, float],
    design: Design,
    alpha: float,
    bounds: tuple[float, float],
) -> Estimate:
    """The rated items' mean: plain, or weighted by the design with the run's size in its
    variance (``judge.stats.ppi_run``)."""
    rated = sorted(human)
    weights, strata, name = _weighting(design, rated)
    y = [human[i] for i in rated]
    if weights is None:
        m = classical_mean(y, alpha=alpha)
    else:
        population = max(len(judge), len(rated))
        probabilities = [1 / w for w in weights]
        m = run_classical_mean(
            y, population=population, probabilities=probabilities, strata=strata, alpha=alpha
        )
    return Estimate.of(m, HUMAN_ONLY, len(judge), name, bounds)


def _prediction_powered(
    judge: Mapping[int, float],
    human: Mapping[int, float],
    design: Design,
    alpha: float,
    bounds: tuple[float, float],
) -> Estimate:
    """PPI++ on the rated items the judge scored (at least 2): the unrated items as the
    judge's part (ppi_py's convention), or every scored item with the overlap in the
    variance for a weighted design. Where people rated every item the judge scored, nothing
    is left for the judge: the estimate is the rated items' mean (``lam`` 0)."""
    group = cell_group(judge, human, design)
    name = _weighting(design, [i for i in sorted(human) if i in judge])[2]
    if isinstance(group, RunGroup):
        m = ppi_run_mean(
            group.y, group.yhat, group.yhat_all, probabilities=group.probabilities,
            strata=group.strata, alpha=alpha,
        )  # fmt: skip
    elif all(i in human for i in judge):
        m = classical_mean(group.y, alpha=alpha)
    else:
        m = ppi_mean(group.y, group.yhat, group.yhat_unlabelled, alpha=alpha)
    return Estimate.of(m, PPI, len(judge), name, bounds)


def cell_group(
    judge: Mapping[int, float], human: Mapping[int, float], design: Design
) -> Group | RunGroup:
    """PPI's data for one cell: the rated items the judge scored (people's and the judge's
    values), and the judge's values of the items nobody rated (``Group``, ppi_py's
    convention; empty when every scored item was rated), or, for a weighted design, of
    every scored item with the rated ones' inclusion probabilities (``RunGroup``)."""
    labelled = [i for i in sorted(human) if i in judge]
    weights, strata, _ = _weighting(design, labelled)
    y, yhat = [human[i] for i in labelled], [judge[i] for i in labelled]
    if weights is None:
        return Group(y, yhat, [v for i, v in judge.items() if i not in human])
    probabilities = [1 / w for w in weights]
    return RunGroup(y, yhat, list(judge.values()), probabilities, strata)


# ---------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A stage metric or a rubric's mean: the item scores it reads and each item's value."""

    name: str
    label: str
    stage: str | None  # None: every stage the rubric applies to
    rubric: str
    unit: str
    kind: str  # "share", "mean_pct" (a stage metric) or "mean" (a rubric's)
    bounds: tuple[float, float]  # the values' range
    value: Callable[[float], float]

    def population(self, data: RunData) -> list[ItemScore]:
        return [
            s
            for s in data.scores
            if s.rubric == self.rubric and (self.stage is None or s.stage == self.stage)
        ]

    def values(
        self, data: RunData, population: Sequence[ItemScore]
    ) -> tuple[dict[int, float], dict[int, float]]:
        """Judge values of the scored items, human values of the rated items."""
        rated = data.human.get(self.rubric, {})
        judge = {s.item_id: self.value(s.score) for s in population if s.score is not None}
        human = {s.item_id: self.value(rated[s.item_id]) for s in population if s.item_id in rated}
        return judge, human


def targets(data: RunData) -> tuple[list[Target], list[Target]]:
    """The stage metrics (percent) and the means of the rubrics the run applied (each on
    its own scale)."""
    metrics = []
    for m in STAGE_METRICS:
        scale = data.scale(m.rubric)
        value = partial(metric_value, m, scale=scale)
        metrics.append(
            Target(m.name, m.label, m.stage, m.rubric, "percent", m.kind, (0, 100), value)
        )
    rubrics = []
    for r in sorted({s.rubric for s in data.scores}):
        scale = data.scale(r)
        bounds = (float(scale.low), float(scale.high))
        rubrics.append(Target(r, r, None, r, f"score ({scale})", "mean", bounds, float))
    return metrics, rubrics


def find_target(data: RunData, name: str) -> Target:
    """A stage metric by its name or label, or a rubric, case-insensitively."""
    metrics, rubrics = targets(data)
    wanted = name.strip().casefold()
    for target in (*metrics, *rubrics):
        if wanted in (target.name.casefold(), target.label.casefold()):
            return target
    known = ", ".join([t.label for t in metrics] + [t.name for t in rubrics])
    raise InvalidInputError(
        f"no stage metric or rubric {name!r} in judge run {data.run_id}; give one of: {known}"
    )


def target_cells(target: Target, data: RunData, design: Design, alpha: float) -> list[CellEstimate]:
    population = target.population(data)
    out = []
    # Items without a factor (a registered rubric's free-form items) count in "all" only.
    for factor in [ALL, *sorted({s.factor for s in population if s.factor})]:
        cell = [s for s in population if factor in (ALL, s.factor)]
        if not cell:
            continue
        judge, human = target.values(data, cell)
        found = cell_estimates(judge, human, design, alpha, target.bounds, target.kind)
        names = (target.name, target.label, target.stage, target.rubric, target.unit)
        out.append(CellEstimate(factor, *names, len(cell), *found))
    return out
