"""Bias figures corrected by human ratings: the judge's stage metrics and rubric means,
estimated three ways side by side, with prediction-powered inference (PPI++,
``judge.stats.ppi``) joining the judge's scores of every item to people's ratings of a sample.

- **judge-only**: the judge's value over every item of the cell it scored. Its interval is
  narrow, but it measures what the judge says, bias included: no interval can show that.
- **human-only**: the classical mean of the rated items' human values. Unbiased for what
  people say, wide when few items were rated.
- **prediction-powered**: the judge's value over the items nobody rated, corrected by the
  gap between people and judge on the rated items (tuned weight ``lam``): ppi_py's
  convention, each item in one set only (``judge.stats.ppi.ppi_mean``). Unbiased for what
  people say, and narrower than human-only when the judge tracks people. A weighted
  campaign (stratified, disagreement) stores no probability for the items it did not draw,
  so there the judge's part is its value over *every* scored item and the variance takes
  that overlap into account (``judge.stats.ppi_run``).

Every value is in its target's unit: a stage metric in percent (an item counts 100 when its
score reaches the metric's threshold, else 0; or score / scale maximum x 100 for a mean), a
rubric mean on the rubric's own scale. An item's human value is the same function of its
combined human score (the mean of its raters, or the median). Intervals are normal
(``1 - alpha``) and clipped to the unit's range (0-100, or the scale's ends): a share of 0/100
values near an end gives a normal interval that reaches past it. Under 30 rated items
(``SMALL_N``) the human-only and prediction-powered intervals are Student t ones with
``n - 1`` degrees of freedom, and the estimate is marked ``small_sample``.

**Design.** Human-only and prediction-powered intervals assume the rated items are a
probability sample of the run's items, so the ratings' origin decides how they are weighted:
one rating campaign drawn at random (unweighted); stratified (weights 1 / inclusion
probability, the campaign's strata in the variance); disagreement (weights). Imported
ratings, or those of several campaigns, have no design to weight by: both estimates are
refused with the reason, unless ``assume_random`` says to treat them as a simple random
sample (the output then says "assumed random"), and the judge's scores of the rated items
look like those of the unrated ones (``annotation.estimate_checks``; overridden by
``accept_unrepresentative``, which the design's name then says). A cell with fewer than 2
rated items has no human-only or prediction-powered estimate; the judge-only one is always
given, and ``best`` names the prediction-powered estimate where people rated the cell, else
the judge-only one.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlmodel import Session, col, select

from annotation.estimate_checks import check_representative, guarded
from annotation.estimate_results import (
    ALL,
    ASSUMED,
    HUMAN_ONLY,
    JUDGE_ONLY,
    JUDGED,
    PPI,
    CellEstimate,
    Design,
    Estimate,
    Estimates,
    GapEstimates,
    GapQuery,
    finite,
)
from annotation.reliability import inclusion_probabilities
from judge.config_estimates import EstimatesConfig
from judge.errors import InvalidInputError
from judge.metrics import STAGE_METRICS, ItemScore, StageMetric, item_scores, unit_interval
from judge.stats.matrix import RatingMatrix
from judge.stats.ppi import Group, classical_mean, judge_only_mean, ppi_mean
from judge.stats.ppi_run import RunGroup, ppi_run_mean, run_classical_mean
from judge.store.queries import get_judge_run
from judge.store.rating_scope import IMPORT, RatingSelection, select_ratings
from judge.store.tables import Campaign, CampaignTask
from judge.vocab import SCALE, Scale

__all__ = [
    "ALL", "HUMAN_ONLY", "JUDGE_ONLY", "PPI", "CellEstimate", "Design", "Estimate", "Estimates",
    "GapEstimates", "GapQuery", "RunData", "drawn_ratings", "finite", "judge_only_estimate",
    "load_run_data", "run_estimates",
]  # fmt: skip

# ---------------------------------------------------------------- what the store holds


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


def drawn_ratings(
    session: Session, generation_run_id: int, campaigns: Sequence[str] = ()
) -> RatingSelection:
    """The ratings of a generation run's answers in ``campaigns`` (every one when empty) that
    estimates and the alt-test use: gold items left out (they were chosen to test the
    annotators, not drawn). InvalidInputError for an unknown campaign."""
    from annotation.labelstudio.gold import gold_pairs

    gold = gold_pairs(session, generation_run_id)
    return select_ratings(
        session, generation_run_id, campaigns, skip=lambda r: (r.campaign_id, r.item_id) in gold
    )


def load_run_data(
    session: Session,
    judge_run_id: int,
    campaigns: Sequence[str] = (),
    human: str = "mean",
    *,
    selection: RatingSelection | None = None,
    scores: Sequence[ItemScore] | None = None,
) -> RunData:
    """The judge run's scores and its generation run's ratings (``drawn_ratings``), raters
    combined by ``human``. A caller that has read them already passes ``selection`` (of
    ``campaigns``) and ``scores`` (the run's ``item_scores``), and nothing is read twice."""
    from annotation.ratings import registered_scales

    if human not in ("mean", "median"):
        raise InvalidInputError(f"human must be 'mean' or 'median', got {human!r}")
    run = get_judge_run(session, judge_run_id)
    if selection is None:
        selection = drawn_ratings(session, run.generation_run_id, campaigns)
    rows: dict[str, list[tuple[int, str, float]]] = defaultdict(list)
    for r in selection.ratings:
        rows[r.rubric].append((r.item_id, r.rater, r.score))
    combined = {}
    for rubric, found in rows.items():
        matrix = RatingMatrix.from_long(*zip(*found, strict=True))
        values = matrix.item_scores(human)
        combined[rubric] = {int(i): float(v) for i, v in zip(matrix.items, values, strict=True)}
    if scores is None:
        scores = item_scores(session, judge_run_id, run.aggregation)
    scales = registered_scales(session)
    return RunData(judge_run_id, run.generation_run_id, list(scores), combined, selection, scales)


def ratings_design(
    session: Session, selection: RatingSelection, *, assume_random: bool = False
) -> Design:
    """The design the ratings of ``selection`` were drawn by (see the module docstring)."""
    if not selection.ratings:
        return Design("no ratings", False, "no human ratings", "no human ratings to use yet")
    probabilities, absent = inclusion_probabilities(session, selection)
    campaign, drawn = None, set[int]()
    if not absent:
        campaign = session.get(Campaign, selection.campaign_ids[0])
        drawn = {i for i, p in probabilities.items() if p > 0}
        missing = len({r.item_id for r in selection.ratings} - drawn)
        if campaign is None or missing:
            absent = (
                f"{missing} rated item(s) are not among the campaign's tasks, so the "
                "probability with which they were drawn is unknown"
            )
    if absent or campaign is None:
        if assume_random:
            imported = any(s.scope.startswith(IMPORT) for s in selection.used)
            what = "imported ratings" if imported else "several campaigns"
            return Design(
                f"{ASSUMED} ({what})",
                True,
                "treated as a simple random sample of the run's items, unweighted, as asked; "
                "the intervals hold only if the rated items were drawn that way",
            )
        reason = absent.removeprefix("no whole-run (weighted) estimate: ")
        return Design(
            "refused",
            False,
            "no design to weight the ratings by",
            f"no human-only or prediction-powered estimate: {reason}; or pass --assume-random "
            "(assume_random=true) to treat them as a simple random sample of the run's items",
        )
    name = campaign.name
    if campaign.strategy == "random":
        return Design("random", True, f"campaign {name}: a simple random sample", campaign=name)
    weights = {i: 1.0 / probabilities[i] for i in drawn}
    if campaign.strategy != "stratified":
        how = f"campaign {name}: drawn with unequal probabilities ({campaign.strategy})"
        return Design(campaign.strategy, True, how, campaign=name, weights=weights)
    strata = session.exec(
        select(CampaignTask.item_id, CampaignTask.stratum).where(
            CampaignTask.campaign_id == campaign.id, col(CampaignTask.stratum) != ""
        )
    ).all()
    how = f"campaign {name}: a stratified sample, the variance taken within its strata"
    return Design("stratified", True, how, campaign=name, weights=weights, strata=dict(strata))


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


def _cells(target: Target, data: RunData, design: Design, alpha: float) -> list[CellEstimate]:
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


# ---------------------------------------------------------------- the use


def run_estimates(
    session: Session,
    judge_run_id: int,
    *,
    campaigns: Sequence[str] = (),
    human: str = "mean",
    assume_random: bool = False,
    accept_unrepresentative: bool = False,
    rules: EstimatesConfig | None = None,
    alpha: float = 0.05,
    gap: GapQuery | None = None,
    selection: RatingSelection | None = None,
    scores: Sequence[ItemScore] | None = None,
) -> Estimates:
    """Every stage metric and rubric mean of a judge run, per factor and overall, three ways
    (see the module docstring), and the ``gap`` asked for. ``campaigns`` names the campaigns
    (or ``import:BATCH``) whose ratings count, as for agreement (every one when empty);
    ``rules``: the config's ``[estimates]`` bounds (its defaults when None);
    ``selection`` and ``scores``: what the caller read already (see ``load_run_data``).
    NotFoundError for an unknown run; InvalidInputError for an unknown campaign or gap."""
    from annotation.estimate_gaps import gap_estimates

    if not 0 < alpha < 1:
        raise InvalidInputError(f"alpha must be between 0 and 1, got {alpha!r}")
    data = load_run_data(
        session, judge_run_id, campaigns, human, selection=selection, scores=scores
    )
    design = run_design(session, data, assume_random, accept_unrepresentative, rules)
    metrics, rubrics = targets(data)
    return Estimates(
        judge_run=data.run_id,
        generation_run=data.generation_run,
        human_score=human,
        alpha=alpha,
        design=design,
        ratings_used=data.selection.to_dict(),
        ratings_note=data.selection.describe(),
        metrics=[c for t in metrics for c in _cells(t, data, design, alpha)],
        rubrics=[c for t in rubrics for c in _cells(t, data, design, alpha)],
        gap=None if gap is None else gap_estimates(session, data, gap, design, alpha),
    )


def run_design(
    session: Session,
    data: RunData,
    assume_random: bool,
    accept_unrepresentative: bool = False,
    rules: EstimatesConfig | None = None,
) -> Design:
    """The ratings' design (``ratings_design``); an assumed random one passes the
    random-subset check first (``annotation.estimate_checks``)."""
    design = ratings_design(session, data.selection, assume_random=assume_random)
    if not design.name.startswith(ASSUMED):
        return design
    check = check_representative(
        data.scores, data.human, rules or EstimatesConfig(), accepted=accept_unrepresentative
    )
    return guarded(design, check)
