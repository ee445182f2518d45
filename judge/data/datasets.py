"""Datasets in the store: import item files, list, describe and export them.

Importing is all or nothing and idempotent: the same items again add nothing, and an id whose
content changed is refused. Factor-scenario pairs outside FairMonitor's mapping do not block an
import: they come back as warnings in the summary.

An item's review status, review and provenance travel with it: ``export_items`` writes them
(and can keep only some review statuses) and ``import_items`` stores them on the items it
adds, so an exported benchmark imported into a new dataset is the same benchmark. An item
already in the dataset keeps its own.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from sqlmodel import Session, col, func, select

from judge.data.items import ParsedItem, check_items, item_to_json, iter_items, status_filter
from judge.errors import DatasetError
from judge.store.queries import dataset_items
from judge.store.tables import Dataset, Item
from judge.vocab import FACTORS, STAGES


@dataclass(frozen=True)
class ImportSummary:
    dataset: str
    added: int
    unchanged: int
    total: int
    warnings: list[str] = field(default_factory=list)
    """``"line N: reason"`` for each item whose factor-scenario pair FairMonitor's table does
    not list (empty when ``allow_unmapped`` was passed)."""


IMPORT_BATCH = 1000
"""Items added to the session between flushes; the session is emptied after each flush so an
import's memory does not grow with the file."""


def import_items(
    session: Session, path: str | Path, dataset_name: str, *, allow_unmapped: bool = False
) -> ImportSummary:
    """Import a file into ``dataset_name`` (created if new); all or nothing, no duplicates.

    The file is read twice, one line at a time: once to validate it (keeping each item's id
    and hash), once to store it in batches. ``allow_unmapped`` silences the warnings about
    factor-scenario pairs outside the mapping.
    """
    index = check_items(path, allow_unmapped=allow_unmapped)
    dataset = session.exec(select(Dataset).where(Dataset.name == dataset_name)).first()
    if dataset is None:
        dataset = Dataset(name=dataset_name, description=f"imported from {Path(path).name}")
        session.add(dataset)
        session.flush()
    dataset_id = dataset.id
    assert dataset_id is not None
    existing = dict(
        session.exec(select(Item.key, Item.content_hash).where(Item.dataset_id == dataset_id)).all()
    )
    conflicts = [
        (
            number,
            f"id {key!r} is already in dataset {dataset_name!r} with different content; "
            "give the changed item a new id or import into a new dataset",
        )
        for key, (number, digest) in index.lines.items()
        if key in existing and existing[key] != digest
    ]
    if conflicts:
        raise DatasetError(f"{path} was not imported:", conflicts)
    added = 0
    for item in iter_items(path, index):
        if item.key in existing:
            continue
        session.add(_new_item(dataset_id, item))
        added += 1
        if added % IMPORT_BATCH == 0:
            session.flush()
            session.expunge_all()
    session.flush()
    session.expunge_all()
    warnings = [f"line {number}: {why}" for number, why in index.warnings]
    return ImportSummary(dataset_name, added, index.count - added, len(existing) + added, warnings)


def _new_item(dataset_id: int, item: ParsedItem) -> Item:
    return Item(
        dataset_id=dataset_id,
        key=item.key,
        stage=item.stage,
        factor=item.factor,
        scenario=item.scenario,
        fields=item.fields,
        content_hash=item.content_hash,
        review_status=item.review_status,
        review=item.review,
        provenance=item.provenance,
    )


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    items: int
    created_at: str


def list_datasets(session: Session) -> list[DatasetInfo]:
    rows = session.exec(
        select(Dataset.name, Dataset.created_at, func.count(Item.id))  # type: ignore[arg-type]
        .join(Item, isouter=True)
        .group_by(col(Dataset.id))
        .order_by(Dataset.name)
    ).all()
    return [DatasetInfo(n, c, t.isoformat()) for n, t, c in rows]


@dataclass(frozen=True)
class DatasetDescription:
    """Counts per stage and factor, so gaps in coverage are visible (``empty_cells`` covers
    FairMonitor's grid, and is empty for a dataset of free-form items only)."""

    name: str
    items: int
    stages: dict[str, int]
    factors: dict[str, int]
    scenarios: int
    empty_cells: list[str]


def describe_dataset(session: Session, name: str) -> DatasetDescription:
    items = dataset_items(session, name)
    cells = Counter((i.factor, i.stage) for i in items)
    # A dataset of free-form items only is not trying to fill FairMonitor's grid.
    grid = FACTORS if any(i.stage in STAGES for i in items) else ()
    return DatasetDescription(
        name=name,
        items=len(items),
        stages=dict(sorted(Counter(i.stage for i in items).items())),
        factors=dict(sorted(Counter(i.factor for i in items if i.factor).items())),
        scenarios=len({i.scenario for i in items if i.scenario}),
        empty_cells=[f"{f}/{s}" for f in grid for s in STAGES if not cells[(f, s)]],
    )


def export_items(
    session: Session, name: str, out: str | Path, *, statuses: Iterable[str] | None = None
) -> int:
    """Write the dataset back out in the import format, with each item's review status,
    review and provenance when set; returns the number of items written.

    ``statuses`` keeps only the items whose review status is named (``"unreviewed"`` for
    items never reviewed; ``judge.data.items.status_filter``), e.g. ``("accepted",
    "edited")`` for the reviewed benchmark; None writes every item."""
    items = dataset_items(session, name)
    if statuses is not None:
        wanted = status_filter(statuses)
        items = [i for i in items if i.review_status in wanted]
    with Path(out).open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item_to_json(item), ensure_ascii=False) + "\n")
    return len(items)
