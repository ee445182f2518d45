"""What the comparison page shows (no Flask here): two or more judge runs picked from the
judge-run list, side by side (the plain comparison's tables), and every run after the first
paired against the first (``server.usecases.comparisons``): a heatmap of B - A per factor x
stage metric, the overall differences with their intervals and flips, and where people rated
both runs' answers the differences corrected by their ratings.

One interval method per figure: the heatmap and the differences chart give the paired table's
percentile bootstrap interval over pairs; the corrected chart gives normal intervals (Student
t under 30 rated pairs) to its judge-only and prediction-powered marks alike. Units (percentage
points) and n (pairs, rated pairs) are written beside every mark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from server.dashboard.charts import Cell, Chart, Point, fmt, heatmap, intervals, shape_legend
from server.dashboard.run_page import short_metric
from server.dashboard.web import api_url

if TYPE_CHECKING:
    from markupsafe import Markup
    from sqlmodel import Session

    from server.usecases.comparisons import Comparison, PairedComparison, PairOutcome

ALL = "all"
BOOTSTRAP = "95 % percentile bootstrap over pairs"
UNIT = "B - A, percentage points"


@dataclass(frozen=True)
class RunChoice:
    """A judge run in the form's list."""

    id: int
    label: str
    picked: bool


@dataclass(frozen=True)
class PairView:
    """One run against the first: its charts, or why it was not paired."""

    title: str
    reason: str
    heatmap: Chart | None = None
    overall: Chart | None = None
    corrected: Chart | None = None
    corrected_note: str = ""
    legend: Markup | None = None
    links: dict[str, str] | None = None
    notes: Sequence[str] = ()


@dataclass(frozen=True)
class ComparePage:
    choices: list[RunChoice]
    picked: list[int]
    margin: float | None
    assume_random: bool
    side_by_side: list[Any]  # the plain comparison's report tables
    pairs: list[PairView]
    message: str  # what to do when fewer than two runs are picked


def _choices(session: Session, picked: Sequence[int]) -> list[RunChoice]:
    from server import usecases

    runs = usecases.list_runs(session).judge_runs
    return [
        RunChoice(
            r.id,
            f"judge run {r.id}: {r.model} on generation run {r.generation_run} "
            f"({r.prompt_variant}, temperature {r.temperature:g}, {r.scored} scored)",
            r.id in picked,
        )
        for r in runs
    ]


def compare_page(
    session: Session, picked: Sequence[int], margin: float | None, assume_random: bool
) -> ComparePage:
    """The form, and with two or more runs picked their comparison."""
    from server.usecases.comparisons import comparison

    choices = _choices(session, picked)
    distinct = list(dict.fromkeys(picked))
    if len(distinct) < 2:
        message = "Pick two or more judge runs (the first is A; each other run is B against it)."
        return ComparePage(choices, distinct, margin, assume_random, [], [], message)
    found: Comparison = comparison(session, distinct, margin=margin, assume_random=assume_random)
    pairs = [_pair(p, found.runs[0].label, assume_random) for p in found.pairs]
    tables = list(found.side_by_side.tables)
    return ComparePage(choices, distinct, margin, assume_random, tables, pairs, "")


def _pair(outcome: PairOutcome, label_a: str, assume_random: bool) -> PairView:
    title = f"{outcome.b.label} - {label_a}"
    if outcome.paired is None:
        return PairView(title, outcome.reason)
    p = outcome.paired
    query: dict[str, Any] = {"judge_run": [p.a.judge_run_id, p.b.judge_run_id]}
    if assume_random:
        query["assume_random"] = "true"
    links = {
        "paired.json": api_url("/compare/paired.json", {**query, "margin": p.margin}),
        "paired.csv": api_url("/compare.csv", {**query, "paired": "true", "table": "paired.csv"}),
    }
    corrected, note = _corrected(p)
    flagged = (
        "Cells that differ after Holm: " + "; ".join(p.flagged) + "."
        if p.flagged
        else "No cell differs after Holm."
    )
    return PairView(
        title, "", _heatmap(p), _overall(p), corrected, note,
        shape_legend(["judge-only", "prediction-powered"]) if corrected else None,
        links, [flagged, "Holm is applied within this pair's table, not across pairs.",
                *p.legend],
    )  # fmt: skip


def _cell_hover(r: Any) -> str:
    ci = f" [{fmt(r.ci_low, 1)}, {fmt(r.ci_high, 1)}] ({BOOTSTRAP})" if r.ci_low is not None else ""
    p = f", p (Holm) {_p(r.p_adjusted)}" + (" flagged" if r.flagged else "")
    return (
        f"{r.factor}, {r.metric}: B - A {fmt(r.diff, 1)} points{ci}{' ' + r.note if r.note else ''}"
        f", {r.n_pairs} pairs (dropped A {r.dropped_a}, B {r.dropped_b}), flips pass->fail "
        f"{r.pass_to_fail}, fail->pass {r.fail_to_pass}" + (p if r.p_adjusted is not None else "")
    )


