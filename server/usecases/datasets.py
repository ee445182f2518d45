"""Datasets: importing item files and JSON, and test items written by a model (plan, dry run)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.progress import Progress
from server.usecases.context import make_client
from server.usecases.requests import ItemCellRequest, ItemOptions, ItemPlanRequest

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
    from judge.data.datasets import DatasetDescription, DatasetInfo, ImportSummary
    from judge.data.responses import ResponsesImport
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


def list_datasets(engine: Engine) -> list[DatasetInfo]:
    """Every dataset with its item count."""
    from judge.data.datasets import list_datasets as listing
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return listing(session)


def describe_dataset(engine: Engine, name: str) -> DatasetDescription:
    """Dataset NAME's counts per stage and factor, and its empty factor x stage cells."""
    from judge.data.datasets import describe_dataset as describe
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return describe(session, name)


def export_dataset(
    engine: Engine, name: str, out: str | Path, *, statuses: Sequence[str] | None = None
) -> int:
    """Write dataset NAME to ``out`` in the import format (only items of ``statuses`` when
    given); how many items were written."""
    from judge.data.datasets import export_items
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return export_items(session, name, out, statuses=statuses)


def import_responses(
    engine: Engine, settings: Settings, path: str | Path, dataset: str, *, model: str | None = None
) -> ResponsesImport:
    """Answers produced elsewhere (a .jsonl or .csv file) into the imported generation run of
    ``dataset`` and the model label; a file with any bad row is refused whole."""
    from judge.data.responses import import_response_file
    from judge.prompts import PromptBook

    book = PromptBook(settings.prompts_path())
    return import_response_file(engine, path, dataset, model=model, book=book)


def item_taxonomy(taxonomy_file: str | Path | None = None) -> Taxonomy:
    """The factors and scenarios items may be generated for: the bundled taxonomy, extended
    with a user's own file when given (``judge.data.taxonomy.extend_taxonomy``)."""
    from judge.data.taxonomy import extend_taxonomy, load_taxonomy

    return extend_taxonomy(taxonomy_file) if taxonomy_file else load_taxonomy()


def _generation_options(request: ItemOptions) -> GenerationOptions:
    from judge.authoring.cells import (
        DEFAULT_ITEMS_PER_CALL,
        DEFAULT_TEMPERATURE,
        Options,
    )

    return Options(
        items_per_call=(
            DEFAULT_ITEMS_PER_CALL if request.items_per_call is None else request.items_per_call
        ),
        temperature=DEFAULT_TEMPERATURE if request.temperature is None else request.temperature,
        max_tokens=request.max_tokens,
    )


def generate_items(
    engine: Engine,
    settings: Settings,
    request: ItemCellRequest | None = None,
    *,
    progress: Progress | None = None,
    **fields: Any,
) -> GenerationSummary:
    """``count`` new test items of one cell written by ``endpoint``, stored as drafts in
    dataset ``into`` (``request``, or its fields as keywords). Names, options and the
    endpoint are checked before any call."""
    from judge.authoring import cells as authoring
    from judge.prompts import PromptBook

    request = request or ItemCellRequest.build(**fields)
    taxonomy = item_taxonomy(request.taxonomy_file)
    cell = authoring.check_cell(taxonomy, request.stage, request.factor, request.scenario)
    options = _generation_options(request)
    return authoring.generate_items(
        engine, make_client(settings, request.endpoint), PromptBook(settings.prompts_path()),
        taxonomy, request.into, cell, request.count, options=options, progress=progress,
    )  # fmt: skip


def plan_items(
    engine: Engine,
    settings: Settings,
    request: ItemPlanRequest | None = None,
    *,
    progress: Progress | None = None,
    **fields: Any,
) -> GenerationSummary:
    """Fill stages x factors x each factor's scenarios (all, or those named) of dataset
    ``into`` up to ``per_cell`` items each with items ``endpoint`` writes (``request``, or
    its fields as keywords); resumable: a rerun asks only for what is still missing."""
    from judge.authoring import cells as authoring
    from judge.prompts import PromptBook

    request = request or ItemPlanRequest.build(**fields)
    taxonomy, cells = _plan_grid(request)
    options = _generation_options(request)
    return authoring.plan_items(
        engine, make_client(settings, request.endpoint), PromptBook(settings.prompts_path()),
        taxonomy, request.into, cells, request.per_cell, options=options, progress=progress,
    )  # fmt: skip


def _plan_grid(request: ItemPlanRequest) -> tuple[Taxonomy, list[Cell]]:
    """The taxonomy (bundled, or extended by the request's file) and the cells a plan
    covers; unknown names are refused here, before any call."""
    from judge.authoring.cells import grid_cells

    taxonomy = item_taxonomy(request.taxonomy_file)
    cells = grid_cells(
        taxonomy, stages=request.stages, factors=request.factors, scenarios=request.scenarios
    )
    return taxonomy, cells


def check_item_request(request: ItemCellRequest | ItemPlanRequest) -> None:
    """Refuse now what an item job would fail on later: names the taxonomy lacks, and
    options out of range (each message names the option)."""
    from judge.authoring.cells import check_cell

    if isinstance(request, ItemPlanRequest):
        _plan_grid(request)
    else:
        check_cell(
            item_taxonomy(request.taxonomy_file), request.stage, request.factor, request.scenario
        )
    _generation_options(request)


def plan_items_dry_run(
    engine: Engine, settings: Settings, request: ItemPlanRequest | None = None, **fields: Any
) -> dict[str, Any]:
    """What ``plan_items`` would ask for and cost at ``endpoint``'s prices, with nothing
    sent or stored."""
    request = request or ItemPlanRequest.build(**fields)
    taxonomy, cells = _plan_grid(request)
    return _items_dry_run(engine, settings, request, taxonomy, cells, request.per_cell)


def item_cell_dry_run(
    engine: Engine, settings: Settings, request: ItemCellRequest
) -> dict[str, Any]:
    """What ``generate_items`` would ask for and cost at ``endpoint``'s prices (``count``
    new items of one cell, whatever it holds), with nothing sent or stored."""
    from judge.authoring.cells import check_cell

    taxonomy = item_taxonomy(request.taxonomy_file)
    cell = check_cell(taxonomy, request.stage, request.factor, request.scenario)
    return _items_dry_run(
        engine, settings, request, taxonomy, [cell], request.count, {cell: request.count}
    )


def _items_dry_run(
    engine: Engine,
    settings: Settings,
    request: ItemCellRequest | ItemPlanRequest,
    taxonomy: Taxonomy,
    cells: list[Cell],
    per_cell: int,
    counts: dict[Cell, int] | None = None,
) -> dict[str, Any]:
    from judge.authoring import cells as authoring
    from judge.costs import Prices
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook

    config = settings.endpoint(request.endpoint)
    return authoring.plan_dry_run(
        engine, ModelClient(request.endpoint, config), PromptBook(settings.prompts_path()),
        taxonomy, request.into, cells, per_cell, options=_generation_options(request),
        prices=Prices.of(config), counts=counts,
    )  # fmt: skip


def import_items_json(
    engine: Engine, name: str, items: Sequence[dict[str, Any]], *, allow_unmapped: bool = False
) -> ImportSummary:
    """Items sent as JSON objects, imported exactly like the lines of a dataset file (the same
    checks, all or nothing)."""

    from judge.data.datasets import import_items
    from judge.store.engine import session_scope

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for item in items:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
        with session_scope(engine) as session:
            return import_items(session, path, name, allow_unmapped=allow_unmapped)
