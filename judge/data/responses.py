"""Answers produced elsewhere, stored as an imported generation run that is judged, reported
and rated like a generated one.

A batch of rows (item id, part, text, optional model label and metadata) goes into the one
imported run of its (dataset, model label), created by the first batch. A batch is checked
whole before anything is written: any bad row refuses the whole batch, every bad row listed
with its number, item id and reason; a valid batch is stored in one transaction. Rows already
stored with the same text and metadata are counted as unchanged, so sending a batch again
adds nothing. The rules and limits are in docs/datasets.md ("Bringing your own answers").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import insert, select, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from judge.data.response_files import FIELDS, ResponseRowsError, read_numbered
from judge.errors import InvalidInputError
from judge.hashing import sha256
from judge.store.queries import get_dataset
from judge.store.tables import GenerationRun, Item, Response, utcnow
from judge.vocab import STAGE_PARTS, RunStatus

MAX_BATCH_ROWS = 5000
"""The most rows one batch (an API request) may hold; a file given to the CLI is one batch of
any length."""
MAX_TEXT_CHARS = 20_000
"""The longest answer accepted, in characters (about 5,000 tokens): an S2 item puts two
answers and the rubric into one judge prompt, which must fit the judge's context."""
MAX_METADATA_CHARS = 10_000
"""The largest metadata object accepted, in characters of its JSON text."""
MAX_LABEL_CHARS = 200
"""The longest model label accepted."""
DEFAULT_MODEL = "external"
"""The model label of answers whose batch and rows name none."""
IMPORTED = "imported"
"""``GenerationRun.source``, ``endpoint_name`` and ``template_version`` of an imported run."""
_IN_CHUNK = 5000  # ids per SQL IN (...): one query for a batch of MAX_BATCH_ROWS rows


class ResponseRow(BaseModel):
    """One answer produced elsewhere: the text a model gave for one part of one item."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str = Field(min_length=1, description="The item's id in the dataset (its `id`).")
    part: str = Field(
        min_length=1,
        description="Which prompt of the item it answers: 'answer' for S1 and S4 items, "
        "'A' or 'B' for S2 and S3 items.",
    )
    text: str = Field(
        max_length=MAX_TEXT_CHARS,
        description="The answer as the model gave it; blank text is stored with flag 'empty'.",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LABEL_CHARS,
        description="Label of the model that wrote it; must match the batch's label.",
    )
    metadata: dict[str, Any] | None = Field(
        default=None, description="Any JSON object, stored with the answer as given."
    )

    @field_validator("item_id", "part", "text", "model")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:
            raise ValueError("holds a NUL character (\\x00), which the store cannot keep")
        return value

    @field_validator("model")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("is blank; leave the field out for the batch's label")
        return value

    @field_validator("metadata")
    @classmethod
    def _small_json(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return value
        try:
            size = len(json.dumps(value, ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError):
            raise ValueError(
                "must hold only JSON values (strings, finite numbers, true/false, null, "
                "lists and objects)"
            ) from None
        if size > MAX_METADATA_CHARS:
            raise ValueError(
                f"is {size:,} characters as JSON; at most {MAX_METADATA_CHARS:,} are accepted"
            )
        return value


class GenerationPrompts(Protocol):
    """What import needs of ``judge.prompts.PromptBook`` (passed in: stage 1 does not import
    the prompt renderer)."""

    def generation_prompt(self, stage: str, part: str, fields: dict[str, Any]) -> _Rendered: ...


class _Rendered(Protocol):
    @property
    def messages(self) -> list[dict[str, str]]: ...


@dataclass(frozen=True)
class ResponsesImport:
    """What one batch did: its run, answers added and already stored, and the number of
    distinct items the batch names."""

    generation_run_id: int
    added: int
    unchanged: int
    items: int
    created_run: bool
    dataset: str
    model: str


def import_responses(
    engine: Engine,
    dataset: str,
    rows: Iterable[Mapping[str, Any]] | Sequence[ResponseRow],
    *,
    model: str | None = None,
    book: GenerationPrompts | None = None,
    max_rows: int | None = MAX_BATCH_ROWS,
) -> ResponsesImport:
    """Store a batch of answers in the imported run of (``dataset``, model label); all or
    nothing. Problems are numbered by the row's position in ``rows``, from 1.

    The label is ``model``, else the rows' own ``model``, else ``DEFAULT_MODEL``. With
    ``book`` each answer keeps the prompt FairJudge would have sent for its item and part;
    without, its prompt is stored empty. ``max_rows`` bounds the batch (None: no bound).
    """
    given: Iterable[Mapping[str, Any] | ResponseRow] = rows
    numbered = list(enumerate(given, start=1))
    return _import(engine, dataset, numbered, model, book, max_rows, "row", "the batch")


def import_response_file(
    engine: Engine,
    path: str | Path,
    dataset: str,
    *,
    model: str | None = None,
    book: GenerationPrompts | None = None,
) -> ResponsesImport:
    """``import_responses`` for a whole file (see ``read_response_file``) as one batch of
    any length; problems are numbered by the file's lines."""
    numbered = read_numbered(Path(path))
    return _import(engine, dataset, numbered, model, book, None, "line", str(path))


