"""The "Benchmark coverage" section: a dataset's items over FairMonitor's grid by review
status (``judge.data.coverage``), with the gaps marked so that a reader sees what is missing.

It lives here rather than beside the counts because ``judge.data`` sits below
``judge.reports`` in the import layers (pyproject.toml's import-linter contracts).
"""

from __future__ import annotations

from typing import Any

from judge.data.coverage import USABLE, Cell, Coverage, usable
from judge.reports.sections import Section, Table
from judge.vocab import STAGES

SECTION_TITLE = "Benchmark coverage"
EMPTY_MARK = "— empty"
"""Shown for a cell without a single item."""
NONE_USABLE_MARK = "— none usable"
"""Shown for a cell whose items are all drafts or rejected (or of an unknown status)."""


def coverage_section(cov: Coverage) -> Section:
    """Tables of ``cov``: usable items per factor x stage, every grid cell by status, and the
    items outside the table; the first note says how many cells are empty or unusable."""
    tables = [_factor_stage_table(cov), _cell_table(cov)]
    if cov.outside:
        tables.append(_outside_table(cov))
    return Section(
        SECTION_TITLE,
        "coverage",
        cov.to_json(),
        tables,
        notes=_notes(cov),
        csv={"coverage.csv": _csv_rows(cov)},
    )


def _plural(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _notes(cov: Coverage) -> list[str]:
    cells, empty, unusable = len(cov.cells), len(cov.empty_cells), len(cov.unusable_cells)
    pairs = cells // len(STAGES)
    verb = "is" if empty == 1 else "are"
    reading = (
        f"{empty:,} of the {_plural(cells, 'cell', 'cells')} of FairMonitor's grid "
        f"({len(STAGES)} stages × {pairs:,} factor-scenario pairs) {verb} empty, and "
        f"{_plural(unusable, 'cell has', 'cells have')} no usable item"
    )
    reading += (
        f" ({unusable - empty:,} of them hold only drafts or rejected items)."
        if unusable > empty
        else "."
    )
    notes = [
        f"Dataset {cov.dataset}: {_plural(cov.items, 'item', 'items')}. {reading}",
        f"Usable means {', '.join(USABLE)}: the items evaluation runs use by default "
        "(drafts only with --include-drafts, rejected items never). Unreviewed items were "
        "written or imported by hand and never went through a review.",
    ]
    if cov.outside:
        outside = sum(sum(c.values()) for c in cov.outside.values())
        notes.append(
            f"{_plural(outside, 'item', 'items')} in "
            f"{_plural(len(cov.outside), 'cell', 'cells')} outside FairMonitor's "
            "factor-scenario table are counted apart (last table), not in the grid."
        )
    if free := sum(cov.free.values()):
        by_status = ", ".join(f"{n:,} {s}" for s, n in cov.free.items() if n)
        notes.append(
            f"{_plural(free, 'free-form item', 'free-form items')} (stage free) are outside "
            f"FairMonitor's grid: {by_status}."
        )
    return notes


def _mark(counts: dict[str, int]) -> str:
    if not sum(counts.values()):
        return EMPTY_MARK
    return "" if usable(counts) else NONE_USABLE_MARK


def _factor_stage_table(cov: Coverage) -> Table:
    """Usable items per factor x stage (summed over the factor's scenarios)."""
    by_key: dict[tuple[str, str], list[dict[str, int]]] = {}
    for (stage, factor, _), counts in cov.cells.items():
        by_key.setdefault((factor, stage), []).append(counts)
    rows = []
    for factor in cov.factor_totals:
        line = [factor]
        for stage in STAGES:
            line.append(_summary_cell(by_key.get((factor, stage), [])))
        line.append(f"{usable(cov.factor_totals[factor]):,}")
        rows.append(line)
    everything = sum(usable(c) for c in cov.cells.values())
    rows.append(
        ["all factors", *(f"{usable(cov.stage_totals[s]):,}" for s in STAGES), f"{everything:,}"]
    )
    return Table(
        "Usable items per factor and stage",
        ["factor", *STAGES, "all stages"],
        rows,
        notes=[
            f"{EMPTY_MARK}: no item in any of the factor's scenarios; {NONE_USABLE_MARK}: "
            "items, but only drafts or rejected ones; '(k of m scenarios without)': k of the "
            "factor's m scenarios have no usable item at that stage.",
        ],
    )


def _summary_cell(scenario_counts: list[dict[str, int]]) -> str:
    total = sum(sum(c.values()) for c in scenario_counts)
    good = sum(usable(c) for c in scenario_counts)
    if not total:
        return EMPTY_MARK
    if not good:
        return f"{NONE_USABLE_MARK} ({_plural(total, 'item', 'items')})"
    lacking = sum(1 for c in scenario_counts if not usable(c))
    if lacking:
        return f"{good:,} ({lacking} of {len(scenario_counts)} scenarios without)"
    return f"{good:,}"


def _count_cells(counts: dict[str, int], statuses: tuple[str, ...]) -> list[str]:
    return [
        *(f"{counts[s]:,}" for s in statuses),
        f"{sum(counts.values()):,}",
        f"{usable(counts):,}",
    ]


def _cell_table(cov: Coverage) -> Table:
    rows = [
        [*cell, *_count_cells(counts, cov.statuses), _mark(counts)]
        for cell, counts in cov.cells.items()
    ]
    return Table(
        "Items per stage, factor and scenario by review status",
        ["stage", "factor", "scenario", *cov.statuses, "total", "usable", "gap"],
        rows,
        notes=[
            f"gap: {EMPTY_MARK} (no item at all) or {NONE_USABLE_MARK} (only drafts or "
            f"rejected items); {_plural(len(cov.empty_cells), 'cell', 'cells')} empty, "
            f"{len(cov.unusable_cells):,} without a usable item.",
        ],
        key_columns=3,
    )


def _outside_table(cov: Coverage) -> Table:
    rows = [[*cell, *_count_cells(counts, cov.statuses)] for cell, counts in cov.outside.items()]
    return Table(
        "Items outside FairMonitor's factor-scenario table",
        ["stage", "factor", "scenario", *cov.statuses, "total", "usable"],
        rows,
        notes=["Pairs the taxonomy (datasets/factors_scenarios.toml) does not list."],
        key_columns=3,
    )


def _csv_row(where: str, cell: Cell, counts: dict[str, int]) -> dict[str, Any]:
    stage, factor, scenario = cell
    return {
        "where": where,
        "stage": stage,
        "factor": factor,
        "scenario": scenario,
        **counts,
        "total": sum(counts.values()),
        "usable": usable(counts),
    }


def _csv_rows(cov: Coverage) -> list[dict[str, Any]]:
    """One row per grid cell ('grid'), per outside cell ('outside'), and one for the
    free-form items ('free'), each with its counts by status."""
    rows = [_csv_row("grid", cell, counts) for cell, counts in cov.cells.items()]
    rows += [_csv_row("outside", cell, counts) for cell, counts in cov.outside.items()]
    if sum(cov.free.values()):
        rows.append(_csv_row("free", ("free", "", ""), cov.free))
    return rows
