"""Bias figures corrected by human ratings (prediction-powered inference), one use case for
the CLI (``fairjudge estimates``) and the web API (``GET /api/v1/judge-runs/RUN/estimates``),
the transport of the correction across models (``fairjudge estimates RUN --transport
OTHER``, ``GET .../transport``), and the human-rating budget (``fairjudge estimates --plan``,
``GET .../rating-plan``).

Both interfaces take a typed request and give the domain result's ``to_dict()``
(``annotation.estimates``): every estimate as numbers, null where it is missing, with the
reason and the sampling design it assumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import ConfigDict, Field

from judge.errors import InvalidInputError
from server.usecases.requests import MAX_ID, NumbersNotBooleans

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from annotation.estimates import Estimates
    from annotation.rating_plan import RatingPlans
    from annotation.transport import Transport
    from judge.config_estimates import EstimatesConfig
    from judge.metrics import ItemScore
    from judge.reports.sections import Section
    from judge.store.rating_scope import RatingSelection

    RatedRead = tuple[RatingSelection, Sequence[ItemScore]]

GAP_BY_PATTERN = r"^(stage|factor|scenario|fields\.[A-Za-z0-9_.-]{1,100})$"
TARGET_HELP = (
    "A stage metric (its name, e.g. 'S2 TCS mean (% of max)', or its label, 'S2 TCS mean') "
    "or a rubric (ICS, TCS, ...: its mean on its own scale)."
)


class _Level(NumbersNotBooleans):
    """How raters combine per item, and the intervals' level."""

    model_config = ConfigDict(extra="forbid")

    human_score: Literal["mean", "median"] = Field(
        default="mean", description="How an item's human score combines its raters."
    )
    alpha: float = Field(
        default=0.05,
        ge=0.001,
        le=0.5,
        description="1 - the intervals' coverage (0.05: 95 %), from 0.001 to 0.5.",
    )


class _Scope(NumbersNotBooleans):
    """Which judge run, and which of its generation run's ratings."""

    judge_run: int = Field(ge=1, le=MAX_ID, description="The judge run whose figures to correct.")
    campaigns: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="Campaigns (or import:BATCH) whose ratings count; empty: every one of the "
        "run's, the newest winning per rater, item and rubric.",
    )


class _Assumed(NumbersNotBooleans):
    """The design to assume for ratings without one, and whether to override its check."""

    assume_random: bool = Field(
        default=False,
        description="Treat imported ratings (or those of several campaigns) as a simple "
        "random sample of the run's items; without it they get no human-only or "
        "prediction-powered estimate. Refused when the judge's scores of the rated items "
        "differ from the unrated ones' beyond [estimates] max_smd and smd_alpha.",
    )
    accept_unrepresentative: bool = Field(
        default=False,
        description="With assume_random: use the ratings even when they fail that check; the "
        "design's name then says so.",
    )


class EstimatesOptions(_Level, _Assumed):
    """The options of ``fairjudge estimates``: the design to assume for ratings without
    one, and optionally one gap between two groups of items (all four gap fields, or none)."""

    gap_by: str | None = Field(
        default=None,
        pattern=GAP_BY_PATTERN,
        description="Group the items by factor, scenario, stage or fields.NAME for a gap.",
    )
    gap_a: str | None = Field(
        default=None, min_length=1, max_length=200, description="The gap's group A."
    )
    gap_b: str | None = Field(
        default=None, min_length=1, max_length=200, description="The gap's group B."
    )
    gap_metric: str | None = Field(
        default=None, min_length=1, max_length=200, description="The gap's target. " + TARGET_HELP
    )

    def gap_problem(self) -> str | None:
        """Why the gap fields do not make a gap: all four or none. A rule the request's JSON
        schema cannot state, so it is a 400 over HTTP (checked in ``estimates``), not a 422."""
        given = [self.gap_by, self.gap_a, self.gap_b, self.gap_metric]
        if any(v is not None for v in given) and not all(v is not None for v in given):
            return "a gap needs gap_by, gap_a, gap_b and gap_metric together (or none of them)"
        return None


class EstimatesRequest(EstimatesOptions, _Scope):
    """Judge-only, human-only and prediction-powered figures of one judge run."""


class TransportOptions(_Level, _Assumed):
    """The options of ``fairjudge estimates RUN --transport OTHER``."""

    others: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(
        min_length=1,
        max_length=20,
        description="The other judge runs (the same judge configuration on other models' "
        "answers) to test the correction's transport against.",
    )


class TransportRequest(TransportOptions):
    """Does the judge's correction learnt on one model's answers hold on another's?"""

    judge_run: int = Field(ge=1, le=MAX_ID, description="The reference judge run.")


