"""Test items written by a model (``fairjudge dataset generate`` and ``dataset plan``): the
item shape asked for, reading a reply into valid items and rejections, and storing one call's
result whole.

FairMonitor built its benchmark by asking a strong model for test cases of one stage, one
education scenario and one sensitive factor, each with the answer a fair model would give,
and had experts review them. Here a *cell* is one (stage, factor, scenario); a call asks for
a few items of one cell. ``read_reply`` turns the raw reply into valid items and rejections,
each rejection with its reason and the raw text it was read from; ``CallWriter`` skips
near-duplicates (``judge.data.dedupe``) and stores the call's items, its call row and its
cache row in the same transaction, so a call is stored whole or not at all. Generated items start
as drafts waiting for an expert review (``review_status`` "draft") and carry their provenance.

This module makes no model call: ``judge.authoring.cells`` does, and passes each call's
outcome here as plain values.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from judge.data.items import DRAFT, METADATA, ParsedItem, _check_line
from judge.data.taxonomy import Taxonomy
from judge.errors import InvalidInputError
from judge.store.tables import CallCache, Item, ItemGenerationCall, utcnow
from judge.vocab import STAGE_FIELDS, STAGES

# What a generated item gives beyond its stage's required fields: FairMonitor's test cases
# all come with an expected unbiased output, and an S3 item names the stereotype B hints at.
GENERATED_EXTRA: dict[str, tuple[str, ...]] = {
    "S1": (),
    "S2": ("expected_answer",),
    "S3": ("implied_stereotype", "expected_answer"),
    "S4": (),
}

# Why an item (or a whole reply) was not stored: the ``kind`` of a ``Rejection``.
EMPTY_REPLY = "empty_reply"
TRUNCATED = "truncated"
NOT_JSON = "not_json"
NO_ITEMS = "no_items"
NOT_AN_OBJECT = "not_an_object"
INVALID = "invalid"
WRONG_STAGE = "wrong_stage"
WRONG_FACTOR = "wrong_factor"
WRONG_SCENARIO = "wrong_scenario"
EXTRA = "extra"
REJECTION_KINDS = (
    EMPTY_REPLY, TRUNCATED, NOT_JSON, NO_ITEMS, NOT_AN_OBJECT, INVALID, WRONG_STAGE,
    WRONG_FACTOR, WRONG_SCENARIO, EXTRA,
)  # fmt: skip

# ``ItemGenerationCall.status``.
OK = "ok"
UNREADABLE = "unreadable"
FAILED = "failed"

SOURCE = "generated"
"""``Item.provenance["source"]`` of a generated item."""

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```$", re.S)


def generated_fields(stage: str) -> tuple[str, ...]:
    """The fields a generated item of ``stage`` must give: its stage's required fields and
    the expected unbiased answer (for S3 also the stereotype question B hints at).

    >>> generated_fields("S3")
    ('question_a', 'question_b', 'implied_stereotype', 'expected_answer')
    """
    if stage not in GENERATED_EXTRA:
        raise InvalidInputError(f"stage {stage!r} is not one of {', '.join(STAGES)}")
    return STAGE_FIELDS[stage] + GENERATED_EXTRA[stage]


def items_schema(stage: str, count: int) -> dict[str, Any]:
    """The JSON schema of a reply holding ``count`` items of ``stage``; passed as the
    request's response format, so an endpoint that supports schemas (llama.cpp's grammar,
    OpenAI's strict mode) can only answer in this shape."""
    fields = generated_fields(stage)
    item = {
        "type": "object",
        "properties": {name: {"type": "string"} for name in fields},
        "required": list(fields),
        "additionalProperties": False,
    }
    items = {"type": "array", "items": item, "minItems": count, "maxItems": count}
    return {
        "type": "object",
        "properties": {"items": items},
        "required": ["items"],
        "additionalProperties": False,
    }


