"""A judge run's agreement with people: per rubric the judge against the people's ceiling
(their agreement among themselves), the scatter and confusion of scores, the bias figures
corrected by the ratings (prediction-powered, beside judge-only and human-only) and the
alt-test's verdict. No Flask here.

The numbers are the use cases' the API serialises: ``agreement`` (``GET .../agreement``),
``estimates`` (``GET .../estimates``) and ``alt_test_run`` (``GET .../alt-test``), called with
the same options the page was asked with, so a page and the API it links agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import astuple, dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from judge.errors import InvalidInputError, NotFoundError
from server.dashboard.charts import Chart, Point, fmt, intervals
from server.dashboard.figures import agreement_charts
from server.dashboard.web import api_url
from server.usecases.requests import problems_of

if TYPE_CHECKING:
    from sqlmodel import Session

    from server.dashboard.cache import Computed
    from server.usecases.dashboard import AgreementPlot

PRESETS = ("expert", "skilled", "crowd")
JUDGE_COEFFICIENT = ("kappa_quadratic", "judge vs people: weighted kappa (quadratic)")
CEILING = ("alpha_interval", "people among themselves: Krippendorff's alpha (interval)")
"""What the ceiling chart compares, as the report's reading does."""


@dataclass(frozen=True)
class Options:
    """The page's query: whose ratings, the intervals' resamples, how raters combine, the
    design to assume for ratings without one, and the alt-test's margin."""

    campaigns: tuple[str, ...] = ()
    n_bootstrap: int = 1000
    seed: int = 0
    human_score: str = "mean"
    assume_random: bool = False
    epsilon: str = "expert"

    def key(self) -> tuple[Any, ...]:
        return astuple(self)

    def agreement_query(self) -> dict[str, Any]:
        return {
            "campaign": list(self.campaigns),
            "n_bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "human_score": self.human_score,
        }

    def estimates_query(self) -> dict[str, Any]:
        return {
            "campaign": list(self.campaigns),
            "human_score": self.human_score,
            "assume_random": "true" if self.assume_random else None,
        }

    def alttest_query(self) -> dict[str, Any]:
        return {"campaign": list(self.campaigns), "epsilon": self.epsilon}


def options(args: Mapping[str, Any]) -> Options:
    """The options from the query string; InvalidInputError names each bad one."""
    problems, out = [], {}
    for name in ("n_bootstrap", "seed"):
        text = str(args.get(name, "")).strip()
        if text:
            try:
                out[name] = int(text)
            except ValueError:
                problems.append(f"{name}: {text!r} is not an integer")
    human = args.get("human_score") or "mean"
    epsilon = args.get("epsilon") or "expert"
    if epsilon not in PRESETS:
        problems.append(f"epsilon: use one of {', '.join(PRESETS)}")
    if problems:
        raise InvalidInputError("; ".join(problems))
    getlist = getattr(args, "getlist", None)
    campaigns = tuple(getlist("campaign")) if getlist else ()
    chosen = Options(
        campaigns,
        human_score=human,
        epsilon=epsilon,
        assume_random=args.get("assume_random") in ("1", "true", "on"),
        **out,
    )
    _requests(1, chosen)  # refused here, before any work, with the request's own messages
    return chosen


def _requests(run_id: int, o: Options) -> tuple[Any, Any, Any]:
    from server.usecases.agreement import AgreementRequest
    from server.usecases.alttest import AltTestRequest
    from server.usecases.estimates import EstimatesRequest

    scope = {"judge_run": run_id, "campaigns": list(o.campaigns)}
    try:
        return (
            AgreementRequest.model_validate(
                {
                    **scope,
                    "n_bootstrap": o.n_bootstrap,
                    "seed": o.seed,
                    "human_score": o.human_score,
                }
            ),
            EstimatesRequest.model_validate(
                {**scope, "human_score": o.human_score, "assume_random": o.assume_random}
            ),
            AltTestRequest.model_validate({**scope, "epsilon": o.epsilon}),
        )
    except ValidationError as exc:
        raise InvalidInputError("; ".join(problems_of(exc))) from None


@dataclass(frozen=True)
class Figures:
    """What the use cases answered (None where there is nothing, with the reason)."""

    agreement: dict[str, Any] | None
    plots: list[tuple[str, int, AgreementPlot]]
    estimates: dict[str, Any]
    alttest: dict[str, Any] | None
    alttest_refused: str | None
    no_ratings: str | None


def compute(session: Session, run_id: int, o: Options) -> Figures:
    """Agreement, estimates and alt-test of the run (NotFoundError for an unknown run; a run
    nobody rated gets the reason instead of numbers)."""
    from server.usecases.agreement import agreement
    from server.usecases.alttest import alt_test_run
    from server.usecases.estimates import estimates, rated_read
    from server.usecases.runs import judge_run_info

    judge_run_info(session, run_id)  # an unknown run is a 404, not "no ratings"
    agree_rq, estimates_rq, alt_rq = _requests(run_id, o)
    read = rated_read(session, run_id, o.campaigns)  # for the estimates and the alt-test
    found = estimates(session, estimates_rq, read).to_dict()
    try:
        result = agreement(session, agree_rq)
    except NotFoundError as exc:
        return Figures(None, [], found, None, None, str(exc))
    try:
        alt: dict[str, Any] | None = alt_test_run(session, alt_rq, read).to_dict()
        refused = None
    except (InvalidInputError, NotFoundError) as exc:
        alt, refused = None, str(exc)
    return Figures(result.to_dict(), list(result.plots()), found, alt, refused, None)


