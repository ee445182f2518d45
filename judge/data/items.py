"""The FairMonitor item file format (JSONL): one item per line, validated whole.

The schema is in docs/datasets.md. ``read_items`` rejects a file with any bad line, listing
every problem with its line number, so nothing is half-imported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.errors import DatasetError
from judge.hashing import content_hash
from judge.store.tables import Item
from judge.vocab import FACTORS, STAGE_FIELDS

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
        return content_hash(body)


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


def item_to_json(item: Item) -> dict[str, Any]:
    """A stored item in the import format."""
    return {
        "id": item.key,
        "stage": item.stage,
        "factor": item.factor,
        "scenario": item.scenario,
        **item.fields,
    }
