"""Bias figures corrected by human ratings: the judge's stage metrics and rubric means,
estimated three ways side by side, with prediction-powered inference (PPI++,
``judge.stats.ppi``) joining the judge's scores of every item to people's ratings of a sample.

- **judge-only**: the judge's value over every item of the cell it scored. Its interval is
  narrow, but it measures what the judge says, bias included: no interval can show that.
- **human-only**: the classical mean of the rated items' human values. Unbiased for what
  people say, wide when few items were rated.
- **prediction-powered**: the judge's value over every scored item, corrected by the gap
  between people and judge on the rated items (tuned weight ``lam``). Unbiased for what
  people say, and narrower than human-only when the judge tracks people.

Every value is in its target's unit: a stage metric in percent (an item counts 100 when its
score reaches the metric's threshold, else 0; or score / scale maximum x 100 for a mean), a
rubric mean on the rubric's own scale. An item's human value is the same function of its
combined human score (the mean of its raters, or the median). Intervals are normal
(``1 - alpha``) and clipped to the unit's range (0-100, or the scale's ends): a share of 0/100
values near an end gives a normal interval that reaches past it.

**Design.** Human-only and prediction-powered intervals assume the rated items are a
probability sample of the run's items, so the ratings' origin decides how they are weighted:
one rating campaign drawn at random (unweighted); stratified (weights 1 / inclusion
probability, the campaign's strata in the variance); disagreement (weights). Imported
ratings, or those of several campaigns, have no design to weight by: both estimates are
refused with the reason, unless ``assume_random`` says to treat them as a simple random
sample (the output then says "assumed random"). A cell with fewer than 2 rated items has no
human-only or prediction-powered estimate; the judge-only one is always given, and ``best``
names the prediction-powered estimate where people rated the cell, else the judge-only one.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from annotation.reliability import inclusion_probabilities, item_groups
from judge.errors import InvalidInputError
from judge.metrics import STAGE_METRICS, ItemScore, StageMetric, item_scores, unit_interval
from judge.stats.matrix import RatingMatrix
from judge.stats.ppi import Group, MeanEstimate, classical_mean, judge_only_mean, ppi_gap, ppi_mean
from judge.store.queries import get_judge_run
from judge.store.rating_scope import IMPORT, RatingSelection, select_ratings
from judge.store.tables import Campaign, CampaignTask
from judge.vocab import SCALE, Scale

if TYPE_CHECKING:
    from judge.reports.sections import Section

JUDGE_ONLY, HUMAN_ONLY, PPI = "judge-only", "human-only", "prediction-powered"
ALL = "all"
JUDGED = "every item the judge scored"


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None, in nested dicts and lists (JSON has no NaN).

    >>> finite({"a": [1.0, float("nan")], "b": float("inf")})
    {'a': [1.0, None], 'b': None}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Estimate:
    """One estimate with its interval, in the target's unit. ``n``: rated items used (0 for
    judge-only); ``N``: items of the cell the judge scored. ``value`` is None when the
    estimate was refused, and ``reason`` says why."""

    method: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    n: int
    N: int
    effective_n: float | None
    ratings_saved: float | None
    lam: float | None
    design: str
    small_sample: bool = False
    reason: str = ""

    @classmethod
    def of(
        cls, m: MeanEstimate, method: str, N: int, design: str, bounds: tuple[float, float]
    ) -> Estimate:
        """From ``judge.stats.ppi``'s estimate, the interval clipped to ``bounds``; a normal
        interval of no width (every value the same) is given as none, with that reason."""
        low: float | None = max(bounds[0], m.ci_low)
        high: float | None = min(bounds[1], m.ci_high)
        effective, saved, lam = (finite(v) for v in (m.effective_n, m.ratings_saved, m.lam))
        reason = ""
        if not m.ci_high > m.ci_low:
            low, high = None, None
            reason = f"no spread: the {m.n or N} values used are all the same"
        return cls(
            method, m.estimate, low, high, m.se, m.n, N, effective, saved, lam, design,
            m.small_sample, reason,
        )  # fmt: skip

    @classmethod
    def refused(cls, method: str, n: int, N: int, design: str, reason: str) -> Estimate:
        return cls(method, None, None, None, None, n, N, None, None, None, design, False, reason)

    def to_dict(self) -> dict[str, Any]:
        return dict(finite(asdict(self)))

    def brief(self) -> dict[str, Any]:
        """Method, value and interval (a cell's ``best``)."""
        return finite({k: getattr(self, k) for k in ("method", "value", "ci_low", "ci_high")})

    def text(self, digits: int = 1, sign: str = "") -> str:
        """'62.5 [48.1, 76.9]', 'n/a' when refused (``sign="+"`` for a gap), or the value
        with why it has no interval: '80.0 (too few items for an interval (3; 5 needed))'."""
        f = f"{sign}.{digits}f"
        if self.value is not None and (self.ci_low is None or self.ci_high is None):
            return f"{self.value:{f}} ({self.reason or 'no interval'})"
        if self.value is None or self.ci_low is None or self.ci_high is None:
            return "n/a"
        return f"{self.value:{f}} [{self.ci_low:{f}}, {self.ci_high:{f}}]"


@dataclass(frozen=True)
class CellEstimate:
    """A stage metric (or a rubric's mean) for one factor, or for all items ("all")."""

    factor: str
    target: str  # the metric's name, or the rubric's
    label: str  # the metric's short label, or the rubric's name
    stage: str | None  # None for a rubric's mean (every stage it applies to)
    rubric: str
    unit: str  # "percent", or "score (1-5)" on the rubric's scale
    items: int  # items of the cell in the judge run, scored or not
    judge_only: Estimate
    human_only: Estimate
    prediction_powered: Estimate

    @property
    def best(self) -> Estimate:
        """Prediction-powered where people rated the cell, else judge-only."""
        ppi = self.prediction_powered
        return ppi if ppi.value is not None else self.judge_only

    def to_dict(self) -> dict[str, Any]:
        return {**finite(asdict(self)), "best": self.best.brief()}


@dataclass(frozen=True)
class GapEstimates:
    """Group A's value minus group B's for one target, three ways. Each method's gap is an
    ``Estimate`` (``n``, ``N``: both groups together) with the groups' own beside it."""

    target: str
    group_by: str
    a: str
    b: str
    unit: str
    judge_only: Estimate
    human_only: Estimate
    prediction_powered: Estimate
    groups: dict[str, tuple[Estimate, Estimate]]  # method -> (group A's, group B's)

    @property
    def best(self) -> Estimate:
        ppi = self.prediction_powered
        return ppi if ppi.value is not None else self.judge_only

    def to_dict(self) -> dict[str, Any]:
        out = finite(asdict(self))
        out["groups"] = {
            method: {"a": a.to_dict(), "b": b.to_dict()} for method, (a, b) in self.groups.items()
        }
        return {**out, "best": self.best.brief()}


@dataclass(frozen=True)
class Design:
    """How the rated items were drawn, as the ratings used tell it, and so how they are
    weighted. ``usable`` False: no human-only or prediction-powered estimate (``reason``)."""

    name: str  # random, stratified, disagreement, assumed random (...), refused, no ratings
    usable: bool
    description: str
    reason: str = ""
    campaign: str | None = None
    weights: Mapping[int, float] = field(default_factory=dict)  # item -> 1 / probability
    strata: Mapping[int, str] = field(default_factory=dict)  # item -> the campaign's stratum

    def to_dict(self) -> dict[str, Any]:
        fields = ("name", "usable", "description", "reason", "campaign")
        out: dict[str, Any] = {k: getattr(self, k) for k in fields}
        return {**out, "weighted": bool(self.weights), "stratified": bool(self.strata)}


@dataclass(frozen=True)
class Estimates:
    """A judge run's corrected bias figures: stage metrics and rubric means per factor
    ("all" first), the gap asked for, the design assumed and the ratings used."""

    judge_run: int
    generation_run: int
    human_score: str
    alpha: float
    design: Design
    ratings_used: dict[str, Any]
    ratings_note: str
    metrics: list[CellEstimate]
    rubrics: list[CellEstimate]
    gap: GapEstimates | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: getattr(self, k) for k in ("judge_run", "generation_run", "human_score")},
            "alpha": self.alpha,
            "design": self.design.to_dict(),
            "ratings_used": dict(self.ratings_used),
            "ratings_note": self.ratings_note,
            "metrics": [c.to_dict() for c in self.metrics],
            "rubrics": [c.to_dict() for c in self.rubrics],
            "gap": None if self.gap is None else self.gap.to_dict(),
        }

    def section(self) -> Section:
        """The report section (``annotation.estimates_section``)."""
        from annotation.estimates_section import section_of

        return section_of(self)