def _heatmap(p: PairedComparison) -> Chart:
    """Factors (all first) x metrics, each cell B - A with n pairs and flips; a cell without
    a difference (no scored pair) is hatched."""
    factors = list(dict.fromkeys(r.factor for r in p.rows))
    metrics = list(dict.fromkeys(short_metric(r.metric) for r in p.rows))
    reach = max([abs(r.diff) for r in p.rows if r.diff is not None] + [p.margin])
    cells, table = {}, []
    for r in p.rows:
        name = short_metric(r.metric)
        mark = " *" if r.flagged else ""
        text = "—" if r.diff is None else f"{r.diff:+.1f}{mark}"
        detail = f"n={r.n_pairs} flips {r.pass_to_fail}/{r.fail_to_pass}"
        cells[(r.factor, name)] = Cell(r.diff, text, detail, _cell_hover(r))
        table.append(_numbers(r, name))
    svg = heatmap(
        f"B - A per factor and stage metric: {p.b.label} - {p.a.label}",
        factors,
        metrics,
        cells,
        domain=(-reach, reach),
        legend=f"{UNIT} (light: B lower, dark: B higher); n pairs, flips pass->fail/fail->pass;"
        " * differs after Holm",
    )
    return Chart(
        f"{p.b.label} - {p.a.label} per factor and stage metric ({UNIT}, {BOOTSTRAP}, n pairs)",
        svg,
        [
            "factor",
            "metric",
            "pairs",
            "dropped A/B",
            "A",
            "B",
            "B - A",
            "CI low",
            "CI high",
            "p",
            "p (Holm)",
            "flagged",
            "pass->fail",
            "fail->pass",
            "equivalent",
            "no worse",
        ],  # fmt: skip
        table,
        notes=[f"Margin ±{p.margin:g} points for the equivalence verdicts (TOST)."],
    )


def _p(x: float | None) -> str:
    """A p-value to three significant digits, as the report's paired table writes it."""
    return "—" if x is None else f"{x:.3g}"


def _verdict(v: bool | None) -> str:
    return "too few pairs" if v is None else ("yes" if v else "no")


def _numbers(r: Any, name: str) -> list[str]:
    return [
        r.factor, name, str(r.n_pairs), f"{r.dropped_a}/{r.dropped_b}", fmt(r.value_a, 1),
        fmt(r.value_b, 1), fmt(r.diff, 1), fmt(r.ci_low, 1), fmt(r.ci_high, 1),
        _p(r.p_value), _p(r.p_adjusted), "yes" if r.flagged else "no",
        str(r.pass_to_fail), str(r.fail_to_pass), _verdict(r.equivalent), _verdict(r.no_worse),
    ]  # fmt: skip


def _overall(p: PairedComparison) -> Chart:
    """Every metric over all factors: B - A with its bootstrap interval, n and flips."""
    rows = [r for r in p.rows if r.factor == ALL]
    points = [
        Point(
            short_metric(r.metric),
            r.diff,
            r.ci_low,
            r.ci_high,
            f"n={r.n_pairs} flips {r.pass_to_fail}/{r.fail_to_pass}"
            + (" *" if r.flagged else "")
            + (" no spread" if r.diff is not None and r.ci_low is None and r.n_pairs > 1 else ""),
        )
        for r in rows
    ]
    svg = intervals(
        f"B - A over all factors: {p.b.label} - {p.a.label}",
        points,
        axis=f"{UNIT} ({BOOTSTRAP}); n pairs, flips pass->fail/fail->pass",
        reference=0.0,
    )
    return Chart(
        f"{p.b.label} - {p.a.label} over all factors ({UNIT}, {BOOTSTRAP})",
        svg,
        ["metric", "B - A", "CI low", "CI high", "pairs", "pass->fail", "fail->pass"],
        [
            [
                short_metric(r.metric),
                fmt(r.diff, 1),
                fmt(r.ci_low, 1),
                fmt(r.ci_high, 1),
                str(r.n_pairs),
                str(r.pass_to_fail),
                str(r.fail_to_pass),
            ]
            for r in rows
        ],  # fmt: skip
    )


def _corrected(p: PairedComparison) -> tuple[Chart | None, str]:
    """The judge-only and prediction-powered B - A of every metric over all factors (normal
    intervals both), or why there is none."""
    c = p.corrected
    if c is None:
        return None, "Nobody has rated these runs' answers: no difference corrected by people."
    if not c.usable:
        return None, f"No corrected difference: {c.reason}"
    points, table = [], []
    for r in (r for r in c.rows if r.factor == ALL):
        name = short_metric(r.metric)
        for e, series in (
            (r.judge_only, "judge-only"),
            (r.prediction_powered, "prediction-powered"),
        ):
            n = f"n={r.n_pairs} pairs" if series == "judge-only" else f"n={r.n_rated} rated pairs"
            points.append(Point(f"{name} · {series}", e.value, e.ci_low, e.ci_high,
                                n if e.value is not None else e.reason, series))  # fmt: skip
        table.append(
            [name, str(r.n_pairs), str(r.n_rated), r.judge_only.text(sign="+"),
             r.human_only.text(sign="+"), r.prediction_powered.text(sign="+")
             if r.prediction_powered.value is not None else r.prediction_powered.reason]
        )  # fmt: skip
    level = round((1 - c.alpha) * 100)
    svg = intervals(
        f"B - A corrected by people's ratings: {p.b.label} - {p.a.label}",
        points,
        axis=f"{UNIT} ({level} % normal interval; t under 30 rated pairs)",
        reference=0.0,
    )
    chart = Chart(
        f"{p.b.label} - {p.a.label} corrected by people's ratings ({UNIT}, {level} % normal "
        "intervals)",
        svg,
        ["metric", "pairs", "rated pairs", "judge-only", "human-only", "prediction-powered"],
        table,
        notes=[f"Ratings: A {c.design_a}; B {c.design_b}."],
    )
    return chart, ""
