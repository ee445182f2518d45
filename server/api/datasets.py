"""``/api/v1/datasets``: datasets and their items."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import current_app

from server import usecases
from server.api import blueprint, dump, page
from server.db import get_session
from server.schemas import (
    DatasetCreate,
    DatasetDescriptionOut,
    DatasetOut,
    ImportOut,
    ItemOut,
    ItemPath,
    ItemQuery,
    ListOf,
    NamePath,
    Page,
)
from server.usecases import browse, datasets

bp = blueprint("datasets", __name__, "datasets")


def _engine():  # type: ignore[no-untyped-def]
    return current_app.extensions["fairjudge_engine"]


@bp.get("/datasets", responses={200: ListOf[DatasetOut]})
def list_datasets() -> Any:
    """Every dataset with its item count."""
    return [asdict(d) for d in datasets.list_datasets(_engine())]


@bp.post("/datasets", responses={201: ImportOut})
def create_dataset(body: DatasetCreate) -> Any:
    """Create a dataset from items, or add items to it: all or nothing, no duplicates."""
    summary = usecases.import_items_json(
        _engine(), body.name, body.items, allow_unmapped=body.allow_unmapped
    )
    return asdict(summary), 201


@bp.get("/datasets/<name>", responses={200: DatasetDescriptionOut})
def describe_dataset(path: NamePath) -> Any:
    """Items per stage and factor, and the empty cells of FairMonitor's grid."""
    return asdict(datasets.describe_dataset(_engine(), path.name))


@bp.get("/datasets/<name>/items", responses={200: Page[ItemOut]})
def list_items(path: NamePath, query: ItemQuery) -> Any:
    """One page of the dataset's items, optionally of one stage or factor."""
    rows, total = browse.list_items(
        get_session(),
        path.name,
        stage=query.stage,
        factor=query.factor,
        limit=query.limit,
        offset=query.offset,
    )
    return page(ItemOut, rows, total, query.limit, query.offset)


@bp.get("/datasets/<name>/items/<anything:key>", responses={200: ItemOut}, merge_slashes=False)
def get_item(path: ItemPath) -> Any:
    """One item by its key, whatever characters it holds.

    Write the key percent-encoded (``/`` as ``%2F``, ``%`` as ``%25``, ``?`` as ``%3F``,
    ``#`` as ``%23``); a ``/`` left as it is works too."""
    return dump(ItemOut, browse.get_item(get_session(), path.name, path.key))
