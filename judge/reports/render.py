"""Writing a ``Report``: report.json, one CSV per table of rows a section declares, and a
self-contained HTML page with every table and figure. The only module that imports
matplotlib (figures are drawn here from their typed description).
"""

from __future__ import annotations

import base64
import csv
import io
import json
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from judge.reports.sections import (
    AgreementPlot,
    BarChart,
    BoxPlot,
    Figure,
    ItemBrowser,
    Report,
)

TEMPLATES = Path(__file__).parent / "templates"
# Keys of ``write_report``'s result that predate the generic naming (CSV name -> key).
_PATH_KEYS = {"item_scores.csv": "items_csv"}


def figure_png(figure: Figure, *, seed: int = 0) -> bytes:
    """The figure drawn as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if isinstance(figure, BoxPlot):
        # Wide enough for its boxes: a panel of 2 boxes sits beside another in the HTML.
        width = min(12.0, max(4.5, 1.1 * len(figure.series) + 1.5))
        fig, ax = plt.subplots(figsize=(width, 3.6), dpi=100)
        ax.boxplot([values or [float("nan")] for _, values in figure.series], showmeans=True)
        ax.set_xticks(range(1, len(figure.series) + 1), [label for label, _ in figure.series])
        ax.set_ylim(*figure.ylim)
        ax.set_ylabel(figure.ylabel)
        ax.set_title(figure.title)
    elif isinstance(figure, BarChart):
        fig = _bar_chart(plt, figure)
    else:
        fig = _agreement_plot(plt, figure, seed)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _bar_chart(plt: Any, figure: BarChart) -> Any:
    width = min(12.0, max(4.5, 0.9 * len(figure.bars) + 1.5))
    fig, ax = plt.subplots(figsize=(width, 3.6), dpi=100)
    labels = [label for label, *_ in figure.bars]
    values = [value for _, value, _, _ in figure.bars]
    # An interval as error bars below and above the bar; a missing bound draws none.
    below = [v - lo if lo is not None else 0.0 for _, v, lo, _ in figure.bars]
    above = [hi - v if hi is not None else 0.0 for _, v, _, hi in figure.bars]
    ax.bar(range(len(values)), values, yerr=[below, above], capsize=4, color="#6a8fb3")
    for x, n in enumerate(figure.ns[: len(values)]):
        ax.annotate(f"n={n}", (x, 0), xytext=(0, 2), textcoords="offset points", ha="center",
                    va="bottom", fontsize=7)  # fmt: skip
    ax.set_xticks(range(len(values)), labels, rotation=30 if len(values) > 6 else 0)
    if figure.reference is not None:
        ax.axhline(figure.reference, color="grey", lw=1, ls="--")
    ax.set_ylabel(figure.ylabel)
    ax.set_title(figure.title)
    return fig


def _agreement_plot(plt: Any, figure: AgreementPlot, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8), dpi=100)
    jx = np.asarray(figure.judge) + rng.uniform(-0.15, 0.15, len(figure.judge))
    hy = np.asarray(figure.human) + rng.uniform(-0.15, 0.15, len(figure.human))
    left.scatter(hy, jx, s=12, alpha=0.5)
    left.plot([1, 5], [1, 5], color="grey", lw=1, ls="--")
    left.set_xlabel("human score (mean of raters)")
    left.set_ylabel("judge score")
    left.set_xlim(0.5, 5.5)
    left.set_ylim(0.5, 5.5)
    left.set_title("judge vs human (jittered)")
    grid = np.asarray(figure.confusion) if figure.confusion else np.zeros((5, 5))
    right.imshow(grid, cmap="Blues", origin="lower", extent=(0.5, 5.5, 0.5, 5.5))
    for (row, column), count in np.ndenumerate(grid):
        right.text(column + 1, row + 1, str(int(count)), ha="center", va="center", fontsize=8)
    right.set_xlabel("human category")
    right.set_ylabel("judge category")
    right.set_title("confusion (counts)")
    fig.suptitle(figure.title)
    return fig


def write_figures(figures: list[Figure], out_dir: str | Path, stem: str) -> list[Path]:
    """Each figure as ``{stem}_{n}.png`` in ``out_dir``."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, figure in enumerate(figures, start=1):
        path = folder / f"{stem}_{n}.png"
        path.write_bytes(figure_png(figure))
        paths.append(path)
    return paths


def html(report: Report) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=jinja2.select_autoescape(["html"])
    )
    sections = [
        {
            "section": section,
            "figures": [
                {
                    "title": figure.title,
                    "png": base64.b64encode(figure_png(figure)).decode("ascii"),
                }
                for figure in section.figures
            ],
            "browser": section.browser,
            "options": _browser_options(section.browser) if section.browser else None,
        }
        for section in report.sections
    ]
    return env.get_template("report.html").render(report=report, sections=sections)


def _browser_options(browser: ItemBrowser) -> dict[str, list[str]]:
    """The values each filter of the item browser offers, from its items."""
    judgments = [j for item in browser.items for j in item.judgments]
    scores = sorted({str(j.score) for j in judgments if j.score is not None}, key=int)
    return {
        "stages": sorted({item.stage for item in browser.items}),
        "factors": sorted({item.factor for item in browser.items}),
        "rubrics": sorted({j.rubric for j in judgments}),
        "scores": scores + (["unscored"] if any(j.score is None for j in judgments) else []),
    }


def write_report(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, every CSV the sections declare and report.html into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json"}
    paths["json"].write_text(json.dumps(report.to_json(), indent=2, default=str), encoding="utf-8")
    for section in report.sections:
        for name, rows in section.csv.items():
            path = out / name
            _write_csv(path, rows)
            paths[_PATH_KEYS.get(name, name.removesuffix(".csv") + "_csv")] = path
    paths["html"] = out / "report.html"
    paths["html"].write_text(html(report), encoding="utf-8")
    return paths


def csv_table(report: Report, name: str | None = None) -> tuple[str, str]:
    """One CSV the report's sections declare, as (file name, text): ``name``, or the first.
    An unknown name is a NotFoundError listing the report's CSVs."""
    from judge.errors import NotFoundError

    tables = {n: rows for section in report.sections for n, rows in section.csv.items()}
    if not tables:
        raise NotFoundError("this report has no tables to give as CSV")
    chosen = name or next(iter(tables))
    if chosen not in tables:
        raise NotFoundError(f"the report has no table {chosen!r}; it has {', '.join(tables)}")
    buffer = io.StringIO()
    rows = tables[chosen]
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return chosen, buffer.getvalue()


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        if not rows:
            return
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