@dataclass(frozen=True)
class GapQuery:
    """A gap to estimate: ``target`` (a stage metric's name or label, or a rubric) between
    the items whose ``group_by`` (factor, scenario, stage or fields.NAME) is ``a`` and ``b``."""

    target: str
    group_by: str
    a: str
    b: str


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
                f"assumed random ({what})",
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
        False, ci.reason,
    )  # fmt: skip


def _cell(
    judge: Mapping[int, float],
    human: Mapping[int, float],
    design: Design,
    alpha: float,
    bounds: tuple[float, float],
    kind: str = "mean",
) -> tuple[Estimate, Estimate, Estimate]:
    """Judge-only, human-only and prediction-powered estimates of one cell: ``judge`` holds
    the judge's value of each scored item, ``human`` the human value of each rated item;
    ``kind`` ("share" or a mean) picks the judge-only interval."""
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
        weights, strata, name = _weighting(design, rated)
        m = classical_mean([human[i] for i in rated], weights=weights, strata=strata, alpha=alpha)
        human_only = Estimate.of(m, HUMAN_ONLY, N, name, bounds)
    if len(labelled) < 2:
        why = _few(len(labelled), "rated item(s) the judge scored")
        return judge_only, human_only, Estimate.refused(PPI, len(labelled), N, design.name, why)
    group = _group(judge, human, design)
    m = ppi_mean(
        group.y, group.yhat, group.yhat_unlabelled, weights=group.weights, strata=group.strata,
        alpha=alpha,
    )  # fmt: skip
    return judge_only, human_only, Estimate.of(m, PPI, N, _weighting(design, labelled)[2], bounds)


