"""Judge reliability for a generation run: every judge configuration against the humans, with
the humans' own agreement beside it as the ceiling (laid out like FairMonitor's Table 3).

Undefined coefficients (constant ratings, too few items) are kept with their reason, which the
JSON and the tables show; the statistics are therefore called with ``warn=False``. The scale is
FairMonitor's 1-5 (a judge run's rubrics are 1-5) unless a ``Scale`` is given; its levels are
the coefficients' labels.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sqlmodel import Session, col, select

from annotation.coverage import uncovered_strata_note
from annotation.errors import RatingsError
from judge.errors import NotFoundError
from judge.metrics import aggregate
from judge.stats.coefficient import DEFAULT_OPTIONS, BootstrapOptions, Coefficient
from judge.stats.levels import (
    GroupedCorrelation,
    SelfConsistency,
    grouped_correlations,
    items_needed,
    self_consistency,
)
from judge.stats.matrix import RatingMatrix
from judge.stats.pairs import PairAgreement, judge_vs_human, to_categories
from judge.stats.raters import (
    PerRaterAgreement,
    RaterAgreement,
    human_vs_human,
    kappa_per_annotator,
)
from judge.stats.weighted import (
    effective_size,
    weighted_mean_difference,
    weighted_pearson,
    weighted_spearman,
)
from judge.store.queries import get_generation_run, sample_slot
from judge.store.rating_scope import IMPORT, RatingSelection, select_ratings
from judge.store.tables import Campaign, CampaignTask, HumanRating, JudgeRun, Judgment
from judge.trust.section import flags as trust_flags
from judge.vocab import SCALE, Scale

PLANNED = ("pearson", "spearman", "kappa_quadratic")  # coefficients items_needed is given for


@dataclass(frozen=True)
class JudgeReliability:
    """One judge configuration (judge run) against the humans on one rubric.

    ``agreement`` is None when the judge scored none of the rated items; the fields after it
    are then empty.
    """

    judge_run: int
    label: str
    prompt_variant: str
    temperature: float
    n: int
    judge_unscored_on_rated_items: int
    reading: str
    agreement: PairAgreement | None = None
    kappa_per_annotator: list[PerRaterAgreement] = field(default_factory=list)
    items_needed: dict[str, int | None] = field(default_factory=dict)
    judge_points: list[float] = field(default_factory=list)  # per item, aligned with human
    human_points: list[float] = field(default_factory=list)
    self_consistency: SelfConsistency | None = None  # only for runs with several samples
    # Inclusion-weighted estimates for the whole judge run, when the rated items were drawn
    # with unequal probabilities (a stratified or disagreement campaign); see weighted_note.
    weighted: dict[str, Coefficient] = field(default_factory=dict)
    weighted_note: str = ""
    # The judge's own checks it failed on this rubric (judge.trust.section.flags):
    # "self-preference", "counterfactual (names)", "order (inconsistent, recency)", "length".
    checks: list[str] = field(default_factory=list)
    # With ``group_by``: correlations within each group of items, averaged over the groups
    # (summary-level, as for documents), and the item field that made the groups.
    grouped: GroupedCorrelation | None = None
    group_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "judge_run": self.judge_run,
            "label": self.label,
            "prompt_variant": self.prompt_variant,
            "temperature": self.temperature,
            "n": self.n,
            "judge_unscored_on_rated_items": self.judge_unscored_on_rated_items,
            "judge_checks_flagged": list(self.checks),
        }
        if self.agreement is None:
            out["reading"] = self.reading
            return out
        coefs = self.agreement.coefficients
        out["coefficients"] = {k: c.to_dict() for k, c in coefs.items()}
        out["confusion_matrix"] = self.agreement.confusion.to_dict()
        out["majority_category"] = self.agreement.majority_category
        out["flags"] = [f.to_dict() for f in self.agreement.flags]
        out["kappa_per_annotator"] = [e.to_dict() for e in self.kappa_per_annotator]
        out["items_needed"] = dict(self.items_needed)
        out["reading"] = self.reading
        if self.weighted:
            out["weighted"] = {k: c.to_dict() for k, c in self.weighted.items()}
            out["weighted_note"] = self.weighted_note
        out["points"] = {"judge": self.judge_points, "human": self.human_points}
        if self.grouped is not None:
            out["grouped"] = {"group_by": self.group_by, **self.grouped.to_dict()}
        if self.self_consistency is not None:
            out["self_consistency"] = self.self_consistency.to_dict()
        return out


@dataclass(frozen=True)
class RubricReliability:
    """Every judge configuration on one rubric, beside the humans' agreement (the ceiling)."""

    rubric: str
    n_rated_items: int
    n_raters: int
    n_ratings: int
    human_vs_human: RaterAgreement
    judges: list[JudgeReliability]
    scale: Scale = SCALE  # the rubric's own: 1-5 built-in, 1..N for a registered rubric

    def judge(self, judge_run_id: int) -> JudgeReliability | None:
        return next((j for j in self.judges if j.judge_run == judge_run_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_rated_items": self.n_rated_items,
            "n_raters": self.n_raters,
            "n_ratings": self.n_ratings,
            "scale": str(self.scale),
            "human_vs_human": self.human_vs_human.to_dict(),
            "judges": [j.to_dict() for j in self.judges],
        }


PER_RUBRIC = "per rubric"  # the top-level scale when the rubrics' scales differ


@dataclass(frozen=True)
class RunReliability:
    """Judge reliability for one generation run, per rubric (sorted by name)."""

    generation_run: int
    human_score: str
    options: BootstrapOptions
    target_half_width: float
    rubrics: dict[str, RubricReliability]
    scale: Scale = SCALE
    # Which campaigns / import batches the ratings came from (judge.store.rating_scope), and
    # why no whole-run (weighted) estimate was made when none was ("" when one was, or when
    # the campaign drew every item with the same probability).
    ratings_used: dict[str, Any] = field(default_factory=dict)
    ratings_note: str = ""
    weighted_absent: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "generation_run": self.generation_run,
            "ratings_used": dict(self.ratings_used),
            "weighted_absent": self.weighted_absent,
            "human_score": self.human_score,
            "n_bootstrap": self.options.n_bootstrap,
            "seed": self.options.seed,
            "target_half_width": self.target_half_width,
            "scale": self.shared_scale(),
            "rubrics": {name: r.to_dict() for name, r in self.rubrics.items()},
        }

    def shared_scale(self) -> str:
        """The scale of the rubrics a judge scored ("1-3" for a run judged only on a 1-3
        rubric), or "per rubric" when they differ (each rubric's entry names its own); the
        rubrics no judge scored count only when no rubric was scored."""
        scored = [r for r in self.rubrics.values() if any(j.n for j in r.judges)]
        scales = {str(r.scale) for r in scored or self.rubrics.values()}
        if not scales:
            return str(self.scale)
        return scales.pop() if len(scales) == 1 else PER_RUBRIC


