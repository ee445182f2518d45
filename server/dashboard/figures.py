"""Report figures (``judge.reports.sections``: bar charts with intervals, score box plots,
judge-vs-human plots) drawn as the dashboard's SVG charts, each with its numbers as a table.

The figures are what the report's sections already hold; this module only draws them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from server.dashboard.charts import Cell, Chart, Point, fmt, heatmap, histograms, intervals, scatter
from server.usecases.dashboard import AgreementPlot, BarChart, BoxPlot

if TYPE_CHECKING:
    from server.usecases.reports import Section


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def bar_chart(figure: BarChart, csv: str | None = None) -> Chart:
    """A ``BarChart`` (values with optional intervals and a reference line) as dots with
    whiskers: the same numbers, and a missing interval drawn as none."""
    title = figure.title
    ns = [f"n={n}" for n in figure.ns] if figure.ns else [""] * len(figure.bars)
    points = [
        Point(label, _finite(value), _finite(low), _finite(high), n)
        for (label, value, low, high), n in zip(figure.bars, ns, strict=False)
    ]
    svg = intervals(title, points, axis=figure.ylabel, reference=figure.reference)
    rows = [[p.label, fmt(p.value, 3), fmt(p.low, 3), fmt(p.high, 3)] for p in points]
    if figure.ns:
        rows = [[*r, str(n)] for r, n in zip(rows, figure.ns, strict=False)]
    columns = ["", "value", "CI low", "CI high", *(["n"] if figure.ns else [])]
    return Chart(title, svg, columns, rows, csv)


def levels_of(ylim: tuple[float, float]) -> list[int]:
    """The score levels a box plot's y range spans (it is padded by half a level)."""
    return list(range(math.ceil(ylim[0]), math.floor(ylim[1]) + 1))


def distribution_chart(
    figure: BoxPlot, unscored: Mapping[str, int] | None = None, csv: str | None = None
) -> Chart:
    """A ``BoxPlot`` of scores per stage and rubric as a histogram per series: the count at
    each level (a mean of several samples counts at its nearest level), with n and the
    unscored items of the series (``unscored``: series name -> count) written above it."""
    levels = levels_of(figure.ylim)
    panels = []
    rows = []
    rounded = False
    for label, values in figure.series:
        name = label.split("\n", 1)[0]
        counts = Counter(math.floor(v + 0.5) for v in values)
        rounded = rounded or any(v != math.floor(v) for v in values)
        missing = (unscored or {}).get(name)
        note = f"n={len(values)}" + (f", {missing} unscored" if missing else "")
        panels.append((name, counts, note))
        rows.append(
            [name, str(len(values)), "—" if missing is None else str(missing)]
            + [str(counts.get(level, 0)) for level in levels]
        )
    title = figure.title
    notes = (
        ["Scores that are means of several samples are counted at their nearest level."]
        if rounded
        else []
    )
    return Chart(
        title,
        histograms(title, panels, levels),
        ["series", "n scored", "unscored items", *(f"score {level}" for level in levels)],
        rows,
        csv,
        notes,
    )


SCATTER_MOST = 500
"""Dots a scatter draws at most: beyond it every k-th pair is drawn (the page says so), so that
a 10,000-item run's page stays light; the confusion matrix beside it counts every pair."""


def agreement_charts(
    figure: AgreementPlot, labels: Sequence[int | float] | None = None
) -> list[Chart]:
    """An ``AgreementPlot``: the judge's score against the people's (a scatter, jittered) and
    the confusion matrix of their levels as a heatmap (judge rows, people columns)."""
    title, judge, human, confusion = figure.title, figure.judge, figure.human, figure.confusion
    step = -(-len(judge) // SCATTER_MOST)
    drawn_j, drawn_h = list(judge)[::step], list(human)[::step]
    notes = []
    if step > 1:
        notes.append(
            f"{len(drawn_j):,} of {len(judge):,} pairs drawn (one in every {step}, in stored "
            "order); the confusion matrix beside it counts every pair."
        )
    names = [f"{v:g}" for v in labels] if labels else [str(k + 1) for k in range(len(confusion))]
    values = [*judge, *human, *(float(n) for n in names if _number(n))]
    domain = (min(values, default=1.0), max(values, default=5.0))
    dots = scatter(
        f"{title}: scores",
        drawn_j,
        drawn_h,
        domain=domain,
        x_label="judge",
        y_label="people (combined)",
    )
    pairs = [[fmt(j), fmt(h)] for j, h in zip(drawn_j, drawn_h, strict=True)]
    most = max((n for row in confusion for n in row), default=0) or 1
    cells = {
        (f"judge {names[i]}", f"people {names[j]}"): Cell(
            n, str(n), hover=f"judge {names[i]}, people {names[j]}: {n} items"
        )
        for i, row in enumerate(confusion)
        for j, n in enumerate(row)
    }
    grid = heatmap(
        f"{title}: confusion",
        [f"judge {n}" for n in names],
        [f"people {n}" for n in names],
        cells,
        domain=(0, most),
        legend="items",
        cell_width=62,
    )
    table = [[f"judge {names[i]}", *(str(n) for n in row)] for i, row in enumerate(confusion)]
    return [
        Chart(f"{title}: scores", dots, ["judge", "people (combined)"], pairs, notes=notes),
        Chart(f"{title}: confusion", grid, ["", *(f"people {n}" for n in names)], table),
    ]


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def section_charts(section: Section, csv: str | None = None) -> list[Chart]:
    """Every figure of a report section as charts (figures of other kinds are skipped)."""
    out: list[Chart] = []
    for figure in section.figures:
        if isinstance(figure, BarChart):
            out.append(bar_chart(figure, csv))
        elif isinstance(figure, BoxPlot):
            out.append(distribution_chart(figure, csv=csv))
        else:
            out += agreement_charts(figure)
    return out
