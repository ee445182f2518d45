"""A judge run's page: the answer first, then the factor x stage-metric grid as a heatmap,
the score distributions, the judgments that have no score (with the judge's raw reply) and
the item browser, a page of items at a time. No Flask here: the view passes the request's
values in.

Every number comes from the sections ``full_report`` builds (``server.usecases.dashboard.
judge_run_view``): the answer's payload, the stage metrics' payload and figure, the browser.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from judge.stats.intervals import MEAN, METHOD_NAMES, SHARE, interval_legend
from judge.stats.multiplicity import ALPHA as GRID_ALPHA
from server.dashboard.charts import Cell, Chart, Point, fmt, heatmap, intervals
from server.dashboard.figures import distribution_chart
from server.dashboard.web import api_url
from server.usecases.dashboard import BoxPlot

if TYPE_CHECKING:
    from server.kept.cache import Computed
    from server.usecases.dashboard import BrowsedItem, JudgeRunView
    from server.usecases.reports import Table

PER_PAGE = 25
"""Items the browser shows at once."""
UNSCORED_SHOWN = 100
"""Unscored judgments listed on the page (the browser filters to every one of them)."""
FLAG_KINDS = ("flagged", "unscored", "cut_off", "repaired", "answer_not_ok")
"""The browser's flag filter (``BrowsedItem.flag_kinds``)."""


def short_metric(name: str) -> str:
    """A metric's short label, as the report's tables write it.

    >>> short_metric("S1 ICS share>=3 (%)"), short_metric("S2 TCS mean (% of max)")
    ('S1 ICS>=3', 'S2 TCS mean')
    """
    return re.sub(r"\s*\((%|% of max)\)$", "", name).replace(" share>=", ">=")


@dataclass(frozen=True)
class Verdict:
    rubric: str
    by_preset: dict[str, str | None]
    refused: str | None


@dataclass(frozen=True)
class Answer:
    """The answer: the best figure of each metric over all factors (a chart), the alt-test's
    verdicts, the full table per factor and the section's notes."""

    overall: Chart
    verdicts: list[Verdict]
    presets: list[str]
    tables: list[Table]
    notes: list[str]
    design: str


def answer(view: JudgeRunView) -> Answer:
    payload = view.answer.payload
    best = [b for b in payload["best"] if b["factor"] == "all"]
    points = [
        Point(
            short_metric(b["metric"]),
            b["value"],
            b["ci_low"],
            b["ci_high"],
            f"{b['method']}, {b['rated']} rated"
            + (f"; {b['reason']}" if b.get("reason") and b["value"] is not None else ""),
            b["method"],
        )
        for b in best
    ]
    chart = Chart(
        "The best figure per stage metric, all factors (percent, 95 % interval)",
        intervals("Best figure per stage metric", points, axis="percent", domain=(0, 100)),
        ["metric", "figure", "CI low", "CI high", "from", "items rated"],
        [
            [
                short_metric(b["metric"]),
                fmt(b["value"], 1),
                fmt(b["ci_low"], 1),
                fmt(b["ci_high"], 1),
                b["method"],
                str(b["rated"]),
            ]
            for b in best
        ],
        notes=[f"judge only: {interval_legend()}; prediction-powered: normal (PPI++)."],
    )
    verdicts = [Verdict(v["rubric"], v["verdicts"], v["refused"]) for v in payload["alt_test"]]
    presets = list(dict.fromkeys(p for v in verdicts for p in v.by_preset))
    design = payload.get("design")
    return Answer(
        chart,
        verdicts,
        presets,
        list(view.answer.tables),
        list(view.answer.notes),
        design if isinstance(design, str) else "",
    )


METHODS = {SHARE: METHOD_NAMES[SHARE], MEAN: METHOD_NAMES[MEAN]}


def short(note: str) -> str:
    """A missing interval's reason as a heatmap cell has room for.

    >>> short("too few items for an interval (2; 5 needed)"), short("no spread: all 6 ...")
    ('too few', 'no spread')
    """
    return next((w for w in ("too few", "no spread") if note.startswith(w)), "no interval")


