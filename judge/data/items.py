"""The FairMonitor item file format (JSONL): one item per line, validated whole.

The schema is in docs/datasets.md. ``check_items`` rejects a file with any bad line, listing
every problem with its line number, so nothing is half-imported; it streams the file and keeps
only each item's id, line and hash, so memory does not grow with the texts. The file is UTF-8,
with or without a byte-order mark. Factors and scenarios are
checked against the taxonomy (``judge.data.taxonomy``): an unknown id is an error, a
factor-scenario pair outside FairMonitor's mapping only a warning, which callers can silence.

Free-form items (stage ``free``: a ``prompt`` and an optional ``reference``) are users' own
material, judged by the rubrics they register; their factor and scenario are optional (stored
empty when absent) and checked against the taxonomy only when given.

Three optional keys describe an item instead of being part of it: ``review_status`` and
``review`` (what an expert review decided) and ``provenance`` (where a generated item came
from). ``dataset export`` writes them and an import reads them back, but they are not item
fields: they never enter an item's content hash, so a reviewed item keeps its identity.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.data.taxonomy import Taxonomy, load_taxonomy
from judge.endpoint_url import redacted
from judge.errors import DatasetError, InvalidInputError
from judge.hashing import content_hash
from judge.store.tables import Item
from judge.vocab import FREE_STAGE, ITEM_STAGES, STAGE_FIELDS, STAGE_OPTIONAL_FIELDS

TOO_DEEP = "nested too deeply to read (arrays or objects thousands of levels deep)"
"""The problem of a JSON line that Python's parser cannot read without recursing too far."""
COMMON = ("id", "stage", "factor", "scenario")
OPTIONAL = ("expected_answer", "implied_stereotype", "notes")
# Keys about an item rather than of it (module docstring): kept out of ``fields``.
METADATA = ("review_status", "review", "provenance")

# ``Item.review_status``: None for an item never put before a review (hand-written or
# imported), "draft" for a generated item waiting for one, else the review's decision.
DRAFT = "draft"
DECIDED = ("accepted", "edited", "rejected")
REVIEW_STATUSES = (DRAFT, *DECIDED)
UNREVIEWED = "unreviewed"
"""The name filters use for ``review_status`` None (``status_filter``)."""
# A free-form item may leave these out: it need not belong to FairMonitor's grid.
FREE_OPTIONAL_COMMON = ("factor", "scenario")


@dataclass(frozen=True)
class ParsedItem:
    key: str
    stage: str
    factor: str
    scenario: str
    fields: dict[str, Any]
    review_status: str | None = None
    review: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None

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


def _check_line(obj: Any, taxonomy: Taxonomy) -> tuple[ParsedItem | None, list[str]]:
    if not isinstance(obj, dict):
        return None, ["expected a JSON object"]
    problems: list[str] = []
    stage = obj.get("stage")
    free = stage == FREE_STAGE
    for key in COMMON:
        if free and key in FREE_OPTIONAL_COMMON and key not in obj:
            continue
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            problems.append(f"'{key}' is missing or not a non-empty string")
    if isinstance(stage, str) and stage not in ITEM_STAGES:
        problems.append(f"stage {stage!r} is not one of {', '.join(ITEM_STAGES)}")
        return None, problems
    factor = obj.get("factor")
    if isinstance(factor, str) and factor.strip() and factor not in taxonomy.factor_ids:
        problems.append(f"factor {factor!r} is not one of {', '.join(taxonomy.factor_ids)}")
    scenario = obj.get("scenario")
    if isinstance(scenario, str) and scenario.strip() and scenario not in taxonomy.scenario_ids:
        problems.append(_unknown_scenario(scenario, taxonomy))
    if not isinstance(stage, str):
        return None, problems
    for key in STAGE_FIELDS[stage]:
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            problems.append(f"stage {stage} needs '{key}' as a non-empty string")
    extra = STAGE_OPTIONAL_FIELDS.get(stage, ())
    for key in extra:
        if key in obj and (not isinstance(obj[key], str) or not obj[key].strip()):
            problems.append(f"'{key}' must be a non-empty string when given (or left out)")
    allowed = set(COMMON) | set(STAGE_FIELDS[stage]) | set(extra) | set(OPTIONAL) | set(METADATA)
    unknown = sorted(set(obj) - allowed)
    if unknown:
        problems.append(f"unknown field(s) for stage {stage}: {', '.join(unknown)}")
    problems.extend(_metadata_problems(obj))
    if problems:
        return None, problems
    fields = {k: obj[k] for k in obj if k not in COMMON and k not in METADATA}
    parsed = ParsedItem(
        obj["id"],
        stage,
        obj.get("factor", ""),
        obj.get("scenario", ""),
        fields,
        review_status=obj.get("review_status"),
        review=obj.get("review"),
        provenance=obj.get("provenance"),
    )
    return parsed, []