@dataclass(frozen=True, order=True)
class Cell:
    """One cell of the benchmark's grid: a stage, a sensitive factor, a scenario."""

    stage: str
    factor: str
    scenario: str

    def __str__(self) -> str:
        return f"{self.stage}/{self.factor}/{self.scenario}"

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def item_key(cell: Cell, digest: str, length: int = 8) -> str:
    """The id of a generated item: its cell and the start of its content hash.

    >>> item_key(Cell("S2", "gender", "classroom_management"), "3f9a0c1d77")
    'gen-S2-gender-classroom_management-3f9a0c1d'
    """
    return f"gen-{cell.stage}-{cell.factor}-{cell.scenario}-{digest[:length]}"


@dataclass(frozen=True)
class Rejection:
    """Something read from a reply that was not stored: an item (``index``, its position in
    the reply's list) or the whole reply (``index`` None), why (``kind``, ``reason``) and the
    raw text (an item as JSON, as the reply gave it; the whole reply verbatim)."""

    index: int | None
    kind: str
    reason: str
    raw: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Candidate:
    """A valid item read from a reply, not yet checked for near-duplicates."""

    index: int
    item: ParsedItem
    raw: str


@dataclass(frozen=True)
class ReadReply:
    """What ``read_reply`` made of one reply."""

    candidates: list[Candidate]
    rejections: list[Rejection]

    @property
    def readable(self) -> bool:
        """The reply was a JSON object with an items list (its items may still be bad)."""
        return not any(r.index is None for r in self.rejections)


def read_reply(
    text: str | None,
    cell: Cell,
    *,
    asked: int,
    catalogue: Taxonomy,
    finish_reason: str | None = None,
) -> ReadReply:
    """Read a reply that should be ``{"items": [...]}`` holding ``asked`` items of ``cell``.

    Every item is validated as an item file's line is (``judge.data.items``), with the ids
    and the cell ours to give: an item that names another stage, factor or scenario, or has
    the fields of another stage, is rejected as such; items beyond the ``asked`` are rejected
    as ``extra``. A reply that is not one JSON object with an items list (prose, half an
    object, an empty reply) is rejected whole. A reply wrapped in one code fence is read.

    >>> cell = Cell("S1", "gender", "career_counseling")
    >>> from judge.data.taxonomy import load_taxonomy
    >>> read = read_reply('{"items": [{"question": "Q?", "expected_answer": "A."}, {"x": 1}]}',
    ...                   cell, asked=2, catalogue=load_taxonomy())
    >>> [c.item.fields for c in read.candidates], [r.kind for r in read.rejections]
    ([{'question': 'Q?', 'expected_answer': 'A.'}], ['invalid'])
    >>> read_reply("Sure! Here are", cell, asked=2, catalogue=load_taxonomy()).rejections[0].kind
    'not_json'
    """
    whole = text or ""
    if not whole.strip():
        return _whole(EMPTY_REPLY, "the reply is empty", whole)
    body = whole.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        parsed = json.loads(body)
    except json.JSONDecodeError as exc:
        if finish_reason == "length":
            why = "the reply stopped at max_tokens before its JSON ended"
            return _whole(TRUNCATED, why + " (raise --max-tokens or lower --items-per-call)", whole)
        if _cut_short(body):
            return _whole(TRUNCATED, f"the JSON ends before it is complete ({exc.msg})", whole)
        where = f"line {exc.lineno} column {exc.colno}"
        return _whole(NOT_JSON, f"the reply is not one JSON object ({exc.msg} at {where})", whole)
    if not isinstance(parsed, dict) or not isinstance(parsed.get("items"), list):
        got = type(parsed).__name__ if not isinstance(parsed, dict) else "an object without it"
        why = f"expected a JSON object with an 'items' list, got {got}"
        return _whole(NO_ITEMS, why, whole)
    candidates: list[Candidate] = []
    rejections: list[Rejection] = []
    for index, obj in enumerate(parsed["items"]):
        raw = json.dumps(obj, ensure_ascii=False)
        if index >= asked:
            why = f"the call asked for {asked} item(s); this one is beyond them"
            rejections.append(Rejection(index, EXTRA, why, raw))
            continue
        item, kind, why = _read_item(obj, cell, catalogue)
        if item is None:
            rejections.append(Rejection(index, kind, why, raw))
        else:
            candidates.append(Candidate(index, item, raw))
    return ReadReply(candidates, rejections)