@dataclass(frozen=True)
class RubricView:
    name: str
    n: int | None
    charts: list[Chart] = field(default_factory=list)


@dataclass(frozen=True)
class AgreementPage:
    run_id: int
    options: Options
    computed: Computed[Figures]
    ceiling: Chart | None
    rubrics: list[RubricView]
    estimates: Chart
    design: dict[str, Any]
    ratings_note: str
    alttest: dict[str, Any] | None
    links: dict[str, str]


def _coef(c: Mapping[str, Any] | None) -> tuple[float | None, float | None, float | None, str]:
    if not c:
        return None, None, None, "not computed"
    return c.get("value"), c.get("ci_low"), c.get("ci_high"), c.get("undefined_reason") or ""


def ceiling_chart(data: Mapping[str, Any], run_id: int) -> Chart:
    """Per rubric, the judge's weighted kappa with the people beside the people's alpha among
    themselves, each with its interval and n."""
    points, rows = [], []
    for rubric, entry in data["rubrics"].items():
        people = entry.get("human_vs_human") or {}
        value, low, high, why = _coef(people.get(CEILING[0]))
        n_people = people.get(CEILING[0], {}).get("n") if people.get(CEILING[0]) else None
        for judge in entry["judges"]:
            j_value, j_low, j_high, j_why = _coef(judge["coefficients"].get(JUDGE_COEFFICIENT[0]))
            points.append(
                Point(
                    f"{rubric}: judge", j_value, j_low, j_high, j_why or f"n={judge['n']}", "judge"
                )
            )
            rows.append(
                [
                    rubric,
                    "judge vs people",
                    fmt(j_value),
                    fmt(j_low),
                    fmt(j_high),
                    str(judge["n"]),
                    j_why,
                ]
            )
        points.append(
            Point(f"{rubric}: people", value, low, high, why or f"n={n_people}", "people")
        )
        rows.append(
            [
                rubric,
                "people among themselves",
                fmt(value),
                fmt(low),
                fmt(high),
                "—" if n_people is None else str(n_people),
                why,
            ]
        )
    lows = [p.low for p in points if p.low is not None] + [0.0]
    svg = intervals(
        "The judge against the people's ceiling",
        points,
        axis="circles: the judge vs people (weighted kappa); squares: people among "
        "themselves (alpha)",
        domain=(min(-0.2, min(lows)), 1.0),
        reference=0.0,
    )
    return Chart(
        "The judge against the people's ceiling (95 % interval)",
        svg,
        ["rubric", "who", "value", "CI low", "CI high", "n items", "undefined because"],
        rows,
        notes=[
            "A judge whose weighted kappa with the people reaches their alpha among themselves "
            "agrees with them about as well as they agree with each other."
        ],
    )


def estimates_chart(data: Mapping[str, Any], run_id: int, o: Options) -> Chart:
    """Each stage metric over all factors three ways: judge-only, human-only and
    prediction-powered, each with its interval, or the reason it has none."""
    points, rows = [], []
    for cell in data["metrics"]:
        if cell["factor"] != "all":
            continue
        for method in ("judge_only", "human_only", "prediction_powered"):
            e = cell[method]
            note = e["reason"] or (f"n={e['n']} rated of N={e['N']}" if e["n"] else f"N={e['N']}")
            points.append(
                Point(
                    f"{cell['label']}: {e['method']}",
                    e["value"],
                    e["ci_low"],
                    e["ci_high"],
                    note,
                    e["method"],
                )
            )
            rows.append(
                [
                    cell["label"],
                    e["method"],
                    fmt(e["value"], 1),
                    fmt(e["ci_low"], 1),
                    fmt(e["ci_high"], 1),
                    str(e["n"]),
                    str(e["N"]),
                    fmt(e["effective_n"], 1),
                    e["reason"],
                ]
            )
    svg = intervals("Stage metrics, three ways", points, axis="percent", domain=(0, 100))
    return Chart(
        "Stage metrics over all factors, three ways (percent, 95 % interval)",
        svg,
        ["metric", "method", "value", "CI low", "CI high", "n rated", "N", "effective n", "reason"],
        rows,
        api_url(f"/judge-runs/{run_id}/estimates", o.estimates_query()),
    )


def agreement_page(run_id: int, o: Options, computed: Computed[Figures]) -> AgreementPage:
    f = computed.value
    rubrics = []
    if f.agreement is not None:
        for name, entry in f.agreement["rubrics"].items():
            labels = None
            for judge in entry["judges"]:
                labels = (judge.get("confusion_matrix") or {}).get("labels") or labels
            charts = [
                chart
                for rubric, _, plot in f.plots
                if rubric == name
                for chart in agreement_charts(plot, labels)
            ]
            rubrics.append(RubricView(name, entry.get("n_rated_items"), charts))
    links = {
        "agreement (JSON)": api_url(f"/judge-runs/{run_id}/agreement", o.agreement_query()),
        "estimates (JSON)": api_url(f"/judge-runs/{run_id}/estimates", o.estimates_query()),
        "alt-test (JSON)": api_url(f"/judge-runs/{run_id}/alt-test", o.alttest_query()),
    }
    return AgreementPage(
        run_id,
        o,
        computed,
        None if f.agreement is None else ceiling_chart(f.agreement, run_id),
        rubrics,
        estimates_chart(f.estimates, run_id, o),
        f.estimates["design"],
        f.estimates.get("ratings_note", ""),
        f.alttest,
        links,
    )
