"""FairMonitor item files (JSONL): validation, import, listing and export.

One JSON object per line; the schema is in docs/datasets.md. A file with any bad line is
rejected whole, every problem listed with its line number; nothing is half-imported, and
importing the same items again adds nothing.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, func, select

from judge.errors import DatasetError, NotFoundError
from judge.prompts import sha256
from judge.tables import Dataset, Item

FACTORS = (
    "gender",
    "race_culture",
    "learning_style",
    "grade_age",
    "learning_ability",
    "socioeconomic_status",
    "disability_special_groups",
    "personality",
    "subject",
)
STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "S1": ("question", "expected_answer"),
    "S2": ("story_a", "story_b", "changed_factor"),
    "S3": ("question_a", "question_b"),
    "S4": ("question", "expected_answer"),
}
COMMON = ("id", "stage", "factor", "scenario")
OPTIONAL = ("expected_answer", "implied_stereotype", "notes")


@dataclass(frozen=True)
class ParsedItem:
    key: str
    stage: str
    factor: str
    scenario: str
    fields: dict[str, Any]

    @property
    def content_hash(self) -> str:
        body = {
            "stage": self.stage,
            "factor": self.factor,
            "scenario": self.scenario,
            "fields": self.fields,
        }
        return sha256(json.dumps(body, sort_keys=True, ensure_ascii=False))


def _check_line(obj: Any) -> tuple[ParsedItem | None, list[str]]:
    if not isinstance(obj, dict):
        return None, ["expected a JSON object"]
    problems: list[str] = []
    for key in COMMON:
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            problems.append(f"'{key}' is missing or not a non-empty string")
    stage = obj.get("stage")
    if isinstance(stage, str) and stage not in STAGE_FIELDS:
        problems.append(f"stage {stage!r} is not one of {', '.join(STAGE_FIELDS)}")
        return None, problems
    factor = obj.get("factor")
    if isinstance(factor, str) and factor not in FACTORS:
        problems.append(f"factor {factor!r} is not one of {', '.join(FACTORS)}")
    if not isinstance(stage, str):
        return None, problems
    for key in STAGE_FIELDS[stage]:
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            problems.append(f"stage {stage} needs '{key}' as a non-empty string")
    allowed = set(COMMON) | set(STAGE_FIELDS[stage]) | set(OPTIONAL)
    unknown = sorted(set(obj) - allowed)
    if unknown:
        problems.append(f"unknown field(s) for stage {stage}: {', '.join(unknown)}")
    if problems:
        return None, problems
    fields = {k: obj[k] for k in obj if k not in COMMON}
    return ParsedItem(obj["id"], stage, obj["factor"], obj["scenario"], fields), []


def read_items(path: str | Path) -> list[ParsedItem]:
    """Parse and validate a whole file; raise DatasetError listing every bad line."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"dataset file {path} not found")
    items: list[ParsedItem] = []
    problems: list[tuple[int, str]] = []
    first_seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append((number, f"not valid JSON ({exc.msg} at column {exc.colno})"))
                continue
            item, why = _check_line(obj)
            problems.extend((number, reason) for reason in why)
            if item is None:
                continue
            if item.key in first_seen:
                problems.append(
                    (number, f"id {item.key!r} already used on line {first_seen[item.key]}")
                )
                continue
            first_seen[item.key] = number
            items.append(item)
    if problems:
        raise DatasetError(f"{path} was not imported; fix these lines and try again:", problems)
    if not items:
        raise DatasetError(f"{path} holds no items")
    return items


@dataclass(frozen=True)
class ImportSummary:
    dataset: str
    added: int
    unchanged: int
    total: int


def import_items(session: Session, path: str | Path, dataset_name: str) -> ImportSummary:
    """Import a file into ``dataset_name`` (created if new); all or nothing, no duplicates."""
    items = read_items(path)
    dataset = session.exec(select(Dataset).where(Dataset.name == dataset_name)).first()
    if dataset is None:
        dataset = Dataset(name=dataset_name, description=f"imported from {Path(path).name}")
        session.add(dataset)
        session.flush()
    assert dataset.id is not None
    existing = {
        row.key: row for row in session.exec(select(Item).where(Item.dataset_id == dataset.id))
    }
    conflicts = [
        (
            0,
            f"id {item.key!r} is already in dataset {dataset_name!r} with different content; "
            "give the changed item a new id or import into a new dataset",
        )
        for item in items
        if item.key in existing and existing[item.key].content_hash != item.content_hash
    ]
    if conflicts:
        raise DatasetError(f"{path} was not imported:", conflicts)
    added = 0
    for item in items:
        if item.key in existing:
            continue
        session.add(
            Item(
                dataset_id=dataset.id,
                key=item.key,
                stage=item.stage,
                factor=item.factor,
                scenario=item.scenario,
                fields=item.fields,
                content_hash=item.content_hash,
            )
        )
        added += 1
    session.flush()
    return ImportSummary(dataset_name, added, len(items) - added, len(existing) + added)


def get_dataset(session: Session, name: str) -> Dataset:
    dataset = session.exec(select(Dataset).where(Dataset.name == name)).first()
    if dataset is None:
        known = ", ".join(session.exec(select(Dataset.name)).all()) or "none yet"
        raise NotFoundError(
            f"no dataset named {name!r} (known: {known}); "
            "import one with `fairjudge dataset import FILE`"
        )
    return dataset


def list_datasets(session: Session) -> list[dict[str, Any]]:
    rows = session.exec(
        select(Dataset.name, Dataset.created_at, func.count(Item.id))  # type: ignore[arg-type]
        .join(Item, isouter=True)
        .group_by(col(Dataset.id))
        .order_by(Dataset.name)
    ).all()
    return [{"name": n, "items": c, "created_at": t.isoformat()} for n, t, c in rows]


def dataset_items(session: Session, name: str) -> list[Item]:
    dataset = get_dataset(session, name)
    return list(
        session.exec(select(Item).where(Item.dataset_id == dataset.id).order_by(col(Item.id)))
    )


def describe_dataset(session: Session, name: str) -> dict[str, Any]:
    """Counts per stage and factor, so gaps in coverage are visible."""
    items = dataset_items(session, name)
    cells = Counter((i.factor, i.stage) for i in items)
    return {
        "name": name,
        "items": len(items),
        "stages": dict(sorted(Counter(i.stage for i in items).items())),
        "factors": dict(sorted(Counter(i.factor for i in items).items())),
        "scenarios": len({i.scenario for i in items}),
        "empty_cells": [f"{f}/{s}" for f in FACTORS for s in STAGE_FIELDS if not cells[(f, s)]],
    }


def item_to_json(item: Item) -> dict[str, Any]:
    return {
        "id": item.key,
        "stage": item.stage,
        "factor": item.factor,
        "scenario": item.scenario,
        **item.fields,
    }


def export_items(session: Session, name: str, out: str | Path) -> int:
    """Write the dataset back out in the import format; returns the number of items."""
    items = dataset_items(session, name)
    with Path(out).open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item_to_json(item), ensure_ascii=False) + "\n")
    return len(items)
