"""``/api/v1/judge-runs/<id>/estimates``, ``/transport`` and ``/rating-plan``: a judge run's
bias figures corrected by human ratings (judge-only, human-only and prediction-powered, side
by side), whether the judge's correction transports to other models' answers, and the human
ratings a target interval needs (``server.usecases.estimates``; the shapes of ``fairjudge
estimates --json``, ``... --transport OTHER --json`` and ``... --plan --json``).

The response models below are the domain results' ``to_dict()`` field by field; each forbids
fields it does not declare, so the OpenAPI document cannot drift from what is sent. A number
that can be missing (a refused estimate, an undefined correlation) is nullable.
"""

from __future__ import annotations

from typing import Any

from flask import current_app
from pydantic import BaseModel, ConfigDict, Field

from server.api import blueprint, dump, in_api_words
from server.db import get_session
from server.schemas import RatingScopeQuery, RunPath, StandingOut
from server.usecases.estimates import (
    EstimatesOptions,
    EstimatesRequest,
    RatingPlanOptions,
    RatingPlanRequest,
    TransportOptions,
    TransportRequest,
    estimates,
    plan_ratings,
    transport,
)
from server.usecases.standing import estimates_with_standing, transport_with_standing

bp = blueprint("estimates", __name__, "estimates")


class _Qualified(BaseModel):
    require_qualified: bool = Field(
        default=False,
        description="Answer 409, naming the rubric and why, unless the judge is validated "
        "for every rubric it scored (`fairjudge checks qualify`), as the report does.",
    )


class EstimatesQuery(RatingScopeQuery, EstimatesOptions, _Qualified):
    """Which ratings count, the design to assume for ratings without one, an optional gap
    (gap_by, gap_a, gap_b and gap_metric together), and whether to refuse an unqualified
    judge."""


class TransportQuery(TransportOptions, _Qualified):
    """The other judge runs (``others``, repeated), the design to assume for ratings without
    one, and whether to refuse an unqualified judge (this run's or any other's)."""


class RatingPlanQuery(RatingScopeQuery, RatingPlanOptions):
    """The interval to aim for, and the correlation to plan with (default: the pilot's)."""


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EstimateOut(_Out):
    """One estimate with its interval, in the target's unit (null: refused, see reason)."""

    method: str = Field(description="judge-only, human-only or prediction-powered.")
    value: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None = Field(description="Standard error.")
    n: int = Field(description="Rated items used (0 for judge-only).")
    N: int = Field(description="Items of the cell the judge scored.")
    effective_n: float | None = Field(
        description="Human ratings alone that would give an interval as narrow."
    )
    ratings_saved: float | None = Field(description="effective_n - n.")
    lam: float | None = Field(description="PPI++'s tuning weight (0: human-only).")
    design: str = Field(description="How the rated items are weighted.")
    small_sample: bool = Field(
        description="Fewer than 30 rated items: a t interval, and approximate."
    )
    reason: str = Field(
        description="Why there is no value, or no interval (too few items, no spread); empty "
        "when both are there."
    )
    interval: str = Field(
        description="How the interval was made: normal, 't, K df' (under 30 rated items), "
        "Wilson or t (judge-only); empty without one."
    )


class BestOut(_Out):
    """Prediction-powered where people rated the cell, else judge-only (``method`` says)."""

    method: str
    value: float | None
    ci_low: float | None
    ci_high: float | None


class CellOut(_Out):
    """A stage metric (percent) or a rubric's mean (its scale) for one factor, or 'all'."""

    factor: str
    target: str = Field(description="The metric's name, or the rubric's.")
    label: str
    stage: str | None = Field(description="The metric's stage; null for a rubric's mean.")
    rubric: str
    unit: str
    items: int = Field(description="Items of the cell in the judge run, scored or not.")
    judge_only: EstimateOut
    human_only: EstimateOut
    prediction_powered: EstimateOut
    best: BestOut
    small_sample: bool = Field(description="The row's mark: fewer than 30 rated items.")
    judge_standing: str = Field(
        description="The judge run's standing on the row's rubric (``standing``'s state)."
    )