def judge_label(run: JudgeRun) -> str:
    samples = f", {run.samples} samples ({run.aggregation})" if run.samples > 1 else ""
    orders = ", both orders" if run.swap_order else ""
    return f"{run.model} {run.prompt_variant} T={run.temperature:g}{samples}{orders}"


def _judge_scores(
    session: Session, run: JudgeRun, rubric: str
) -> tuple[dict[int, float], dict[tuple[int, str], list[float]]]:
    """Per item: the combined judge score (every sample, of both orders in a run judged in
    both, as the run's item scores); and per item and order the sample scores, whose
    repeats measure self-consistency (the order effect is measured apart, not counted as
    the judge disagreeing with itself)."""
    scores: dict[int, list[float]] = defaultdict(list)
    samples: dict[tuple[int, str], list[float]] = defaultdict(list)
    for j in session.exec(
        select(Judgment).where(Judgment.judge_run_id == run.id, Judgment.rubric == rubric)
    ):
        if j.status == "scored" and j.score is not None:
            scores[j.item_id].append(float(j.score))
            order = sample_slot(j.sample_index, j.position, run.samples).order or ""
            samples[(j.item_id, order)].append(float(j.score))
    combined = {}
    for item_id, values in scores.items():
        value = aggregate([int(v) for v in values], run.aggregation)
        if value is not None:
            combined[item_id] = float(value)
    return combined, samples


