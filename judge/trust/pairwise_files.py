"""Pairwise judgments made elsewhere, read from files into records (nothing is stored here).

Two formats (docs/pairwise.md):

* ``shi2024``: Shi et al.'s record files (``record_JUDGE_3.tsv``, gzipped or not), one row per
  judgment: ``cmp_index`` ("question;model shown first;model shown second"), columns ``A`` and
  ``B`` (the models shown first and second), ``task``, and last a column named after the judge
  holding its whole reply. The verdict is the reply's first ``[[X]]`` with X in A-D, as the
  authors read it: A and B the answer shown first and second, C a tie (their three-option
  mode); D, or no such mark, is unreadable (kept with the reply, never guessed). A folder is
  read file by file (every ``*record_*.tsv`` or ``.tsv.gz`` in it); the repetition is the
  number in a ``RepetitionN`` prefix of the file's name, else 1.
* ``csv`` / ``jsonl``: one judgment per row with ``question``, ``model_a`` (shown first),
  ``model_b`` (shown second) and ``verdict``: ``A``, ``B``, ``tie``, ``unreadable``, or the name
  of one of the two models; optional ``judge``, ``repetition`` (default 1), ``category`` and
  ``raw`` (the judge's reply).

Every problem of a source is collected and raised at once (``InvalidInputError``), each with
its file and line.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.errors import InvalidInputError

FORMATS = ("shi2024", "csv", "jsonl")
SHI_VERDICT = re.compile(r"\[\[([ABCD])\]\]")
SHI_LETTERS = {"A": "A", "B": "B", "C": "tie"}  # D (four-option mode) is not a verdict here
SHI_COLUMNS = ("cmp_index", "A", "B", "task")
REPETITION = re.compile(r"^Repetition(\d+)", re.IGNORECASE)
WORDS = {"a": "A", "b": "B", "tie": "tie", "unreadable": "unreadable"}
FIELDS = ("judge", "question", "model_a", "model_b", "verdict", "repetition", "category", "raw")
MAX_LABEL = 200


@dataclass(frozen=True)
class PairRecord:
    """One judgment as read: who judged, which question, the models in the order shown, the
    repetition, the verdict (A, B, tie or unreadable), and where it was read."""

    judge: str
    question: str
    model_first: str
    model_second: str
    repetition: int
    verdict: str
    category: str | None
    raw: str | None
    file: str
    line: int


@dataclass(frozen=True)
class ReadSource:
    """What a file or folder held: its records, every problem found (``(line, reason)``),
    and the sha256 of its bytes."""

    records: list[PairRecord]
    problems: list[tuple[int, str]]
    sha256: str
    files: int


def read_pairwise(
    path: str | Path, fmt: str, *, judge: str | None = None, repetition: int | None = None
) -> ReadSource:
    """Every record of ``path`` in format ``fmt`` (see the module docstring), with every
    problem found. ``judge`` labels the judge (required for csv/jsonl files without a
    ``judge`` column; for shi2024 it replaces the file's judge column name); ``repetition``
    replaces the repetition read from a shi2024 file's name."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    source = Path(path)
    if not source.exists():
        raise InvalidInputError(f"{source}: no such file or folder")
    if source.is_dir():
        if fmt != "shi2024":
            raise InvalidInputError(f"{source} is a folder: only --format shi2024 reads folders")
        files = sorted(p for p in source.iterdir() if _is_shi_record(p.name))
        if not files:
            raise InvalidInputError(f"{source}: no record_*.tsv or record_*.tsv.gz file in it")
    else:
        files = [source]
    digest = hashlib.sha256()
    records: list[PairRecord] = []
    problems: list[tuple[int, str]] = []
    for file in files:
        data = file.read_bytes()
        digest.update(data)
        text = _decode(file, data, problems)
        if text is None:
            continue
        name = str(file) if len(files) > 1 else ""
        rep = repetition if repetition is not None else _repetition(file.name)
        rows, found = _read_text(text, fmt, name, judge, rep)
        records += rows
        problems += found
    return ReadSource(records, problems, digest.hexdigest(), len(files))


def read_pairwise_text(
    text: str, fmt: str, *, judge: str | None = None, repetition: int | None = None
) -> ReadSource:
    """``read_pairwise`` of one file's text (a request's body): the same rules, the
    repetition of a shi2024 text ``repetition`` or 1."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    records, problems = _read_text(text, fmt, "", judge, repetition or 1)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return ReadSource(records, problems, digest, 1)


def _read_text(
    text: str, fmt: str, name: str, judge: str | None, repetition: int
) -> tuple[list[PairRecord], list[tuple[int, str]]]:
    try:
        (judge or "").encode("utf-8")
    except UnicodeEncodeError:
        return [], [
            (0, _where(name, "the judge's label holds a character that is not Unicode text"))
        ]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, which JSON's \\ud800 can carry
        line = text.count("\n", 0, exc.start) + 1
        return [], [(line, _where(name, "holds a character that is not Unicode text"))]
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        return [], [
            (line, _where(name, "holds a NUL character (\\x00), which the store cannot keep"))
        ]
    try:
        if fmt == "shi2024":
            return _read_shi(text, name, judge, repetition)
        return _read_plain(text, name, fmt, judge)
    except csv.Error as exc:
        return [], [(0, _where(name, f"not readable as {fmt} ({exc})"))]


def _is_shi_record(name: str) -> bool:
    return "record_" in name and (name.endswith(".tsv") or name.endswith(".tsv.gz"))


def _repetition(name: str) -> int:
    found = REPETITION.match(name)
    return int(found.group(1)) if found else 1


def _decode(file: Path, data: bytes, problems: list[tuple[int, str]]) -> str | None:
    try:
        if file.name.endswith(".gz"):
            data = gzip.decompress(data)
        return data.decode("utf-8-sig")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        problems.append((0, f"{file}: cannot be read as UTF-8 text ({exc})"))
        return None


def _where(name: str, why: str) -> str:
    return f"{name}: {why}" if name else why


def _read_shi(
    text: str, name: str, judge: str | None, repetition: int
) -> tuple[list[PairRecord], list[tuple[int, str]]]:
    csv.field_size_limit(sys.maxsize)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t")
    header = next(reader, None)
    if not header or len(header) < len(SHI_COLUMNS) + 1:
        return [], [(1, _where(name, "not a Shi et al. record file: too few columns"))]
    missing = [c for c in SHI_COLUMNS if c not in header]
    if missing:
        return [], [(1, _where(name, f"missing column(s) {', '.join(missing)}"))]
    label = judge or header[-1]
    at = {c: header.index(c) for c in SHI_COLUMNS}
    records, problems = [], []
    end = reader.line_num
    for row in reader:
        line, end = end + 1, reader.line_num  # the line the record starts on
        if len(row) != len(header):
            problems.append(
                (line, _where(name, f"{len(row)} fields, the header has {len(header)}"))
            )
            continue
        parts = row[at["cmp_index"]].split(";")
        first, second = row[at["A"]], row[at["B"]]
        if len(parts) != 3 or not all(parts):
            problems.append((line, _where(name, "cmp_index is not 'question;model;model'")))
            continue
        if (parts[1], parts[2]) != (first, second):
            problems.append((line, _where(name, "columns A and B differ from cmp_index's models")))
            continue
        reply = row[-1]
        found = SHI_VERDICT.search(reply)
        verdict = SHI_LETTERS.get(found.group(1), "unreadable") if found else "unreadable"
        records.append(
            PairRecord(
                label, parts[0], first, second, repetition, verdict,
                row[at["task"]] or None, reply, name, line,
            )
        )  # fmt: skip
    return records, problems


def _rows(text: str, fmt: str) -> Iterator[tuple[int, Any]]:
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        end = 1
        for row in reader:
            yield end + 1, row  # the line the record starts on (a field may span lines)
            end = reader.line_num
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError as exc:
            yield n, f"not JSON ({exc.msg})"


def _read_plain(
    text: str, name: str, fmt: str, judge: str | None
) -> tuple[list[PairRecord], list[tuple[int, str]]]:
    records, problems = [], []
    for line, row in _rows(text, fmt):
        if not isinstance(row, dict):
            problems.append((line, _where(name, row if isinstance(row, str) else "not an object")))
            continue
        record, why = _plain_record(row, judge, name, line)
        if record is None:
            problems.append((line, _where(name, why)))
        else:
            records.append(record)
    if not records and not problems:
        problems.append((0, _where(name, "no records in the file")))
    return records, problems


def _text(row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    return "" if value is None else str(value).strip()


def _plain_record(
    row: dict[str, Any], judge: str | None, name: str, line: int
) -> tuple[PairRecord | None, str]:
    if None in row:
        return None, "more fields than the header names"
    unknown = sorted(str(k) for k in row if k not in FIELDS)
    if unknown:
        return None, f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(FIELDS)}"
    given = {k: _text(row, k) for k in ("judge", "question", "model_a", "model_b", "verdict")}
    missing = [k for k in ("question", "model_a", "model_b", "verdict") if not given[k]]
    if missing:
        return None, f"{', '.join(missing)} missing or empty"
    label = judge or given["judge"]
    if not label:
        return None, "no judge: give --judge or a judge column"
    if judge and given["judge"] and given["judge"] != judge:
        return None, f"judge {given['judge']!r} differs from --judge {judge!r}"
    first, second = given["model_a"], given["model_b"]
    if first == second:
        return None, f"model_a and model_b are the same model ({first!r})"
    reserved = [m for m in (first, second) if m.lower() in WORDS]
    if reserved:
        return (
            None,
            f"a model may not be named {reserved[0]!r}: A, B, tie and unreadable are verdicts",
        )
    if max(len(label), len(first), len(second), len(given["question"])) > MAX_LABEL:
        return None, f"a label is longer than {MAX_LABEL} characters"
    said = given["verdict"]
    verdict = WORDS.get(said.lower()) or {first: "A", second: "B"}.get(said)
    if verdict is None:
        return None, (
            f"verdict {said!r} is not A, B, tie, unreadable, or one of the pair's models "
            f"({first!r}, {second!r})"
        )
    rep_text = _text(row, "repetition") or "1"
    if not rep_text.isdigit() or int(rep_text) < 1:
        return None, f"repetition {rep_text!r} is not a whole number from 1"
    raw = row.get("raw")
    return PairRecord(
        label, given["question"], first, second, int(rep_text), verdict,
        _text(row, "category") or None, None if raw is None else str(raw), name, line,
    ), ""  # fmt: skip
