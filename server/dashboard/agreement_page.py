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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from judge.stats.intervals import interval_legend
from server.dashboard.charts import Chart, Point, fmt, intervals
from server.dashboard.figures import agreement_charts
from server.dashboard.web import api_url
from server.usecases.dashboard import AgreementPageFigures, AgreementPageOptions

if TYPE_CHECKING:
    from server.kept.cache import Computed

JUDGE_COEFFICIENT = ("kappa_quadratic", "judge vs people: weighted kappa (quadratic)")
CEILING = ("alpha_interval", "people among themselves: Krippendorff's alpha (interval)")
"""What the ceiling chart compares, as the report's reading does."""


@dataclass(frozen=True)
class RubricView:
    name: str
    n: int | None
    charts: list[Chart] = field(default_factory=list)


@dataclass(frozen=True)
class AgreementPage:
    run_id: int
    options: AgreementPageOptions
    computed: Computed[AgreementPageFigures]
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


def shared_reasons(reasons: list[str]) -> set[str]:
    """The reasons more than one row gives: said once above a chart, not in each row.

    >>> sorted(shared_reasons(["a", "b", "a", ""]))
    ['a']
    """
    return {r for r in reasons if r and reasons.count(r) > 1}


def estimates_chart(data: Mapping[str, Any], run_id: int, o: AgreementPageOptions) -> Chart:
    """Each stage metric over all factors three ways: judge-only, human-only and
    prediction-powered, each with its interval and n, or the reason it has none (a reason
    many rows share is said once above the chart)."""
    cells = [
        (cell, cell[method])
        for cell in data["metrics"]
        if cell["factor"] == "all"
        for method in ("judge_only", "human_only", "prediction_powered")
    ]
    shared = shared_reasons([e["reason"] for _, e in cells if e["value"] is None])
    points, rows = [], []
    for cell, e in cells:
        n = f"n={e['n']} rated of N={e['N']}" if e["n"] else f"N={e['N']}"
        reason = e["reason"]
        if reason in shared and e["value"] is None:
            reason = "reason above the chart"
        note = f"{n}; {reason}" if reason else n
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
    above = [
        f"No estimate for {sum(e['reason'] == r and e['value'] is None for _, e in cells)} "
        f"of the {len(cells)} rows: {r}"
        for r in sorted(shared)
    ]
    return Chart(
        "Stage metrics over all factors, three ways (percent, 95 % interval)",
        svg,
        ["metric", "method", "value", "CI low", "CI high", "n rated", "N", "effective n", "reason"],
        rows,
        api_url(f"/judge-runs/{run_id}/estimates", o.estimates_query()),
        notes=[
            "n: rated items used; N: items the judge scored.",
            f"judge-only: {interval_legend()}; human-only and prediction-powered: normal.",
        ],
        above=above,
    )


def agreement_page(
    run_id: int, o: AgreementPageOptions, computed: Computed[AgreementPageFigures]
) -> AgreementPage:
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
    # Only links that answer: agreement and the alt-test need ratings (a 404 without them).
    links = {}
    if f.agreement is not None:
        links["agreement (JSON)"] = api_url(f"/judge-runs/{run_id}/agreement", o.agreement_query())
    links["estimates (JSON)"] = api_url(f"/judge-runs/{run_id}/estimates", o.estimates_query())
    if f.alttest is not None:
        links["alt-test (JSON)"] = api_url(f"/judge-runs/{run_id}/alt-test", o.alttest_query())
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