def metric_grid(payload: Mapping[str, Any], run_id: int) -> Chart:
    """Factors (and all of them) x stage metrics as a heatmap on 0-100: each cell the metric's
    value, its 95 % interval and n scored, unscored items named; a cell with no scored item is
    hatched, not zero."""
    rows_in = [*payload["metrics_by_factor"], *payload["metrics_overall"]]
    metrics = list(dict.fromkeys(short_metric(r["metric"]) for r in payload["metrics_overall"]))
    factors = sorted({r["factor"] for r in payload["metrics_by_factor"]}) + ["all"]
    cells, table = {}, []
    for r in rows_in:
        name = short_metric(r["metric"])
        unscored = f", {r['n_unscored']} unscored" if r["n_unscored"] else ""
        value = r["value"]
        if value is None:
            cells[(r["factor"], name)] = Cell(
                None,
                "—",
                f"n=0{unscored}",
                f"{r['factor']}, {r['metric']}: no scored item{unscored}",
            )
        else:
            note = r.get("ci_note") or "no interval"
            has_ci = r["ci_low"] is not None and r["ci_high"] is not None
            ci = f"{fmt(r['ci_low'], 0)}–{fmt(r['ci_high'], 0)}" if has_ci else short(note)
            flag = f" ‡ p={fmt(r['p_adjusted'], 3)}" if r.get("flagged") else ""
            cells[(r["factor"], name)] = Cell(
                value,
                f"{value:.0f}",
                f"{ci} n={r['n_scored']}"
                + (f" u={r['n_unscored']}" if r["n_unscored"] else "")
                + flag,
                f"{r['factor']}, {r['metric']}: {value:.1f} "
                + (
                    f"[{fmt(r['ci_low'], 1)}, {fmt(r['ci_high'], 1)}] ({METHODS[r['ci_method']]})"
                    if has_ci
                    else f"({note})"
                )
                + f", n scored {r['n_scored']}{unscored}"
                + (f", {r['n_truncated']} with a truncated answer" if r.get("n_truncated") else "")
                + (
                    f"; differs from the other factors (Holm-adjusted p {fmt(r['p_adjusted'], 4)})"
                    if r.get("flagged")
                    else ""
                ),
            )
        table.append(
            [
                r["factor"],
                name,
                fmt(value, 1),
                fmt(r["ci_low"], 1),
                fmt(r["ci_high"], 1),
                str(r["n_scored"]),
                str(r["n_unscored"]),
                fmt(r.get("p_value"), 4),
                fmt(r.get("p_adjusted"), 4),
                "yes" if r.get("flagged") else "no",
                fmt(r.get("sim_low"), 1),
                fmt(r.get("sim_high"), 1),
            ]
        )
    svg = heatmap(
        "Stage metrics per factor",
        factors,
        metrics,
        cells,
        domain=(0, 100),
        legend="percent (share, or mean as % of the maximum); n scored, u unscored; "
        f"interval: {METHODS[SHARE]} (shares), {METHODS[MEAN]} (means)",
    )
    return Chart(
        "Stage metrics per factor (percent, 95 % interval, n scored)",
        svg,
        [
            "factor",
            "metric",
            "value",
            "CI low",
            "CI high",
            "n scored",
            "n unscored",
            "p vs rest",
            "p (Holm)",
            "flag",
            "sim. CI low",
            "sim. CI high",
        ],  # fmt: skip
        table,
        api_url(f"/judge-runs/{run_id}/report.csv", {"table": "metrics.csv"}),
        notes=[
            interval_legend() + "; the same intervals as the answer's judge-only figures.",
            "Each factor's cell is tested against the other factors (Fisher's exact test for a "
            "share, Welch's t for a mean); p (Holm): adjusted over every tested cell, because "
            "the grid claims which factor is treated differently and Holm bounds the chance of "
            f"any false flag at {GRID_ALPHA:g}; ‡ and flag yes: adjusted p < {GRID_ALPHA:g}; "
            "sim. CI: Bonferroni-simultaneous interval over the cells.",
        ],
    )