def _group(judge: Mapping[int, float], human: Mapping[int, float], design: Design) -> Group:
    """PPI's data for one cell: the rated items the judge scored (people's and the judge's
    values, weighted by the design), and the judge's values of every scored item."""
    labelled = [i for i in sorted(human) if i in judge]
    weights, strata, _ = _weighting(design, labelled)
    return Group(
        [human[i] for i in labelled], [judge[i] for i in labelled], list(judge.values()),
        weights=weights, strata=strata,
    )  # fmt: skip


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
        found = _cell(judge, human, design, alpha, target.bounds, target.kind)
        names = (target.name, target.label, target.stage, target.rubric, target.unit)
        out.append(CellEstimate(factor, *names, len(cell), *found))
    return out


# ---------------------------------------------------------------- gaps


def _difference(method: str, a: Estimate, b: Estimate, alpha: float, width: float) -> Estimate:
    """A minus B for two independent estimates: the difference, their variances added."""
    n, N, design = a.n + b.n, a.N + b.N, a.design
    if a.value is None or b.value is None or a.se is None or b.se is None:
        reason = "; ".join(f"group {g}: {e.reason}" for g, e in (("A", a), ("B", b)) if e.reason)
        return Estimate.refused(method, n, N, design, reason)
    value, se = a.value - b.value, math.hypot(a.se, b.se)
    half = NormalDist().inv_cdf(1 - alpha / 2) * se
    low, high = max(-width, value - half), min(width, value + half)
    effective, saved = (None, None) if method == JUDGE_ONLY else (float(n), 0.0)
    small = a.small_sample or b.small_sample
    return Estimate(method, value, low, high, se, n, N, effective, saved, None, design, small)