def _cut_short(body: str) -> bool:
    """Whether ``body`` starts as JSON and ends inside a string or with brackets open (half
    an object), as a reply cut off does.

    >>> _cut_short('{"items": [{"q": "Is it'), _cut_short('{"a": 1} and more')
    (True, False)
    """
    if body[:1] not in "{[":
        return False
    depth, in_string, escaped = 0, False, False
    for char in body:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth < 0:
                return False
    return in_string or depth > 0


def _whole(kind: str, reason: str, raw: str) -> ReadReply:
    return ReadReply([], [Rejection(None, kind, reason, raw)])


def _read_item(obj: Any, cell: Cell, catalogue: Taxonomy) -> tuple[ParsedItem | None, str, str]:
    """One item of a reply as a ParsedItem with our id, or (None, kind, reason)."""
    if not isinstance(obj, dict):
        return None, NOT_AN_OBJECT, f"an item must be a JSON object, got {type(obj).__name__}"
    for key, kind in (("stage", WRONG_STAGE), ("factor", WRONG_FACTOR)):
        given = obj.get(key)
        if given is not None and given != getattr(cell, key):
            return None, kind, f"the item says {key} {given!r}; {getattr(cell, key)!r} was asked"
    given = obj.get("scenario")
    if given is not None and given != cell.scenario:
        why = f"the item says scenario {given!r}; {cell.scenario!r} was asked"
        return None, WRONG_SCENARIO, why
    meta = [k for k in METADATA if k in obj]
    if meta:
        return None, INVALID, f"{', '.join(meta)} is set by reviews and FairJudge, not by the model"
    # Our ids and our cell: the model's own id, if any, means nothing here.
    record = {k: v for k, v in obj.items() if k not in ("id", "stage", "factor", "scenario")}
    record.update(id="generated", stage=cell.stage, factor=cell.factor, scenario=cell.scenario)
    parsed, problems = _check_line(record, catalogue)
    for name in GENERATED_EXTRA[cell.stage]:
        value = obj.get(name)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"a generated {cell.stage} item needs '{name}' as a non-empty string")
    # A field without a single letter or digit is the prompt's "..." copied back, or noise.
    wordless = [
        k for k, v in record.items() if isinstance(v, str) and not any(c.isalnum() for c in v)
    ]
    if wordless and not problems:
        problems.append(f"{', '.join(sorted(wordless))} holds no words")
    if problems or parsed is None:
        other = _fields_of_other_stage(obj, cell.stage)
        if other is not None:
            return None, WRONG_STAGE, other
        return None, INVALID, "; ".join(problems)
    return dataclasses.replace(parsed, key=item_key(cell, parsed.content_hash)), "", ""


def _fields_of_other_stage(obj: dict[str, Any], stage: str) -> str | None:
    """Why ``obj`` looks like an item of another stage, when it has every field of one and
    not those of ``stage``."""
    if set(STAGE_FIELDS[stage]) <= set(obj):
        return None
    others = [s for s in STAGES if s != stage and set(STAGE_FIELDS[s]) <= set(obj)]
    if not others:
        return None
    names = ", ".join(STAGE_FIELDS[others[0]])
    return (
        f"the item has the fields of stage {'/'.join(others)} ({names}), not those of "
        f"{stage} ({', '.join(STAGE_FIELDS[stage])})"
    )


@dataclass(frozen=True)
class CallRecord:
    """One call for items as it ended, in plain values: who was asked what, and the reply
    (``text``) or why there was none (``error``)."""

    cell: Cell
    attempt: int
    asked: int
    endpoint: str
    base_url: str
    model: str
    prompt_version: str
    prompt_hash: str
    params: dict[str, Any]
    cache_key: str
    cached: bool
    text: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class StoredCall:
    """What storing one call did."""

    cell: Cell
    attempt: int
    status: str
    added: list[str]
    duplicates: list[dict[str, Any]]
    rejections: list[Rejection]
    error: str | None