def distributions(view: JudgeRunView, run_id: int) -> list[Chart]:
    """The score distributions of the metrics section, each series with its unscored items
    (from the section's per-item scores: an item x rubric with no score)."""
    missing: Counter[str] = Counter(
        f"{s['stage']} {s['rubric']}"
        for s in view.metrics.payload["item_scores"]
        if s["score"] is None
    )
    csv = api_url(f"/judge-runs/{run_id}/report.csv", {"table": "item_scores.csv"})
    return [
        distribution_chart(f, missing, csv) for f in view.metrics.figures if isinstance(f, BoxPlot)
    ]


@dataclass(frozen=True)
class Unscored:
    """One judgment without a score: where, why, and the judge's reply as it came."""

    item_key: str
    stage: str
    factor: str
    rubric: str
    sample: int
    kind: str | None
    reason: str | None
    raw: str | None
    repair: str | None


def unscored(items: Sequence[BrowsedItem]) -> list[Unscored]:
    return [
        Unscored(
            item.key,
            item.stage,
            item.factor,
            j.rubric,
            j.sample_index,
            j.unscored_kind,
            j.reason,
            j.raw_output,
            j.repair_output,
        )
        for item in items
        for j in item.judgments
        if j.score is None
    ]


@dataclass(frozen=True)
class Browser:
    """One page of the judged items, filtered."""

    items: list[BrowsedItem]
    matching: int
    total: int
    page: int
    pages: int
    filters: dict[str, str]
    flags: list[str]
    stages: list[str]
    factors: list[str]


def browse(items: Sequence[BrowsedItem], args: Mapping[str, str]) -> Browser:
    """The items matching ``args`` (flag, stage, factor, key: a part of the item's key), page
    ``args['page']`` of them."""
    filters = {k: args.get(k, "").strip() for k in ("flag", "stage", "factor", "key")}
    chosen = [
        item
        for item in items
        if (not filters["flag"] or filters["flag"] in item.flag_kinds)
        and (not filters["stage"] or item.stage == filters["stage"])
        and (not filters["factor"] or item.factor == filters["factor"])
        and (not filters["key"] or filters["key"].lower() in item.key.lower())
    ]
    pages = max(1, -(-len(chosen) // PER_PAGE))
    try:
        page = min(pages, max(1, int(args.get("page", "1"))))
    except ValueError:
        page = 1
    return Browser(
        chosen[(page - 1) * PER_PAGE : page * PER_PAGE],
        len(chosen),
        len(items),
        page,
        pages,
        {k: v for k, v in filters.items() if v},
        list(FLAG_KINDS),
        sorted({i.stage for i in items}),
        sorted({i.factor for i in items}),
    )


@dataclass(frozen=True)
class JudgeRunPage:
    run_id: int
    view: JudgeRunView
    computed: Computed[JudgeRunView]
    answer: Answer
    grid: Chart
    distributions: list[Chart]
    unscored: list[Unscored]
    unscored_kinds: dict[str, int]
    browser: Browser
    links: dict[str, str]


def judge_run_page(
    run_id: int, computed: Computed[JudgeRunView], args: Mapping[str, str]
) -> JudgeRunPage:
    view = computed.value
    missing = unscored(view.browser.items)
    links = {
        "report (HTML)": api_url(f"/judge-runs/{run_id}/report.html"),
        "report (JSON)": api_url(f"/judge-runs/{run_id}/report.json"),
        "metrics (JSON)": api_url(f"/judge-runs/{run_id}/metrics"),
        "unscored judgments (JSON)": api_url(
            "/judgments", {"judge_run": run_id, "status": "unscored"}
        ),
    }
    return JudgeRunPage(
        run_id,
        view,
        computed,
        answer(view),
        metric_grid(view.metrics.payload, run_id),
        distributions(view, run_id),
        missing,
        dict(view.metrics.payload["unscored"]),
        browse(view.browser.items, args),
        links,
    )