def _metadata_problems(obj: dict[str, Any]) -> list[str]:
    """What is wrong with an item's optional metadata keys (null means absent)."""
    problems = []
    status = obj.get("review_status")
    if status is not None and status not in REVIEW_STATUSES:
        problems.append(
            f"review_status {status!r} is not one of {', '.join(REVIEW_STATUSES)} (or null)"
        )
    for key in ("review", "provenance"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            problems.append(f"'{key}' must be a JSON object when given")
    return problems


def status_filter(statuses: Iterable[str], *, argument: str = "statuses") -> set[str | None]:
    """The stored ``review_status`` values that status names select: ``unreviewed`` stands
    for None, the others for themselves. An unknown name raises InvalidInputError naming
    ``argument``.

    >>> sorted(status_filter(["accepted", "edited"]))
    ['accepted', 'edited']
    >>> status_filter(["unreviewed"])
    {None}
    """
    known = (UNREVIEWED, *REVIEW_STATUSES)
    wanted = [s.strip().lower() for s in statuses]
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise InvalidInputError(
            f"{argument}: unknown review status(es) {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(known)})"
        )
    return {None if s == UNREVIEWED else s for s in wanted}


def status_name(status: str | None) -> str:
    """The name of a stored ``review_status`` in messages and filters (None: unreviewed)."""
    return UNREVIEWED if status is None else status


def _unknown_scenario(scenario: str, taxonomy: Taxonomy) -> str:
    why = f"scenario {scenario!r} is not a scenario id of {taxonomy.source.name}"
    suggestion = taxonomy.suggest_scenario(scenario)
    return f"{why} (did you mean {suggestion!r}?)" if suggestion else why


def _unmapped(item: ParsedItem, taxonomy: Taxonomy) -> str | None:
    if not (item.factor and item.scenario):  # a free-form item outside the grid
        return None
    if taxonomy.is_mapped(item.factor, item.scenario):
        return None
    return (
        f"FairMonitor's table does not test factor {item.factor!r} in scenario "
        f"{item.scenario!r} (its scenarios for {item.factor!r} are in {taxonomy.source.name})"
    )


def text_lines(
    path: Path, error: type[InvalidInputError] = DatasetError
) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of a UTF-8 file, read one line at a time; a leading
    byte-order mark is dropped. A line that is not UTF-8 raises ``error`` naming the line."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise error(
                    f"{path} line {number} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                    f"column {exc.start + 1}); save the file as UTF-8 and try again"
                ) from None


@dataclass(frozen=True)
class ItemIndex:
    """What validating a whole file keeps: each item's line and content hash by id (not the
    items themselves, so memory stays small), the number of items and the warnings."""

    lines: dict[str, tuple[int, str]]
    warnings: list[tuple[int, str]]

    @property
    def count(self) -> int:
        return len(self.lines)


def _parsed_lines(
    path: Path, taxonomy: Taxonomy
) -> Iterator[tuple[int, ParsedItem | None, list[str]]]:
    """Each non-blank line as (number, item or None, problems), streamed."""
    for number, line in text_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, None, [f"not valid JSON ({exc.msg} at column {exc.colno})"]
            continue
        except RecursionError:
            yield number, None, [TOO_DEEP]
            continue
        item, why = _check_line(obj, taxonomy)
        yield number, item, why


def check_items(
    path: str | Path, *, allow_unmapped: bool = False, taxonomy: Taxonomy | None = None
) -> ItemIndex:
    """Validate a whole file, streaming it; raise DatasetError listing every bad line.

    A factor-scenario pair outside the taxonomy's mapping is not an error: it is returned as
    a warning, unless ``allow_unmapped`` silences it. ``taxonomy`` defaults to the bundled one.
    """
    taxonomy = taxonomy or load_taxonomy()
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"dataset file {path} not found")
    problems: list[tuple[int, str]] = []
    warnings: list[tuple[int, str]] = []
    lines: dict[str, tuple[int, str]] = {}
    for number, item, why in _parsed_lines(path, taxonomy):
        problems.extend((number, reason) for reason in why)
        if item is None:
            continue
        if item.key in lines:
            problems.append((number, f"id {item.key!r} already used on line {lines[item.key][0]}"))
            continue
        lines[item.key] = (number, item.content_hash)
        warning = None if allow_unmapped else _unmapped(item, taxonomy)
        if warning:
            warnings.append((number, warning))
    if problems:
        raise DatasetError(f"{path} was not imported; fix these lines and try again:", problems)
    if not lines:
        raise DatasetError(f"{path} holds no items")
    return ItemIndex(lines, warnings)


def iter_items(
    path: str | Path, index: ItemIndex, *, taxonomy: Taxonomy | None = None
) -> Iterator[ParsedItem]:
    """The items of a file that ``check_items`` validated as ``index``, read again one line
    at a time; a file changed since then raises DatasetError."""
    taxonomy = taxonomy or load_taxonomy()
    path = Path(path)
    seen = 0
    for number, item, _ in _parsed_lines(path, taxonomy):
        if item is None or index.lines.get(item.key) != (number, item.content_hash):
            raise DatasetError(f"{path} changed while it was imported (line {number}); try again")
        seen += 1
        yield item
    if seen != index.count:
        raise DatasetError(f"{path} changed while it was imported; try again")


def read_items(
    path: str | Path, *, allow_unmapped: bool = False, taxonomy: Taxonomy | None = None
) -> ItemFile:
    """Parse and validate a whole file into memory; raise DatasetError listing every bad line
    (see ``check_items``; importing streams the file instead)."""
    taxonomy = taxonomy or load_taxonomy()
    index = check_items(path, allow_unmapped=allow_unmapped, taxonomy=taxonomy)
    return ItemFile(list(iter_items(path, index, taxonomy=taxonomy)), index.warnings)


def item_to_json(item: Item) -> dict[str, Any]:
    """A stored item in the import format (a free-form item's empty factor and scenario are
    left out, as its file may do), followed by its metadata keys that are set."""
    head = {"id": item.key, "stage": item.stage, "factor": item.factor, "scenario": item.scenario}
    if item.stage == FREE_STAGE:
        head = {k: v for k, v in head.items() if v or k not in FREE_OPTIONAL_COMMON}
    meta = {key: getattr(item, key) for key in METADATA}
    provenance = meta.get("provenance")
    if isinstance(provenance, dict) and isinstance(provenance.get("base_url"), str):
        # A secret stored before revision 0017 is never written out.
        meta["provenance"] = {**provenance, "base_url": redacted(provenance["base_url"])}
    return {**head, **item.fields, **{k: v for k, v in meta.items() if v is not None}}
