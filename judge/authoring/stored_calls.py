"""Storing a generated-items call whole: its items (near-duplicates skipped), its call row and
its cache row in one transaction, with each item's provenance; and the stored cells and
attempts a plan reads to know what is left to ask."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from judge.authoring.replies import (
    FAILED,
    OK,
    REJECTION_KINDS,
    SOURCE,
    UNREADABLE,
    Candidate,
    Cell,
    ReadReply,
    Rejection,
)
from judge.data.items import DRAFT
from judge.store.tables import CallCache, Item, ItemGenerationCall, utcnow


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
    cached_prompt_tokens: int = 0
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
        "cached_prompt_tokens": call.cached_prompt_tokens,
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
