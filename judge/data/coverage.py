"""How well a dataset covers FairMonitor's grid: items per stage x factor x scenario, by
review status.

The grid is every stage (``judge.vocab.STAGES``) x every factor of the taxonomy x each
scenario the taxonomy maps to that factor (``datasets/factors_scenarios.toml``). Items of a
FairMonitor stage whose factor-scenario pair the taxonomy does not list are counted as
*outside the table*, and free-form items (stage ``free``) on their own: neither is dropped.

An item's status is its ``review_status``: ``draft`` (generated, not yet reviewed),
``accepted``, ``edited`` or ``rejected`` (an expert's decision), or ``unreviewed`` for the
None of a hand-written or imported item that never went through a review. Evaluation runs use
accepted, edited and unreviewed items by default (drafts only when asked for, rejected items
never), so those are the *usable* ones; a cell with items but none usable is as much a gap as
an empty one.

The counts come from one grouped query, so a dataset of any size is read in one round trip
and no item row is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlmodel import Session, col, func

from judge.data.items import DRAFT, UNREVIEWED, status_name
from judge.data.taxonomy import Taxonomy, load_taxonomy
from judge.store.queries import get_dataset
from judge.store.tables import Item
from judge.vocab import FREE_STAGE, STAGES

STATUSES = ("accepted", "edited", DRAFT, "rejected", UNREVIEWED)
"""Review statuses in the order every table and JSON list shows them (``unreviewed`` stands
for the None of an item that was never reviewed)."""

USABLE = ("accepted", "edited", UNREVIEWED)
"""Statuses whose items generation runs ask by default (``judge.answers.collect``: drafts only with
``--include-drafts``, rejected items never)."""

Cell = tuple[str, str, str]
"""(stage, factor, scenario)."""


@dataclass(frozen=True)
class Coverage:
    """Item counts of one dataset over FairMonitor's grid.

    ``cells`` holds every grid cell, empty ones included, in grid order (stage, then factor in
    taxonomy order, then the factor's scenarios); each maps every status of ``statuses`` to a
    count (0 included). ``statuses`` is ``STATUSES``, followed by any other ``review_status``
    value found in the store (sorted; never usable), so that no item goes uncounted.
    ``outside`` holds the FairMonitor-stage items whose pair the taxonomy does not list
    (sorted by cell), ``free`` the free-form items' counts by status.
    """

    dataset: str
    statuses: tuple[str, ...]
    cells: dict[Cell, dict[str, int]]
    outside: dict[Cell, dict[str, int]]
    free: dict[str, int]

    @property
    def empty_cells(self) -> list[Cell]:
        """Grid cells without a single item."""
        return [cell for cell, counts in self.cells.items() if not sum(counts.values())]

    @property
    def unusable_cells(self) -> list[Cell]:
        """Grid cells with no usable item: the empty ones and those holding only drafts,
        rejected items or items of an unknown status."""
        return [cell for cell, counts in self.cells.items() if not usable(counts)]

    @property
    def stage_totals(self) -> dict[str, dict[str, int]]:
        """stage -> counts by status over its grid cells (outside and free items not included)."""
        return self._totals(0, STAGES)

    @property
    def factor_totals(self) -> dict[str, dict[str, int]]:
        """factor -> counts by status over its grid cells, factors in taxonomy order."""
        return self._totals(1, tuple(dict.fromkeys(f for _, f, _ in self.cells)))

    def _totals(self, axis: int, keys: tuple[str, ...]) -> dict[str, dict[str, int]]:
        out = {key: dict.fromkeys(self.statuses, 0) for key in keys}
        for cell, counts in self.cells.items():
            total = out[cell[axis]]
            for status, n in counts.items():
                total[status] += n
        return out

    @property
    def items(self) -> int:
        """Every item of the dataset: grid, outside the table and free-form."""
        return sum(sum(c.values()) for c in (*self.cells.values(), *self.outside.values())) + sum(
            self.free.values()
        )

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types: cells as objects with their counts, total and usable count."""

        def cell_json(cell: Cell, counts: dict[str, int]) -> dict[str, Any]:
            stage, factor, scenario = cell
            return {
                "stage": stage,
                "factor": factor,
                "scenario": scenario,
                "counts": dict(counts),
                "total": sum(counts.values()),
                "usable": usable(counts),
            }

        def names(cells: list[Cell]) -> list[dict[str, str]]:
            return [{"stage": s, "factor": f, "scenario": c} for s, f, c in cells]

        return {
            "dataset": self.dataset,
            "statuses": list(self.statuses),
            "usable_statuses": list(USABLE),
            "items": self.items,
            "grid_cells": len(self.cells),
            "cells": [cell_json(cell, counts) for cell, counts in self.cells.items()],
            "empty_cells": names(self.empty_cells),
            "unusable_cells": names(self.unusable_cells),
            "stage_totals": self.stage_totals,
            "factor_totals": self.factor_totals,
            "outside": [cell_json(cell, counts) for cell, counts in self.outside.items()],
            "free": {**self.free, "total": sum(self.free.values()), "usable": usable(self.free)},
        }


def usable(counts: dict[str, int]) -> int:
    """How many of these counts are of usable statuses (accepted, edited, unreviewed)."""
    return sum(counts.get(status, 0) for status in USABLE)


def grid(taxonomy: Taxonomy) -> list[Cell]:
    """Every cell of FairMonitor's grid for this taxonomy, in report order."""
    return [
        (stage, factor.id, scenario)
        for stage in STAGES
        for factor in taxonomy.factors
        for scenario in factor.scenarios
    ]


def coverage(session: Session, dataset_name: str, *, taxonomy: Taxonomy | None = None) -> Coverage:
    """Count ``dataset_name``'s items per grid cell and review status (one grouped query).

    ``taxonomy`` defaults to the bundled factor/scenario table. A dataset that does not exist
    raises NotFoundError naming the known datasets and how to import one.
    """
    taxonomy = taxonomy if taxonomy is not None else load_taxonomy()
    dataset = get_dataset(session, dataset_name)
    keys = (col(Item.stage), col(Item.factor), col(Item.scenario), col(Item.review_status))
    rows = session.execute(
        select(*keys, func.count()).where(col(Item.dataset_id) == dataset.id).group_by(*keys)
    ).all()
    found = {status_name(status) for *_, status, _ in rows}
    statuses = STATUSES + tuple(sorted(found - set(STATUSES)))
    cells = {cell: dict.fromkeys(statuses, 0) for cell in grid(taxonomy)}
    outside: dict[Cell, dict[str, int]] = {}
    free = dict.fromkeys(statuses, 0)
    for stage, factor, scenario, raw_status, n in rows:
        status = status_name(raw_status)
        cell = (stage, factor, scenario)
        if stage == FREE_STAGE:
            free[status] += n
        elif cell in cells:
            cells[cell][status] += n
        else:  # a pair the table does not list, or a stage FairMonitor does not have
            outside.setdefault(cell, dict.fromkeys(statuses, 0))[status] += n
    return Coverage(
        dataset=dataset.name,
        statuses=statuses,
        cells=cells,
        outside=dict(sorted(outside.items())),
        free=free,
    )