class GapGroupsOut(_Out):
    """One method's estimate in each group."""

    a: EstimateOut
    b: EstimateOut


class GapOut(_Out):
    """Group A's value minus group B's, three ways: each method's gap is an estimate whose
    interval is the difference's own (``n``, ``N``: both groups together)."""

    target: str
    group_by: str
    a: str
    b: str
    unit: str
    judge_only: EstimateOut
    human_only: EstimateOut
    prediction_powered: EstimateOut
    groups: dict[str, GapGroupsOut] = Field(description="Method -> its estimate in A and B.")
    best: BestOut
    judge_standing: str = Field(description="The judge run's standing on the target's rubric.")


class ComparisonOut(_Out):
    """The judge's scores of the rated items against the unrated ones'."""

    n_rated: int
    n_unrated: int
    mean_rated: float
    mean_unrated: float
    smd: float | None = Field(description="Standardised mean difference (null: infinite).")
    statistic: float | None = Field(description="Welch's t.")
    p_value: float = Field(description="Welch's two-sided p, before correction.")


class RubricBalanceOut(_Out):
    rubric: str
    comparison: ComparisonOut | None
    p_corrected: float | None = Field(description="Bonferroni over the rubrics compared.")
    failed: bool
    reason: str


class RepresentativenessOut(_Out):
    """The check an assumed random design passes first ([estimates] max_smd, smd_alpha)."""

    max_smd: float
    alpha: float
    passed: bool
    accepted_unrepresentative: bool
    rubrics: list[RubricBalanceOut]


class DesignOut(_Out):
    """The sampling design the human-only and prediction-powered estimates assume."""

    name: str = Field(
        description="random, stratified, disagreement, assumed random (...), refused or no ratings."
    )
    representativeness: RepresentativenessOut | None = Field(
        description="For an assumed random design: how the rated items compare with the rest."
    )
    usable: bool = Field(description="False: no human-only or prediction-powered estimate.")
    description: str
    reason: str = Field(description="Why the ratings cannot be used; empty when they can.")
    campaign: str | None
    weighted: bool
    stratified: bool


class RatingsUsedOut(_Out):
    scopes: list[str] = Field(description="The campaigns and import batches used.")
    named: bool
    superseded: int
    rule: str


class EstimatesOut(_Out):
    """Every stage metric and rubric mean of the run, three ways, and the gap asked for."""

    judge_run: int
    generation_run: int
    human_score: str
    alpha: float
    design: DesignOut
    ratings_used: RatingsUsedOut
    ratings_note: str
    metrics: list[CellOut]
    rubrics: list[CellOut]
    gap: GapOut | None
    standing: dict[str, StandingOut] = Field(
        description="The judge run's standing per rubric, as report.json's ``standing``."
    )


class RunModelOut(_Out):
    judge_run: int
    generation_run: int
    model: str
    label: str


class DifferenceOut(_Out):
    """One model's judge-human relation minus the reference model's, with t intervals."""

    model: str
    n: int
    bias: float
    bias_low: float
    bias_high: float
    slope: float
    slope_low: float
    slope_high: float


class TransportTestOut(_Out):
    reference: str
    n_reference: int
    centre: float = Field(description="The pooled mean judge score (where bias is measured).")
    differences: list[DifferenceOut]
    f_statistic: float | None
    df_num: int
    df_den: int
    p_value: float
    alpha: float


class ModelEstimatesOut(_Out):
    run: RunModelOut
    own: EstimateOut
    pooled: EstimateOut
    judge_standing: str = Field(description="This run's judge standing on the target's rubric.")


class TargetTransportOut(_Out):
    target: str
    label: str
    unit: str
    transports: bool | None = Field(description="null: not tested (see reason).")
    reason: str
    test: TransportTestOut | None
    models: list[ModelEstimatesOut]