class RatingPlanOptions(_Level):
    """The options of ``fairjudge estimates --plan``."""

    target_half_width: float = Field(
        ge=1e-6,
        le=1000,
        description="Half the interval's width to aim for, in the target's unit: percentage "
        "points for a stage metric, scale points for a rubric.",
    )
    rho: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="The judge-human correlation to plan with; without it, the one of the "
        "stored ratings (a pilot).",
    )
    metric: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Plan for this target only; without it, every stage metric. " + TARGET_HELP,
    )


class RatingPlanRequest(RatingPlanOptions, _Scope):
    """How many human ratings an interval of ``target_half_width`` needs."""


def rated_read(
    session: Session,
    judge_run_id: int,
    campaigns: Sequence[str] = (),
    *,
    scores: Sequence[ItemScore] | None = None,
) -> RatedRead:
    """What the estimates and the alt-test of a judge run both read, read once: the ratings
    of ``campaigns`` that count (``annotation.estimates.drawn_ratings``) and the run's item
    scores (``scores`` where the caller has them, e.g. from the run's facts). NotFoundError
    for an unknown run; InvalidInputError for an unknown campaign."""
    from annotation.estimates import drawn_ratings
    from judge.metrics import item_scores
    from judge.store.queries import get_judge_run

    run = get_judge_run(session, judge_run_id)
    if scores is None:
        scores = item_scores(session, judge_run_id, run.aggregation)
    return drawn_ratings(session, run.generation_run_id, campaigns), scores


def estimates(
    session: Session,
    request: EstimatesRequest,
    read: RatedRead | None = None,
    rules: EstimatesConfig | None = None,
    *,
    refuse_unrepresentative: bool = True,
) -> Estimates:
    """The judge run's corrected figures (``annotation.estimates.run_estimates``); ``read``:
    ``rated_read`` of the request's run and campaigns, where the caller has it; ``rules``:
    the config's ``[estimates]``. NotFoundError for an unknown run; InvalidInputError for an
    unknown campaign or gap, and for ratings that fail the ``assume_random`` check (the line
    gives the numbers, the bound and the override), unless ``refuse_unrepresentative`` is
    False: then the result, its design refused with that line as its reason (a page that
    shows it beside the other figures)."""
    from annotation.estimate_checks import UNREPRESENTATIVE
    from annotation.estimates import GapQuery, run_estimates

    if problem := request.gap_problem():
        raise InvalidInputError(problem)
    gap = None
    if request.gap_metric and request.gap_by and request.gap_a and request.gap_b:
        gap = GapQuery(request.gap_metric, request.gap_by, request.gap_a, request.gap_b)
    result = run_estimates(
        session,
        request.judge_run,
        campaigns=request.campaigns,
        human=request.human_score,
        assume_random=request.assume_random,
        accept_unrepresentative=request.accept_unrepresentative,
        rules=rules,
        alpha=request.alpha,
        gap=gap,
        selection=None if read is None else read[0],
        scores=None if read is None else read[1],
    )
    if result.design.name == UNREPRESENTATIVE and refuse_unrepresentative:
        raise InvalidInputError(result.design.reason)
    return result


def estimates_section(result: Estimates) -> Section:
    """The estimates as a report section (``annotation.estimates_section``), as the CLI
    prints them."""
    from annotation.estimates_section import section_of

    return section_of(result)


def estimates_in(
    engine: Engine, request: EstimatesRequest, rules: EstimatesConfig | None = None
) -> Estimates:
    """``estimates`` in a session of its own."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return estimates(session, request, rules=rules)


def transport(
    session: Session, request: TransportRequest, rules: EstimatesConfig | None = None
) -> Transport:
    """The transport test of the run's correction to the other runs' models, with each
    model's own and pooled estimates (``annotation.transport.transport_estimates``)."""
    from annotation.transport import transport_estimates

    return transport_estimates(
        session,
        [request.judge_run, *request.others],
        human=request.human_score,
        assume_random=request.assume_random,
        accept_unrepresentative=request.accept_unrepresentative,
        rules=rules,
        alpha=request.alpha,
    )


def transport_in(
    engine: Engine, request: TransportRequest, rules: EstimatesConfig | None = None
) -> Transport:
    """``transport`` in a session of its own."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return transport(session, request, rules)


def plan_ratings(session: Session, request: RatingPlanRequest) -> RatingPlans:
    """Human ratings needed with the judge (PPI++) and without, per stage metric or for the
    target named, from ``rho`` or the stored ratings' correlation with the judge."""
    from annotation.rating_plan import rating_plans

    return rating_plans(
        session,
        request.judge_run,
        half_width=request.target_half_width,
        rho=request.rho,
        target=request.metric,
        campaigns=request.campaigns,
        human=request.human_score,
        alpha=request.alpha,
    )


def plan_ratings_in(engine: Engine, request: RatingPlanRequest) -> RatingPlans:
    """``plan_ratings`` in a session of its own."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return plan_ratings(session, request)