def _gap(
    session: Session, data: RunData, query: GapQuery, design: Design, alpha: float
) -> GapEstimates:
    target = find_target(data, query.target)
    population = target.population(data)
    groups = item_groups(session, sorted({s.item_id for s in population}), query.group_by)
    found = sorted(set(groups.values()))
    for side in (query.a, query.b):
        if side not in found:
            raise InvalidInputError(
                f"no item of {target.label} has {query.group_by} {side!r}; its items have: "
                + ", ".join(found)
            )
    if query.a == query.b:
        raise InvalidInputError("a gap needs two different groups; A and B are the same")
    width = target.bounds[1] - target.bounds[0]
    sides = []
    for side in (query.a, query.b):
        judge, human = target.values(data, [s for s in population if groups[s.item_id] == side])
        sides.append((judge, human, _cell(judge, human, design, alpha, target.bounds, target.kind)))
    (ja, ha, ea), (jb, hb, eb) = sides
    methods = [
        _difference(JUDGE_ONLY, ea[0], eb[0], alpha, width),
        _difference(HUMAN_ONLY, ea[1], eb[1], alpha, width),
    ]
    if ea[2].value is None or eb[2].value is None:
        methods.append(_difference(PPI, ea[2], eb[2], alpha, width))
    else:
        g = ppi_gap(_group(ja, ha, design), _group(jb, hb, design), alpha=alpha)
        low, high = max(-width, g.ci_low), min(width, g.ci_high)
        methods.append(
            Estimate(
                PPI,
                g.estimate,
                low,
                high,
                g.se,
                g.a.n + g.b.n,
                len(ja) + len(jb),
                g.effective_n,
                g.ratings_saved,
                None,
                ea[2].design,
                g.small_sample,
            )  # fmt: skip
        )
        ea = (*ea[:2], Estimate.of(g.a, PPI, len(ja), ea[2].design, target.bounds))
        eb = (*eb[:2], Estimate.of(g.b, PPI, len(jb), eb[2].design, target.bounds))
    per_group = {m.method: (ea[k], eb[k]) for k, m in enumerate(methods)}
    judge_only, human_only, ppi = methods
    return GapEstimates(
        target.name, query.group_by, query.a, query.b, target.unit, judge_only, human_only, ppi,
        per_group,
    )  # fmt: skip


# ---------------------------------------------------------------- the use


def run_estimates(
    session: Session,
    judge_run_id: int,
    *,
    campaigns: Sequence[str] = (),
    human: str = "mean",
    assume_random: bool = False,
    alpha: float = 0.05,
    gap: GapQuery | None = None,
    selection: RatingSelection | None = None,
    scores: Sequence[ItemScore] | None = None,
) -> Estimates:
    """Every stage metric and rubric mean of a judge run, per factor and overall, three ways
    (see the module docstring), and the ``gap`` asked for. ``campaigns`` names the campaigns
    (or ``import:BATCH``) whose ratings count, as for agreement (every one when empty);
    ``selection`` and ``scores``: what the caller read already (see ``load_run_data``).
    NotFoundError for an unknown run; InvalidInputError for an unknown campaign or gap."""
    if not 0 < alpha < 1:
        raise InvalidInputError(f"alpha must be between 0 and 1, got {alpha!r}")
    data = load_run_data(
        session, judge_run_id, campaigns, human, selection=selection, scores=scores
    )
    design = ratings_design(session, data.selection, assume_random=assume_random)
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
        gap=None if gap is None else _gap(session, data, gap, design, alpha),
    )