class TransportOut(_Out):
    """The transport test of every figure across the runs, and each model's estimates."""

    runs: list[RunModelOut]
    level: float = Field(description="[estimates] transport_alpha.")
    alpha: float
    targets: list[TargetTransportOut]
    standing: dict[str, dict[str, StandingOut]] = Field(
        description="Each compared judge run's standing (by run id, then rubric)."
    )


class RatingPlanOut(_Out):
    """Human ratings one target needs (null counts: no plan, see reason)."""

    target: str
    unit: str
    half_width: float
    N: int = Field(description="Items the judge scored.")
    n_pilot: int = Field(description="Rated items the judge also scored.")
    rho: float | None
    rho_source: str
    sd: float | None = Field(description="The people's spread planned with.")
    sd_source: str
    n_ppi: int | None = Field(description="Ratings for the prediction-powered interval.")
    n_human_only: int | None = Field(description="Ratings for a human-only interval.")
    ratings_saved: int | None
    reason: str


class RatingPlansOut(_Out):
    judge_run: int
    alpha: float
    plans: list[RatingPlanOut]


def _require(run_ids: list[int], wanted: bool) -> None:
    """``UnqualifiedError`` (409, the reason) when asked and a rubric of a run is not
    validated (``server.usecases.standing.require_qualified``)."""
    if wanted:
        from server.usecases.standing import require_qualified

        for run_id in run_ids:
            require_qualified(get_session(), run_id)


@bp.get("/judge-runs/<int:run_id>/estimates", responses={200: EstimatesOut})
def judge_run_estimates(path: RunPath, query: EstimatesQuery) -> Any:
    """The run's stage metrics and rubric means three ways: judge-only, human-only and
    prediction-powered (PPI++), per factor and overall, with intervals.

    The shape of `fairjudge estimates --json`. Imported ratings (or those of several
    campaigns) have no sampling design: their human-only and prediction-powered estimates
    are null with the reason, unless `assume_random=true`. With `require_qualified=true`, 409
    naming the rubric when the judge is not validated for every rubric it scored."""
    _require([path.run_id], query.require_qualified)
    options = query.model_dump(exclude={"campaign", "require_qualified"})
    request = EstimatesRequest(judge_run=path.run_id, campaigns=query.campaign, **options)
    rules = current_app.config["SETTINGS"].estimates
    found = estimates(get_session(), request, rules=rules)
    return in_api_words(dump(EstimatesOut, estimates_with_standing(get_session(), found)))


@bp.get("/judge-runs/<int:run_id>/transport", responses={200: TransportOut})
def judge_run_transport(path: RunPath, query: TransportQuery) -> Any:
    """Does the judge's correction learnt on this run's answers hold on other models'?

    `others` names judge runs of the same judge configuration on other generation runs.
    Per figure, the regression of human on judge with a model interaction (differences in
    bias and slope, joint F-test); each model's own prediction-powered estimate, and the
    pooled correction where the relation is the same. The shape of `fairjudge estimates RUN
    --transport OTHER --json`. With `require_qualified=true`, 409 when the judge is not
    validated for every rubric of this run or of one of `others`."""
    _require([path.run_id, *query.others], query.require_qualified)
    request = TransportRequest(
        judge_run=path.run_id, **query.model_dump(exclude={"require_qualified"})
    )
    rules = current_app.config["SETTINGS"].estimates
    found = transport(get_session(), request, rules)
    return in_api_words(dump(TransportOut, transport_with_standing(get_session(), found)))


@bp.get("/judge-runs/<int:run_id>/rating-plan", responses={200: RatingPlansOut})
def rating_plan(path: RunPath, query: RatingPlanQuery) -> Any:
    """How many human ratings an interval of `target_half_width` needs, with the judge
    (PPI++) and without, per stage metric (or for `metric`), from `rho` or the stored
    ratings' correlation with the judge.

    The shape of `fairjudge estimates --plan --json`."""
    options = query.model_dump(exclude={"campaign"})
    request = RatingPlanRequest(judge_run=path.run_id, campaigns=query.campaign, **options)
    return dump(RatingPlansOut, plan_ratings(get_session(), request).to_dict())