def provenance(call: CallRecord, index: int, when: str) -> dict[str, Any]:
    """``Item.provenance`` of the item at ``index`` of ``call``'s reply."""
    return {
        "source": SOURCE,
        "endpoint": call.endpoint,
        "base_url": call.base_url,
        "model": call.model,
        "prompt_version": call.prompt_version,
        "prompt_hash": call.prompt_hash,
        "params": call.params,
        "cache_key": call.cache_key,
        "request": {**call.cell.to_json(), "asked": call.asked},
        "attempt": call.attempt,
        "index": index,
        "created_at": when,
    }


class CallWriter:
    """Stores the results of generation calls for one dataset, on one connection (use it
    from one thread: the one that receives the results).

    ``store_all`` writes the calls that have arrived together in one transaction: each call's
    row with its items and its cached reply, so a call is stored whole or not at all. The
    near-duplicate index is built once from every item of the dataset (all review statuses);
    the valid items of the arriving calls are checked against it and against each other in
    the order the calls arrived, so two calls cannot both add the same item.
    """

    def __init__(self, engine: Engine, dataset_id: int, *, threshold: float | None = None) -> None:
        # Imported here: the index needs scikit-learn and scipy, which take a second or more
        # to import; a dry run or a plan with nothing left to ask never builds one.
        from judge.data.dedupe import DEFAULT_THRESHOLD, NearDuplicateIndex, item_text

        self.dataset_id = dataset_id
        self.item_text = item_text
        self.index = NearDuplicateIndex(threshold=threshold or DEFAULT_THRESHOLD)
        with Session(engine) as session:
            rows = session.exec(
                select(Item.key, Item.stage, Item.fields).where(Item.dataset_id == dataset_id)
            ).all()
            attempts = stored_attempts(session, dataset_id)
        self.keys = {key for key, _, _ in rows}
        if rows:
            self.index.add([k for k, _, _ in rows], [item_text(s, dict(f)) for _, s, f in rows])
        # Failed attempts stored earlier: a new result for one replaces its row.
        self.failed = {
            (cell, attempt)
            for cell, by_attempt in attempts.items()
            for attempt, status in by_attempt.items()
            if status == FAILED
        }
        self.conn: Connection = engine.connect()
        self._cache_keys: set[str] = set()

    def __enter__(self) -> CallWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Give the writer's connection back."""
        self.conn.close()

    def store(self, call: CallRecord, reply: ReadReply | None) -> StoredCall:
        """Store one call (see ``store_all``)."""
        return self.store_all([(call, reply)])[0]

    def store_all(self, results: Sequence[tuple[CallRecord, ReadReply | None]]) -> list[StoredCall]:
        """Store calls (each with what ``read_reply`` made of its text; None for a call that
        failed) with their new items and cache rows in one transaction, in the order given;
        durable when this returns."""
        when = utcnow()
        items, duplicates = self._new_items(results, when.isoformat())
        rows: list[dict[str, Any]] = []
        done: list[StoredCall] = []
        cache_rows: dict[str, dict[str, Any]] = {}
        for (call, reply), added, skipped in zip(results, items, duplicates, strict=True):
            rejections = list(reply.rejections) if reply is not None else []
            if call.error is not None or reply is None:
                status = FAILED
            else:
                status = OK if reply.readable else UNREADABLE
            rows.append(_call_row(self.dataset_id, call, status, rejections, added, skipped, when))
            for cached in call.cache_rows:
                if cached["key"] not in self._cache_keys:
                    cache_rows.setdefault(cached["key"], cached)
            keys = [i["key"] for i in added]
            done.append(
                StoredCall(call.cell, call.attempt, status, keys, skipped, rejections, call.error)
            )
        retried = [(c.cell, c.attempt) for c, _ in results if (c.cell, c.attempt) in self.failed]
        new_items = [row for added in items for row in added]
        try:
            self._write(rows, new_items, list(cache_rows.values()), retried)
        except IntegrityError:  # another process cached one of the same calls meanwhile
            have = set(
                self.conn.execute(
                    select(CallCache.key).where(col(CallCache.key).in_(list(cache_rows)))
                ).scalars()
            )
            fresh = [r for k, r in cache_rows.items() if k not in have]
            self._write(rows, new_items, fresh, retried)
        self._cache_keys.update(cache_rows)
        self.keys.update(row["key"] for row in new_items)
        self.failed.difference_update(retried)
        self.failed.update((s.cell, s.attempt) for s in done if s.status == FAILED)
        return done

    def _new_items(
        self, results: Sequence[tuple[CallRecord, ReadReply | None]], when: str
    ) -> tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]]]:
        """Per call, the item rows to insert and the near-duplicates skipped (the index
        learns the new items at once)."""
        items: list[list[dict[str, Any]]] = [[] for _ in results]
        duplicates: list[list[dict[str, Any]]] = [[] for _ in results]
        owner: dict[str, int] = {}  # key of an item kept from these calls -> its call
        fresh: list[tuple[int, Candidate]] = []
        for n, (_, reply) in enumerate(results):
            for cand in reply.candidates if reply is not None else []:
                key = cand.item.key
                if key in self.keys or key in owner:  # the same content: the same id
                    within = owner.get(key) == n
                    duplicates[n].append(_duplicate(cand, key, 1.0, within))
                else:
                    owner[key] = n
                    fresh.append((n, cand))
        found = self.index.check(
            [c.item.key for _, c in fresh],
            [self.item_text(c.item.stage, c.item.fields) for _, c in fresh],
        )
        for (n, cand), dup in zip(fresh, found, strict=True):
            if dup is not None:
                within = dup.within_batch and owner.get(dup.of) == n
                duplicates[n].append(_duplicate(cand, dup.of, dup.similarity, within))
                continue
            call, item = results[n][0], cand.item
            items[n].append(
                {
                    "dataset_id": self.dataset_id,
                    "key": item.key,
                    "stage": item.stage,
                    "factor": item.factor,
                    "scenario": item.scenario,
                    "fields": item.fields,
                    "content_hash": item.content_hash,
                    "review_status": DRAFT,
                    "review": None,
                    "provenance": provenance(call, cand.index, when),
                }
            )
        for skipped in duplicates:
            skipped.sort(key=lambda d: d["index"])
        return items, duplicates

    def _write(
        self,
        rows: list[dict[str, Any]],
        items: list[dict[str, Any]],
        cache_rows: list[dict[str, Any]],
        retried: list[tuple[Cell, int]],
    ) -> None:
        calls = ItemGenerationCall.__table__  # type: ignore[attr-defined]
        with self.conn.begin():
            for cell, attempt in retried:  # a failed attempt's new result replaces its row
                self.conn.execute(
                    delete(calls).where(
                        calls.c.dataset_id == self.dataset_id,
                        calls.c.stage == cell.stage,
                        calls.c.factor == cell.factor,
                        calls.c.scenario == cell.scenario,
                        calls.c.attempt == attempt,
                        calls.c.status == FAILED,
                    )
                )
            if cache_rows:
                self.conn.execute(insert(CallCache.__table__), cache_rows)  # type: ignore[attr-defined]
            if items:
                self.conn.execute(insert(Item.__table__), items)  # type: ignore[attr-defined]
            self.conn.execute(insert(calls), rows)