@dataclass(frozen=True)
class _Parsed:
    number: int
    key: str | None  # the item id, when the row has one (also when it is otherwise invalid)
    part: str | None
    row: ResponseRow | None  # None: invalid fields (their reasons are already listed)


@dataclass(frozen=True)
class _ItemRef:
    id: int
    stage: str
    fields: dict[str, Any]


def _import(
    engine: Engine,
    dataset: str,
    numbered: Sequence[tuple[int, Mapping[str, Any] | ResponseRow]],
    model: str | None,
    book: GenerationPrompts | None,
    max_rows: int | None,
    unit: str,
    source: str,
) -> ResponsesImport:
    if model is not None:
        _check_label(model)
    if not numbered:
        raise InvalidInputError(f"{source} holds no answers; send at least one row")
    if max_rows is not None and len(numbered) > max_rows:
        raise InvalidInputError(
            f"{source} holds {len(numbered):,} rows; at most {max_rows:,} are accepted in "
            "one batch: send them in several batches"
        )
    problems: list[tuple[int, str]] = []
    parsed = [_parse(number, raw, problems) for number, raw in numbered]
    label = model or next((p.row.model for p in parsed if p.row and p.row.model), DEFAULT_MODEL)
    for p in parsed:
        if p.row is not None and p.row.model is not None and p.row.model != label:
            given = "given for the batch" if model else f"of {unit} {_first_label(parsed)}"
            problems.append(
                (
                    p.number,
                    _about(
                        p,
                        f"model {p.row.model!r} is not the batch's {label!r} ({given}); "
                        "one batch holds one model's answers",
                    ),
                )
            )
    keys = sorted({p.key for p in parsed if p.key is not None})
    with Session(engine) as session:
        conn = session.connection()
        _lock(conn, dataset, label)
        dataset_id = get_dataset(session, dataset).id
        assert dataset_id is not None
        items = _items(conn, dataset_id, keys)
        run_id = conn.execute(
            select(col(GenerationRun.id))
            .where(
                col(GenerationRun.dataset_id) == dataset_id,
                col(GenerationRun.source) == IMPORTED,
                col(GenerationRun.model) == label,
            )
            .order_by(col(GenerationRun.id))
            .limit(1)
        ).scalar()
        stored = _stored(conn, run_id, [i.id for i in items.values()]) if run_id else {}
        accepted = _check(parsed, items, stored, dataset, run_id, unit, problems)
        if problems:
            problems.sort(key=lambda p: p[0])
            bad = len({n for n, _ in problems})
            raise ResponseRowsError(
                f"{source} was not imported: {bad} of {len(parsed)} {unit}s are invalid; "
                "fix them and send it again",
                problems,
                unit=unit,
            )
        new = [p for p in accepted if (items[_key(p)].id, p.part) not in stored]
        created = run_id is None
        if run_id is None:  # a valid batch into a new run holds only new answers
            run_id = _create_run(conn, dataset_id, label)
        if new:
            now = utcnow()
            conn.execute(
                insert(Response.__table__),  # type: ignore[attr-defined]
                [_response_row(run_id, p, items[_key(p)], label, book, now) for p in new],
            )
        session.commit()
    return ResponsesImport(
        generation_run_id=run_id,
        added=len(new),
        unchanged=len(accepted) - len(new),
        items=len({p.key for p in accepted}),
        created_run=created,
        dataset=dataset,
        model=label,
    )


