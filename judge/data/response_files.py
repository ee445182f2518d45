"""Reading a file of answers produced elsewhere (JSONL, or CSV with a header) into numbered rows,
each line's problem kept with its number, for ``judge.data.responses`` to check and import."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from judge.data.items import TOO_DEEP, text_lines
from judge.errors import InvalidInputError

FIELDS = ("item_id", "part", "text", "model", "metadata")
"""An answer row's fields: the first three required, ``model`` and ``metadata`` optional."""


class ResponseRowsError(InvalidInputError):
    """A batch or file of answers was refused; ``problems`` lists ``(number, reason)``, the
    number being the row's position in the batch (from 1) or its line in the file."""

    def __init__(
        self, message: str, problems: list[tuple[int, str]] | None = None, *, unit: str = "row"
    ) -> None:
        super().__init__(message, problems, unit=unit)


def read_response_file(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an answers file, by extension: ``.jsonl`` (one JSON object a line) or
    ``.csv`` (header ``item_id,part,text`` and optionally ``model``, ``metadata``, the latter
    a JSON object as text; empty ``model`` and ``metadata`` cells mean none). The file is
    UTF-8. Any line that cannot be read (not JSON, not an object, malformed CSV, metadata that
    is not a JSON object) raises InvalidInputError naming every such line; the rows' fields
    are checked by ``import_responses``."""
    return [row for _, row in read_numbered(Path(path))]


def read_numbered(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The file's rows with their line numbers (``read_response_file``); ResponseRowsError
    naming every line that cannot be read."""
    if not path.is_file():
        raise InvalidInputError(f"answers file {path} not found")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        rows, problems = _jsonl_rows(path)
    elif suffix == ".csv":
        rows, problems = _csv_rows(path)
    else:
        raise InvalidInputError(
            f"{path}: cannot tell the format from {suffix or 'no extension'!r}; answers "
            "files end in .jsonl (one JSON object a line) or .csv"
        )
    if problems:
        raise ResponseRowsError(
            f"{path} was not imported; fix these lines and try again:", problems, unit="line"
        )
    if not rows:
        raise InvalidInputError(f"{path} holds no answers")
    return rows


def _jsonl_rows(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[tuple[int, str]] = []
    for number, line in text_lines(path, InvalidInputError):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append((number, f"not valid JSON ({exc.msg} at column {exc.colno})"))
            continue
        except RecursionError:
            problems.append((number, TOO_DEEP))
            continue
        if not isinstance(obj, dict):
            problems.append((number, f"expected a JSON object, got {type(obj).__name__}"))
            continue
        rows.append((number, obj))
    return rows, problems


_REST = "\x00rest"  # DictReader's key for cells beyond the header


def _csv_rows(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    required, optional = FIELDS[:3], FIELDS[3:]
    lines = (line for _, line in text_lines(path, InvalidInputError))
    reader = csv.DictReader(lines, restkey=_REST, restval=None, strict=True)
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[tuple[int, str]] = []
    start = 1
    try:
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        unknown = [c for c in header if c not in FIELDS]
        if missing or unknown:
            raise InvalidInputError(
                f"{path}: the header must name {', '.join(required)} and may name "
                f"{', '.join(optional)} (found: {', '.join(header) or 'no header'})"
            )
        start = reader.line_num + 1
        for cells in reader:
            row, why = _csv_row(cells, len(header))
            if why:
                problems.append((start, why))
            else:
                rows.append((start, row))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InvalidInputError(
            f"{path} line {start} is not valid CSV ({exc}); close or remove the stray quote"
        ) from None
    return rows, problems


def _csv_row(cells: dict[str, Any], width: int) -> tuple[dict[str, Any], str | None]:
    """One CSV record as a row (empty optional cells left out), or the reason it is bad."""
    if cells.get(_REST):
        return {}, f"{len(cells[_REST])} cell(s) more than the header's {width}"
    absent = [c for c in FIELDS[:3] if cells.get(c) is None]
    if absent:
        return {}, f"{', '.join(absent)} missing (the row is shorter than the header)"
    row: dict[str, Any] = {c: cells[c] for c in FIELDS[:3]}
    if cells.get("model"):
        row["model"] = cells["model"]
    if cells.get("metadata"):
        try:
            metadata = json.loads(cells["metadata"])
        except json.JSONDecodeError as exc:
            return {}, f"metadata is not valid JSON ({exc.msg} at column {exc.colno})"
        except RecursionError:
            return {}, f"metadata: {TOO_DEEP}"
        if not isinstance(metadata, dict):
            kind = type(metadata).__name__
            return {}, f'metadata must be a JSON object such as {{"key": "value"}}, got {kind}'
        row["metadata"] = metadata
    return row, None