def reading(
    agreement: PairAgreement, ceiling: RaterAgreement, judge_values: list[float], n: int
) -> str:
    """One plain-language line about a judge configuration on one rubric; the scale's ends
    are those of the labels ``agreement`` was computed on (1 and 5 on FairMonitor's scale)."""
    notes = []
    if n < 10:
        notes.append(f"only {n} rated items: too few for a stable estimate")
    kq, alpha = agreement.coefficients["kappa_quadratic"], ceiling.alphas.get("alpha_interval")
    if alpha is not None and math.isfinite(kq.value) and math.isfinite(alpha.value):
        side = "within" if math.isfinite(kq.ci_high) and kq.ci_high >= alpha.value else "below"
        notes.append(
            f"{side} the human ceiling (weighted kappa {kq.value:.2f} vs human "
            f"alpha {alpha.value:.2f})"
        )
    diff = agreement.coefficients["mean_difference"]
    if (
        math.isfinite(diff.value)
        and abs(diff.value) >= 0.3
        and not (diff.ci_low <= 0 <= diff.ci_high)
    ):
        side = "harsher" if diff.value < 0 else "more lenient"
        notes.append(f"judge {side} by {abs(diff.value):.1f} on average")
    labels = agreement.confusion.labels
    used = {int(v) for v in to_categories(judge_values, labels=labels)}
    unused = [s for s in (labels[0], labels[-1]) if s not in used]
    if judge_values and len(used) == 1:
        notes.append(f"judge gives every item {used.pop()}")
    elif unused:
        notes.append(f"judge never uses {' or '.join(map(str, unused))}")
    return "; ".join(notes) or "no notable pattern"


def _check_scale(what: str, values: list[float], scale: Scale) -> None:
    """RatingsError when some of ``values`` lie outside ``scale`` (as_scores would say less)."""
    outside = [v for v in values if not scale.within(v)]
    if outside:
        raise RatingsError(
            f"{len(outside)} of {what} lie outside the {scale} scale (e.g. {outside[0]:g}); "
            f"the rubric's ratings and judge scores are {scale}: set ratings on another scale "
            "against a judge with `fairjudge agreement compute --scale`"
        )


def _judge_entry(
    session: Session,
    run: JudgeRun,
    rubric: str,
    matrix: RatingMatrix,
    human_scores: dict[int, float],
    ceiling: RaterAgreement,
    options: BootstrapOptions,
    target_half_width: float,
    scale: Scale,
    probabilities: dict[int, float] | None = None,
    groups: dict[int, str] | None = None,
    group_by: str | None = None,
) -> JudgeReliability:
    assert run.id is not None
    combined, samples = _judge_scores(session, run, rubric)
    _check_scale(f"judge run {run.id}'s {rubric} scores", list(combined.values()), scale)
    labels = scale.labels
    items = [i for i in human_scores if i in combined]
    base = JudgeReliability(
        judge_run=run.id,
        label=judge_label(run),
        prompt_variant=run.prompt_variant,
        temperature=run.temperature,
        n=len(items),
        judge_unscored_on_rated_items=len(human_scores) - len(items),
        reading="the judge scored none of the rated items",
    )
    if not items:
        return base
    jx = np.array([combined[i] for i in items])
    hy = np.array([human_scores[i] for i in items])
    agreement = judge_vs_human(jx, hy, options=options, labels=labels, warn=False)
    sub = matrix.columns([str(i) for i in items])
    consistency = None
    if run.samples > 1:
        grid = np.full((len(samples), run.samples), np.nan)
        for row, values in enumerate(samples.values()):
            grid[row, : len(values)] = values
        consistency = self_consistency(grid, options=options, labels=labels, warn=False)
    return replace(
        base,
        reading=reading(agreement, ceiling, jx.tolist(), len(items)),
        agreement=agreement,
        kappa_per_annotator=kappa_per_annotator(
            jx, sub, options=options, labels=labels, warn=False
        ),
        items_needed={
            k: items_needed(agreement.coefficients[k], target_half_width) for k in PLANNED
        },
        judge_points=jx.tolist(),
        human_points=hy.tolist(),
        self_consistency=consistency,
        grouped=None
        if groups is None
        else grouped_correlations(jx, hy, [groups[i] for i in items], options=options, warn=False),
        group_by=group_by,
        **_weighted(items, jx, hy, probabilities, session, rubric),
    )


GROUP_FIELDS = ("stage", "factor", "scenario")
"""The item columns agreement can be grouped by; ``fields.NAME`` names a field of the item's
own texts (for instance the document a summary item was written from)."""