def _check_label(model: str) -> None:
    if not model.strip() or len(model) > MAX_LABEL_CHARS or "\x00" in model:
        raise InvalidInputError(
            f"model label {model[:40]!r} is not usable: give 1 to {MAX_LABEL_CHARS} "
            "characters, not all blank, without NUL"
        )


def _parse(
    number: int, raw: Mapping[str, Any] | ResponseRow, problems: list[tuple[int, str]]
) -> _Parsed:
    """The row as a ResponseRow, or None with its reasons added to ``problems``."""
    if isinstance(raw, ResponseRow):
        return _Parsed(number, raw.item_id, raw.part, raw)
    if not isinstance(raw, Mapping):
        problems.append((number, f"expected an object with fields {', '.join(FIELDS)}"))
        return _Parsed(number, None, None, None)
    key, part = raw.get("item_id"), raw.get("part")
    found = _Parsed(
        number,
        key if isinstance(key, str) and key else None,
        part if isinstance(part, str) and part else None,
        None,
    )
    try:
        row = ResponseRow.model_validate(dict(raw))
    except ValidationError as exc:
        problems.extend((number, _about(found, why)) for why in _reasons(exc))
        return found
    return _Parsed(number, row.item_id, row.part, row)


def _reasons(exc: ValidationError) -> list[str]:
    """Pydantic's errors in our words: which field, and what is wrong with it."""
    out = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"])
        if error["type"] == "extra_forbidden":
            out.append(f"unknown field {where!r} (a row has {', '.join(FIELDS)})")
        elif error["type"] == "missing":
            out.append(f"{where} is missing")
        else:
            out.append(f"{where or 'row'}: {error['msg'].removeprefix('Value error, ')}")
    return out


def _about(p: _Parsed, why: str) -> str:
    """``why`` prefixed by the row's item and part, when the row names them."""
    if p.key is None:
        return why
    part = f" part {p.part!r}" if p.part is not None else ""
    return f"item {p.key!r}{part}: {why}"


def _key(p: _Parsed) -> str:
    assert p.key is not None
    return p.key


def _first_label(parsed: list[_Parsed]) -> int:
    return next(p.number for p in parsed if p.row and p.row.model)


def _check(
    parsed: list[_Parsed],
    items: dict[str, _ItemRef],
    stored: dict[tuple[int, str], tuple[str | None, Any]],
    dataset: str,
    run_id: int | None,
    unit: str,
    problems: list[tuple[int, str]],
) -> list[_Parsed]:
    """Add the batch-level problems (unknown item, part, repeat, changed answer, missing part
    of an item) and return the valid rows."""
    first: dict[tuple[str, str], int] = {}
    placed: list[_Parsed] = []  # rows with a known item and one of its stage's parts
    for p in parsed:
        if p.key is None:
            continue
        item = items.get(p.key)
        if item is None:
            problems.append((p.number, _about(p, f"no such item in dataset {dataset!r}")))
            continue
        if p.part is None:
            continue
        parts = STAGE_PARTS.get(item.stage, ())
        if p.part not in parts:
            why = f"a stage {item.stage} item's parts are {_names(parts)}, not {p.part!r}"
            problems.append((p.number, _about(p, why)))
            continue
        if (p.key, p.part) in first:
            why = f"repeats {unit} {first[(p.key, p.part)]} (each item and part once a batch)"
            problems.append((p.number, _about(p, why)))
            continue
        first[(p.key, p.part)] = p.number
        placed.append(p)
        old = stored.get((item.id, p.part))
        if p.row is not None and old is not None:
            if old[0] != p.row.text:
                what = "text"
            elif old[1] != p.row.metadata:
                what = "metadata"
            else:
                continue
            problems.append(
                (
                    p.number,
                    _about(
                        p,
                        f"run {run_id} already holds this answer with a different "
                        f"{what}; stored answers are not replaced: import changed answers "
                        "under another model label",
                    ),
                )
            )
    given = {(p.key, p.part) for p in placed}
    stored_parts = {(item_id, part) for item_id, part in stored}
    for p in placed:
        item = items[_key(p)]
        lacking = [
            part
            for part in STAGE_PARTS[item.stage]
            if (p.key, part) not in given and (item.id, part) not in stored_parts
        ]
        if lacking:
            why = (
                f"a stage {item.stage} item needs parts {_names(STAGE_PARTS[item.stage])}; "
                f"{_names(lacking)} {'is' if len(lacking) == 1 else 'are'} neither in this "
                "batch nor stored: send every part of an item in one batch"
            )
            problems.append((p.number, _about(p, why)))
    bad = {n for n, _ in problems}
    return [p for p in placed if p.number not in bad]


