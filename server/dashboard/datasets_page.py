"""A dataset's coverage of FairMonitor's grid: usable items per factor x stage, then every
stage x factor x scenario cell, as heatmaps with the gaps hatched; the counts by review
status in each cell's hover and in the tables. No Flask here.

The counts are the coverage report's (``coverage_report``, what ``fairjudge dataset
coverage`` prints and ``GET /api/v1/datasets/NAME/coverage.json`` returns).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from server.dashboard.charts import Cell, Chart, heatmap
from server.dashboard.web import api_url

if TYPE_CHECKING:
    from server.usecases.reports import Report, Section


def _statuses(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "no item"


def factor_stage(payload: dict[str, Any], name: str) -> Chart:
    """Usable items per factor and stage (the factor's scenarios summed): empty and
    unusable cells hatched, how many scenarios lack items written in each cell."""
    stages = list(payload["stage_totals"])
    factors = list(payload["factor_totals"])
    sums: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    lacking: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for cell in payload["cells"]:
        key = (cell["factor"], cell["stage"])
        for status, n in cell["counts"].items():
            sums[key][status] += n
        sums[key]["__usable"] += cell["usable"]
        lacking[key][0] += not cell["usable"]
        lacking[key][1] += 1
    cells, rows = {}, []
    most = max((s["__usable"] for s in sums.values()), default=0) or 1
    for (factor, stage), counts in sums.items():
        usable = counts.pop("__usable")
        total = sum(counts.values())
        without, of = lacking[(factor, stage)]
        detail = f"{without} of {of} scenarios without" if without else "every scenario"
        hover = f"{factor}, {stage}: {usable} usable ({_statuses(counts)}); {detail}"
        if not total:
            cells[(factor, stage)] = Cell(None, "empty", detail, hover)
        elif not usable:
            cells[(factor, stage)] = Cell(None, "none usable", f"{total} items", hover)
        else:
            cells[(factor, stage)] = Cell(usable, str(usable), detail, hover)
        rows.append(
            [
                factor,
                stage,
                str(usable),
                str(total),
                *(str(n) for n in counts.values()),
                f"{without} of {of}",
            ]
        )
    statuses = payload["statuses"]
    return Chart(
        f"Usable items per factor and stage: {name}",
        heatmap(
            f"Usable items per factor and stage: {name}",
            factors,
            stages,
            cells,
            domain=(0, most),
            legend="usable items",
            cell_width=150,
        ),
        ["factor", "stage", "usable", "all", *statuses, "scenarios without a usable item"],
        rows,
        api_url(f"/datasets/{name}/coverage.csv"),
    )


def grid(payload: dict[str, Any], name: str) -> Chart:
    """Every cell of the grid: a row per factor and scenario, a column per stage."""
    stages = list(payload["stage_totals"])
    rows = list(dict.fromkeys(f"{c['factor']} / {c['scenario']}" for c in payload["cells"]))
    most = max((c["usable"] for c in payload["cells"]), default=0) or 1
    cells, table = {}, []
    for c in payload["cells"]:
        row = f"{c['factor']} / {c['scenario']}"
        hover = f"{row}, {c['stage']}: {c['usable']} usable ({_statuses(c['counts'])})"
        if not c["total"]:
            cells[(row, c["stage"])] = Cell(None, "empty", hover=hover)
        elif not c["usable"]:
            cells[(row, c["stage"])] = Cell(None, f"none usable ({c['total']})", hover=hover)
        else:
            cells[(row, c["stage"])] = Cell(c["usable"], str(c["usable"]), hover=hover)
        table.append(
            [
                c["stage"],
                c["factor"],
                c["scenario"],
                str(c["usable"]),
                str(c["total"]),
                *(str(c["counts"].get(s, 0)) for s in payload["statuses"]),
            ]
        )
    return Chart(
        f"Every stage x factor x scenario cell: {name}",
        heatmap(
            f"Every stage x factor x scenario cell: {name}",
            rows,
            stages,
            cells,
            domain=(0, most),
            legend="usable items",
            cell_width=110,
            cell_height=22,
        ),
        ["stage", "factor", "scenario", "usable", "all", *payload["statuses"]],
        table,
        api_url(f"/datasets/{name}/coverage.csv"),
    )


@dataclass(frozen=True)
class CoveragePage:
    name: str
    report: Report
    section: Section
    payload: dict[str, Any]
    summary: Chart
    grid: Chart
    links: dict[str, str]


def coverage_page(name: str, report: Report) -> CoveragePage:
    section = report.sections[0]
    payload = section.payload
    links = {
        "coverage (JSON)": api_url(f"/datasets/{name}/coverage.json"),
        "coverage (CSV)": api_url(f"/datasets/{name}/coverage.csv"),
        "items (JSON)": api_url(f"/datasets/{name}/items"),
    }
    return CoveragePage(
        name, report, section, payload, factor_stage(payload, name), grid(payload, name), links
    )
