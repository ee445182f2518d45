"""The FairMonitor item file format (JSONL): one item per line, validated whole.

The schema is in docs/datasets.md. ``read_items`` rejects a file with any bad line, listing
every problem with its line number, so nothing is half-imported. Factors and scenarios are
checked against the catalogue (``judge.data.catalogue``): an unknown id is an error, a
factor-scenario pair outside FairMonitor's mapping only a warning, which callers can silence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.data.catalogue import Catalogue, load_catalogue
from judge.errors import DatasetError
from judge.hashing import content_hash
from judge.store.tables import Item
from judge.vocab import STAGE_FIELDS

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


@dataclass(frozen=True)
class ItemFile:
    """A valid item file: its items, and ``(line, reason)`` warnings that do not block import."""

    items: list[ParsedItem]
    warnings: list[tuple[int, str]]


def _check_line(obj: Any, catalogue: Catalogue) -> tuple[ParsedItem | None, list[str]]:
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
    if isinstance(factor, str) and factor.strip() and factor not in catalogue.factor_ids:
        problems.append(f"factor {factor!r} is not one of {', '.join(catalogue.factor_ids)}")
    scenario = obj.get("scenario")
    if isinstance(scenario, str) and scenario.strip() and scenario not in catalogue.scenario_ids:
        problems.append(_unknown_scenario(scenario, catalogue))
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


def _unknown_scenario(scenario: str, catalogue: Catalogue) -> str:
    why = f"scenario {scenario!r} is not a scenario id of {catalogue.source.name}"
    suggestion = catalogue.suggest_scenario(scenario)
    return f"{why} (did you mean {suggestion!r}?)" if suggestion else why


def _unmapped(item: ParsedItem, catalogue: Catalogue) -> str | None:
    if catalogue.is_mapped(item.factor, item.scenario):
        return None
    return (
        f"FairMonitor's table does not test factor {item.factor!r} in scenario "
        f"{item.scenario!r} (its scenarios for {item.factor!r} are in {catalogue.source.name})"
    )


def read_items(
    path: str | Path, *, allow_unmapped: bool = False, catalogue: Catalogue | None = None
) -> ItemFile:
    """Parse and validate a whole file; raise DatasetError listing every bad line.

    A factor-scenario pair outside the catalogue's mapping is not an error: it is returned as
    a warning, unless ``allow_unmapped`` silences it. ``catalogue`` defaults to the bundled one.
    """
    catalogue = catalogue or load_catalogue()
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"dataset file {path} not found")
    items: list[ParsedItem] = []
    problems: list[tuple[int, str]] = []
    warnings: list[tuple[int, str]] = []
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
            item, why = _check_line(obj, catalogue)
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
            warning = None if allow_unmapped else _unmapped(item, catalogue)
            if warning:
                warnings.append((number, warning))
    if problems:
        raise DatasetError(f"{path} was not imported; fix these lines and try again:", problems)
    if not items:
        raise DatasetError(f"{path} holds no items")
    return ItemFile(items, warnings)


def item_to_json(item: Item) -> dict[str, Any]:
    """A stored item in the import format."""
    return {
        "id": item.key,
        "stage": item.stage,
        "factor": item.factor,
        "scenario": item.scenario,
        **item.fields,
    }