def _names(parts: Sequence[str]) -> str:
    quoted = [repr(p) for p in parts]
    return " and ".join(quoted) if len(quoted) <= 2 else ", ".join(quoted)


def _lock(conn: Connection, dataset: str, label: str) -> None:
    """Hold off other imports into the same run until this transaction ends, so two batches
    sent at once cannot both create the run or both add one answer."""
    if conn.dialect.name == "sqlite":
        # The write lock, now (30 s busy timeout); a connection shared with a transaction
        # already open (an in-memory store's single connection) holds it or cannot take it.
        if not getattr(conn.connection.dbapi_connection, "in_transaction", False):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif conn.dialect.name == "postgresql":
        digest = bytes.fromhex(sha256(f"fairjudge responses\0{dataset}\0{label}"))
        key = int.from_bytes(digest[:8], "big", signed=True)
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def _items(conn: Connection, dataset_id: int, keys: list[str]) -> dict[str, _ItemRef]:
    """The dataset's items among ``keys``, by key: id, stage and fields."""
    out: dict[str, _ItemRef] = {}
    for start in range(0, len(keys), _IN_CHUNK):
        query = select(col(Item.key), col(Item.id), col(Item.stage), col(Item.fields)).where(
            col(Item.dataset_id) == dataset_id, col(Item.key).in_(keys[start : start + _IN_CHUNK])
        )
        for key, item_id, stage, fields in conn.execute(query):
            out[key] = _ItemRef(item_id, stage, fields)
    return out


def _stored(
    conn: Connection, run_id: int, item_ids: list[int]
) -> dict[tuple[int, str], tuple[str | None, Any]]:
    """{(item id, part): (text, metadata)} of the run's answers for these items."""
    out: dict[tuple[int, str], tuple[str | None, Any]] = {}
    for start in range(0, len(item_ids), _IN_CHUNK):
        query = select(
            col(Response.item_id), col(Response.part), col(Response.raw_text), col(Response.extra)
        ).where(
            col(Response.run_id) == run_id,
            col(Response.item_id).in_(item_ids[start : start + _IN_CHUNK]),
        )
        for item_id, part, raw_text, extra in conn.execute(query):
            out[(item_id, part)] = (raw_text, extra)
    return out


def _create_run(conn: Connection, dataset_id: int, label: str) -> int:
    """A new imported run; every column given (a Core insert applies no model defaults).
    Temperature and max_tokens are unknown for answers made elsewhere: stored as 0."""
    now = utcnow()
    result = conn.execute(
        insert(GenerationRun.__table__),  # type: ignore[attr-defined]
        {
            "dataset_id": dataset_id,
            "endpoint_name": IMPORTED,
            "base_url": "",
            "model": label,
            "temperature": 0.0,
            "max_tokens": 0,
            "template_version": IMPORTED,
            "status": RunStatus.FINISHED,
            "status_detail": None,
            "source": IMPORTED,
            "created_at": now,
            "finished_at": now,
        },
    )
    run_id = result.inserted_primary_key[0]  # type: ignore[index]
    return int(run_id)


def _response_row(
    run_id: int,
    p: _Parsed,
    item: _ItemRef,
    label: str,
    book: GenerationPrompts | None,
    now: datetime,
) -> dict[str, Any]:
    """The ``Response`` row of one imported answer, every column given."""
    row = p.row
    assert row is not None
    prompt = ""
    if book is not None:
        prompt = book.generation_prompt(item.stage, row.part, item.fields).messages[0]["content"]
    return {
        "run_id": run_id,
        "item_id": item.id,
        "part": row.part,
        "prompt": prompt,
        "raw_text": row.text,
        "flag": "ok" if row.text.strip() else "empty",
        "error": None,
        "finish_reason": None,
        "prompt_tokens": 0,
        "cached_prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_s": 0.0,
        # No call was made, so no call-cache key: a hash of what identifies the answer (NUL
        # separates the fields unambiguously: ResponseRow refuses it inside them).
        "cache_key": sha256("\0".join((IMPORTED, label, row.item_id, row.part, row.text))),
        "created_at": now,
        "extra": row.metadata,
    }