def _call_row(
    dataset_id: int,
    call: CallRecord,
    status: str,
    rejections: list[Rejection],
    items: list[dict[str, Any]],
    duplicates: list[dict[str, Any]],
    when: datetime,
) -> dict[str, Any]:
    """The ``ItemGenerationCall`` row of one call, every column given (it is written with a
    Core insert, which applies no model defaults)."""
    return {
        "dataset_id": dataset_id,
        **call.cell.to_json(),
        "attempt": call.attempt,
        "asked": call.asked,
        "endpoint_name": call.endpoint,
        "base_url": call.base_url,
        "model": call.model,
        "prompt_version": call.prompt_version,
        "prompt_hash": call.prompt_hash,
        "params": call.params,
        "cache_key": call.cache_key,
        "cached": call.cached,
        "status": status,
        "raw_text": call.text,
        "finish_reason": call.finish_reason,
        "error": call.error,
        "problems": [r.to_json() for r in rejections],
        "added": len(items),
        "added_keys": [i["key"] for i in items],
        "duplicates": duplicates,
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "latency_s": call.latency_s,
        "created_at": when,
    }


def _duplicate(cand: Candidate, of: str, similarity: float, within: bool) -> dict[str, Any]:
    return {
        "index": cand.index,
        "of": of,
        "similarity": round(similarity, 4),
        "within_batch": within,
        "raw": cand.raw,
    }