def item_groups(session: Session, item_ids: Sequence[int], group_by: str) -> dict[int, str]:
    """Each item's group: its ``stage``, ``factor`` or ``scenario``, or the value of its field
    ``NAME`` for ``fields.NAME``. InvalidInputError when the name is neither, or when an item
    lacks the field (naming the first few)."""
    from judge.errors import InvalidInputError
    from judge.store.tables import Item

    name = group_by.removeprefix("fields.")
    if group_by not in GROUP_FIELDS and (not group_by.startswith("fields.") or not name):
        raise InvalidInputError(
            f"group_by {group_by!r}: give one of {', '.join(GROUP_FIELDS)} or fields.NAME "
            "(a field of the items' texts)"
        )
    rows = session.exec(select(Item).where(col(Item.id).in_(list(item_ids)))).all()
    out: dict[int, str] = {}
    missing: list[str] = []
    for item in rows:
        assert item.id is not None
        if group_by in GROUP_FIELDS:
            out[item.id] = str(getattr(item, group_by))
        elif name in item.fields and item.fields[name] is not None:
            out[item.id] = str(item.fields[name])
        else:
            missing.append(item.key)
    if missing:
        shown = ", ".join(repr(k) for k in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise InvalidInputError(
            f"group_by {group_by!r}: {len(missing)} rated item(s) have no field {name!r} "
            f"({shown}{more})"
        )
    return out


def _weighted(
    items: list[int],
    jx: np.ndarray,
    hy: np.ndarray,
    probabilities: dict[int, float] | None,
    session: Session | None = None,
    rubric: str | None = None,
) -> dict[str, Any]:
    """Estimates weighted by 1 / inclusion probability, when every rated item has one and
    they are not all equal (equal probabilities give the unweighted values). The note names
    the design's strata with no rated item among those ``rubric`` can rate
    (``annotation.coverage``): the estimate cannot stand for them."""
    if not probabilities or any(i not in probabilities for i in items):
        return {}
    p = np.array([probabilities[i] for i in items])
    if np.allclose(p, p[0]):
        return {}
    w = 1.0 / p
    return {
        "weighted": {
            "pearson": weighted_pearson(jx, hy, w, warn=False),
            "spearman": weighted_spearman(jx, hy, w, warn=False),
            "mean_difference": weighted_mean_difference(jx, hy, w, warn=False),
        },
        "weighted_note": (
            "weighted by 1 / inclusion probability, estimating the whole judge run (the "
            f"campaign drew items unequally; effective sample size {effective_size(w):.0f} "
            f"of {len(items)})" + _uncovered(session, {i: probabilities[i] for i in items}, rubric)
        ),
    }


def _uncovered(
    session: Session | None, probabilities: dict[int, float], rubric: str | None = None
) -> str:
    note = uncovered_strata_note(session, probabilities, rubric) if session is not None else ""
    return f"; {note}" if note else ""


def inclusion_probabilities(
    session: Session, selection: RatingSelection
) -> tuple[dict[int, float], str]:
    """Item -> the probability with which the campaign drew it, when every rating used comes
    from one rating campaign; otherwise no probabilities and the reason, for the output (a
    probability belongs to one campaign's design: ratings of several campaigns, or imported
    ones, have no single design to weight by)."""
    imported = [s.name for s in selection.used if s.scope.startswith(IMPORT)]
    if imported:
        hint = "; pass --campaign NAME to use one campaign's" if selection.campaign_ids else ""
        return {}, (
            f"no whole-run (weighted) estimate: ratings from {', '.join(imported)} were "
            f"imported, not drawn by a campaign's design{hint}"
        )
    if len(selection.used) > 1:
        names = ", ".join(s.name for s in selection.used)
        return {}, (
            f"no whole-run (weighted) estimate: the ratings come from several campaigns "
            f"({names}), whose sampling designs cannot be combined; pass --campaign NAME "
            "to use one campaign's ratings and its weights"
        )
    if not selection.used:
        return {}, ""
    found = session.exec(
        select(CampaignTask.item_id, CampaignTask.inclusion_probability)
        .join(Campaign, col(Campaign.id) == CampaignTask.campaign_id)
        .where(Campaign.id == selection.campaign_ids[0], Campaign.kind == "rating")
    ).all()
    return {int(i): float(p) for i, p in found}, ""


def run_reliability(
    session: Session,
    generation_run_id: int,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    human: str = "mean",
    target_half_width: float = 0.1,
    scale: Scale = SCALE,
    campaigns: Sequence[str] = (),
    group_by: str | None = None,
) -> RunReliability:
    """Agreement per rubric x judge run of a generation run, with the human ceiling, on each
    rubric's scale: a registered rubric's 1..N, the built-ins' ``scale`` (1-5 unless given).
    Stored ratings or judge scores outside it raise ``RatingsError``.

    ``campaigns`` names the campaigns (or ``import:BATCH``) whose ratings count; without it
    every campaign and batch of the run counts, the newest winning where several rated the
    same item, rubric and rater (``judge.store.rating_scope``).

    ``group_by`` (an item field, see ``item_groups``) adds each judge's grouped correlations:
    within each group of rated items, averaged over the groups."""
    get_generation_run(session, generation_run_id)
    selection = _selected_ratings(session, generation_run_id, campaigns)
    ratings = selection.ratings
    judge_runs = session.exec(
        select(JudgeRun)
        .where(JudgeRun.generation_run_id == generation_run_id)
        .order_by(col(JudgeRun.id))
    ).all()
    probabilities, weighted_absent = inclusion_probabilities(session, selection)
    # A registered rubric of N levels is rated and judged 1..N; built-ins on ``scale``.
    from annotation.ratings import registered_scales

    own_scales = registered_scales(session)
    checks = {run.id: trust_flags(session, run.id) for run in judge_runs if run.id is not None}
    groups = (
        None
        if group_by is None
        else item_groups(session, sorted({r.item_id for r in ratings}), group_by)
    )
    by_rubric: dict[str, list[HumanRating]] = defaultdict(list)
    for rating in ratings:
        by_rubric[rating.rubric].append(rating)
    rubrics = {
        rubric: _rubric_reliability(
            session,
            rubric,
            by_rubric[rubric],
            judge_runs,
            checks,
            human=human,
            own=own_scales.get(rubric, scale),
            options=options,
            target_half_width=target_half_width,
            probabilities=probabilities,
            groups=groups,
            group_by=group_by,
        )
        for rubric in sorted(by_rubric)
    }
    return RunReliability(
        generation_run_id,
        human,
        options,
        target_half_width,
        rubrics,
        scale,
        ratings_used=selection.to_dict(),
        ratings_note=selection.describe(),
        weighted_absent=weighted_absent,
    )


def _selected_ratings(
    session: Session, generation_run_id: int, campaigns: Sequence[str]
) -> RatingSelection:
    """The run's ratings that count (``judge.store.rating_scope``), gold items' ratings left
    out; a run with none is refused with the command that imports some."""
    # Ratings of a campaign's gold items test the annotators; they were chosen, not drawn,
    # so they stay out of agreement (annotation.labelstudio.gold).
    from annotation.labelstudio.gold import gold_pairs

    gold = gold_pairs(session, generation_run_id)
    selection = select_ratings(
        session,
        generation_run_id,
        campaigns,
        skip=lambda r: (r.campaign_id, r.item_id) in gold,
    )
    if not selection.ratings:
        raise NotFoundError(
            f"run {generation_run_id} has no human ratings yet; import them with "
            f"`fairjudge ratings import FILE --run {generation_run_id}`"
        )
    return selection


def _rubric_reliability(
    session: Session,
    rubric: str,
    rows: list[HumanRating],
    judge_runs: Sequence[JudgeRun],
    checks: dict[int, dict[str, list[str]]],
    *,
    human: str,
    own: Scale,
    options: BootstrapOptions,
    target_half_width: float,
    probabilities: dict[int, float],
    groups: dict[int, str] | None,
    group_by: str | None,
) -> RubricReliability:
    """One rubric's agreement: its ratings checked against its scale, the human ceiling, and
    each judge run against the humans (with the run's trust checks for the rubric)."""
    matrix = RatingMatrix.from_long(
        [r.item_id for r in rows], [r.rater for r in rows], [r.score for r in rows]
    )
    human_scores = dict(zip((int(i) for i in matrix.items), matrix.item_scores(human), strict=True))
    _check_scale(f"the ratings of rubric {rubric}", [r.score for r in rows], own)
    ceiling = human_vs_human(matrix, options=options, labels=own.labels, warn=False)
    judges = [
        replace(
            _judge_entry(
                session,
                run,
                rubric,
                matrix,
                human_scores,
                ceiling,
                options,
                target_half_width,
                own,
                probabilities,
                groups,
                group_by,
            ),
            checks=[*checks[run.id].get("*", []), *checks[run.id].get(rubric, [])],
        )
        for run in judge_runs
        if run.id is not None
    ]
    return RubricReliability(
        rubric, len(matrix.items), len(matrix.raters), len(rows), ceiling, judges, own
    )
