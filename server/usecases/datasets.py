"""Datasets: importing item files and JSON, and test items written by a model (plan, dry run)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.usecases.context import Progress, make_client

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.authoring.cells import GenerationSummary
    from judge.authoring.cells import Options as GenerationOptions
    from judge.authoring.replies import Cell
    from judge.config import Settings
    from judge.data.datasets import ImportSummary
    from judge.data.taxonomy import Taxonomy


def import_dataset(
    engine: Engine, path: str | Path, name: str | None = None, *, allow_unmapped: bool = False
) -> ImportSummary:
    """Import an item file; pairs of factor and scenario outside the paper's table are
    warnings in the summary unless ``allow_unmapped``."""
    from judge.data.datasets import import_items
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return import_items(session, path, name or Path(path).stem, allow_unmapped=allow_unmapped)


GENERATED_DATASET = "generated"


def item_catalogue(catalogue_file: str | Path | None = None) -> Taxonomy:
    """The factors and scenarios items may be generated for: the bundled catalogue, extended
    with a user's own file when given (``judge.data.taxonomy.extend_taxonomy``)."""
    from judge.data.taxonomy import extend_taxonomy, load_taxonomy

    return extend_taxonomy(catalogue_file) if catalogue_file else load_taxonomy()


def _generation_options(
    items_per_call: int | None, temperature: float | None, max_tokens: int | None
) -> GenerationOptions:
    from judge.authoring.cells import (
        DEFAULT_ITEMS_PER_CALL,
        DEFAULT_TEMPERATURE,
        Options,
    )

    return Options(
        items_per_call=DEFAULT_ITEMS_PER_CALL if items_per_call is None else items_per_call,
        temperature=DEFAULT_TEMPERATURE if temperature is None else temperature,
        max_tokens=max_tokens,
    )


def generate_items(
    engine: Engine,
    settings: Settings,
    *,
    endpoint: str,
    stage: str,
    factor: str,
    scenario: str,
    count: int,
    into: str = GENERATED_DATASET,
    catalogue_file: str | Path | None = None,
    items_per_call: int | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    progress: Progress | None = None,
) -> GenerationSummary:
    """``count`` new test items of one cell written by ``endpoint``, stored as drafts in
    dataset ``into``. Names, options and the endpoint are checked before any call."""
    from judge.authoring import cells as authoring
    from judge.prompts import PromptBook

    catalogue = item_catalogue(catalogue_file)
    cell = authoring.check_cell(catalogue, stage, factor, scenario)
    options = _generation_options(items_per_call, temperature, max_tokens)
    return authoring.generate_items(
        engine, make_client(settings, endpoint), PromptBook(settings.prompts_path()), catalogue,
        into, cell, count, options=options, progress=progress,
    )  # fmt: skip


def plan_items(
    engine: Engine,
    settings: Settings,
    *,
    endpoint: str,
    per_cell: int,
    stages: Sequence[str] = (),
    factors: Sequence[str] = (),
    scenarios: Sequence[str] = (),
    into: str = GENERATED_DATASET,
    catalogue_file: str | Path | None = None,
    items_per_call: int | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    progress: Progress | None = None,
) -> GenerationSummary:
    """Fill stages x factors x each factor's scenarios (all, or those named) of dataset
    ``into`` up to ``per_cell`` items each with items ``endpoint`` writes; resumable: a
    rerun asks only for what is still missing."""
    from judge.authoring import cells as authoring
    from judge.prompts import PromptBook

    catalogue, cells = _plan_grid(catalogue_file, stages, factors, scenarios)
    options = _generation_options(items_per_call, temperature, max_tokens)
    return authoring.plan_items(
        engine, make_client(settings, endpoint), PromptBook(settings.prompts_path()), catalogue,
        into, cells, per_cell, options=options, progress=progress,
    )  # fmt: skip


def _plan_grid(
    catalogue_file: str | Path | None,
    stages: Sequence[str],
    factors: Sequence[str],
    scenarios: Sequence[str],
) -> tuple[Taxonomy, list[Cell]]:
    """The catalogue (bundled, or extended by ``catalogue_file``) and the cells a plan
    covers; unknown names are refused here, before any call."""
    from judge.authoring.cells import grid_cells

    catalogue = item_catalogue(catalogue_file)
    cells = grid_cells(catalogue, stages=stages, factors=factors, scenarios=scenarios)
    return catalogue, cells


def plan_items_dry_run(
    engine: Engine,
    settings: Settings,
    *,
    endpoint: str,
    per_cell: int,
    stages: Sequence[str] = (),
    factors: Sequence[str] = (),
    scenarios: Sequence[str] = (),
    into: str = GENERATED_DATASET,
    catalogue_file: str | Path | None = None,
    items_per_call: int | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """What ``plan_items`` would ask for and cost at ``endpoint``'s prices, with nothing
    sent or stored."""
    from judge.authoring import cells as authoring
    from judge.costs import Prices
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook

    catalogue, cells = _plan_grid(catalogue_file, stages, factors, scenarios)
    config = settings.endpoint(endpoint)
    return authoring.plan_dry_run(
        engine, ModelClient(endpoint, config), PromptBook(settings.prompts_path()), catalogue,
        into, cells, per_cell, options=_generation_options(items_per_call, temperature, max_tokens),
        prices=Prices.of(config),
    )  # fmt: skip


def import_items_json(
    engine: Engine, name: str, items: Sequence[dict[str, Any]], *, allow_unmapped: bool = False
) -> ImportSummary:
    """Items sent as JSON objects, imported exactly like the lines of a dataset file (the same
    checks, all or nothing)."""
    import tempfile

    from judge.data.datasets import import_items
    from judge.store.engine import session_scope

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for item in items:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
        with session_scope(engine) as session:
            return import_items(session, path, name, allow_unmapped=allow_unmapped)