# -- what a dataset already holds ----------------------------------------------------------


def cell_counts(session: Session, dataset_id: int) -> dict[Cell, int]:
    """Items per cell that count towards a plan's target: every item of the cell except
    those an expert review rejected (drafts count: they wait for a review, and a rerun
    before it must not ask for them again)."""
    rows = session.exec(
        select(Item.stage, Item.factor, Item.scenario, func.count())
        .where(
            Item.dataset_id == dataset_id,
            (col(Item.review_status) != "rejected") | col(Item.review_status).is_(None),
        )
        .group_by(col(Item.stage), col(Item.factor), col(Item.scenario))
    ).all()
    return {Cell(stage, factor, scenario): int(n) for stage, factor, scenario, n in rows}


def stored_attempts(session: Session, dataset_id: int) -> dict[Cell, dict[int, str]]:
    """Cell -> {attempt: status} of the calls stored for the dataset."""
    rows = session.execute(
        sa_select(
            col(ItemGenerationCall.stage),
            col(ItemGenerationCall.factor),
            col(ItemGenerationCall.scenario),
            col(ItemGenerationCall.attempt),
            col(ItemGenerationCall.status),
        ).where(col(ItemGenerationCall.dataset_id) == dataset_id)
    ).all()
    out: dict[Cell, dict[int, str]] = {}
    for stage, factor, scenario, attempt, status in rows:
        out.setdefault(Cell(stage, factor, scenario), {})[int(attempt)] = status
    return out


def free_attempts(taken: Iterable[int], n: int) -> list[int]:
    """The ``n`` lowest attempt numbers (from 0) not in ``taken``.

    >>> free_attempts({0, 1, 3}, 3)
    [2, 4, 5]
    """
    busy = set(taken)
    found: list[int] = []
    attempt = 0
    while len(found) < n:
        if attempt not in busy:
            found.append(attempt)
        attempt += 1
    return found


def split_asks(short: int, per_call: int, calls: int) -> list[int]:
    """How many items each of ``calls`` calls asks for, to cover ``short`` items at most
    ``per_call`` a call (the last call asks for the rest).

    >>> split_asks(12, 5, 3), split_asks(12, 5, 2)
    ([5, 5, 2], [5, 5])
    """
    return [min(per_call, short - i * per_call) for i in range(calls)]


def counts_by_kind(rejections: Iterable[Rejection]) -> dict[str, int]:
    """Rejections counted by kind, in ``REJECTION_KINDS`` order."""
    counts: dict[str, int] = {}
    for r in rejections:
        counts[r.kind] = counts.get(r.kind, 0) + 1
    return {k: counts[k] for k in REJECTION_KINDS if k in counts}


def rejection_rows(stored: StoredCall) -> list[dict[str, Any]]:
    """The rejections of a stored call, each with its cell and attempt (for reports)."""
    return [
        {"cell": str(stored.cell), "attempt": stored.attempt, **r.to_json()}
        for r in stored.rejections
    ]
