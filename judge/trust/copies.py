"""Counterfactual copies of a judge run's answers, stored as a generation run of their own.

A copy holds, for each item the judge run judged, every answer part with the chosen sensitive
words swapped (``judge.trust.swaps.swap_text``) and nothing else changed. Items in
which no part has a word to swap are skipped and counted. The copy is an ordinary generation
run (``source = 'counterfactual'``, ``derived_from`` the original run), so judging it uses the
same machinery, cache, resume and reports as any other run; each copied answer records in
``Response.extra`` the answer it was copied from and what was swapped.

A copy is identified by the judge run, the swap kinds, the pairs themselves (their hash) and
the item limit: asking again finds the same copy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert
from sqlalchemy import select as columns
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.errors import InvalidInputError
from judge.hashing import content_hash
from judge.store.engine import session_scope
from judge.store.queries import get_generation_run, get_judge_run
from judge.store.tables import GenerationRun, Judgment, Response, utcnow
from judge.trust.swaps import Swap, load_swaps, swap_text
from judge.vocab import RunStatus

COUNTERFACTUAL = "counterfactual"
"""``GenerationRun.source`` and ``derivation['kind']`` of a counterfactual copy."""


@dataclass(frozen=True)
class Copy:
    """A counterfactual copy: its generation run, the items copied and skipped, and how
    often each word was swapped ("he -> she": 12)."""

    run_id: int
    judge_run_id: int
    swap_kinds: tuple[str, ...]
    items_copied: int
    items_skipped: int
    swaps: dict[str, int]
    created: bool


def swaps_hash(swaps: Sequence[Swap]) -> str:
    """The identity of the pairs used: their kinds and words, in a fixed order."""
    return content_hash(sorted([s.kind, s.a, s.b] for s in swaps))[:16]


def derivation(
    judge_run_id: int, kinds: Sequence[str], swaps: Sequence[Swap], limit: int | None
) -> dict[str, Any]:
    """What identifies a copy (``GenerationRun.derivation`` holds this and the counts)."""
    return {
        "kind": COUNTERFACTUAL,
        "judge_run_id": judge_run_id,
        "swap_kinds": sorted(kinds),
        "swaps_sha256": swaps_hash(swaps),
        "limit": limit,
    }


def _identity(d: dict[str, Any] | None) -> tuple[Any, ...] | None:
    if not d:
        return None
    keys = ("kind", "judge_run_id", "swap_kinds", "swaps_sha256", "limit")
    return tuple(
        tuple(d.get(k)) if isinstance(d.get(k), list) else d.get(k)  # type: ignore[arg-type]
        for k in keys
    )


def find_copies(session: Session, judge_run_id: int) -> list[GenerationRun]:
    """Every counterfactual copy made of a judge run's answers, oldest first."""
    jrun = get_judge_run(session, judge_run_id)
    runs = session.exec(
        select(GenerationRun)
        .where(GenerationRun.derived_from == jrun.generation_run_id)
        .order_by(col(GenerationRun.id))
    ).all()
    return [
        r
        for r in runs
        if (r.derivation or {}).get("kind") == COUNTERFACTUAL
        and (r.derivation or {}).get("judge_run_id") == judge_run_id
    ]


def make_copy(
    engine: Engine,
    judge_run_id: int,
    kinds: Sequence[str],
    swaps: Sequence[Swap],
    *,
    limit: int | None = None,
) -> Copy:
    """The counterfactual copy of a judge run's answers with ``swaps`` applied, made and
    stored in one transaction if it does not exist yet. Refuses a judge run with no scored
    judgment and a copy with nothing to swap (InvalidInputError saying what to change)."""
    wanted = derivation(judge_run_id, kinds, swaps, limit)
    with session_scope(engine) as session:
        found = find_copy(session, judge_run_id, kinds, swaps, limit)
        if found is not None:
            return _copy_of(found, created=False)
        source, built = build_copy(session, judge_run_id, kinds, swaps, limit)
        run = GenerationRun(
            dataset_id=source.dataset_id,
            endpoint_name=source.endpoint_name,
            base_url=source.base_url,
            model=source.model,
            temperature=source.temperature,
            max_tokens=source.max_tokens,
            template_version=source.template_version,
            status=RunStatus.FINISHED,
            source=COUNTERFACTUAL,
            derived_from=source.id,
            derivation={
                **wanted,
                "items_copied": built.copied,
                "items_skipped": built.skipped,
                "swaps": dict(built.counts.most_common()),
                # the pairs themselves: which word is on which side, for reading each
                # copied answer's direction later (not part of the identity above)
                "pairs": [[s.kind, s.a, s.b] for s in swaps],
            },
            finished_at=utcnow(),
        )
        session.add(run)
        session.flush()
        for row in built.rows:
            row["run_id"] = run.id
        session.connection().execute(insert(Response.__table__), built.rows)  # type: ignore[attr-defined]
        return _copy_of(run, created=True)


def find_copy(
    session: Session,
    judge_run_id: int,
    kinds: Sequence[str],
    swaps: Sequence[Swap],
    limit: int | None,
) -> GenerationRun | None:
    """The copy with this identity, if it was made already (NotFoundError: no judge run)."""
    wanted = _identity(derivation(judge_run_id, kinds, swaps, limit))
    for run in find_copies(session, judge_run_id):
        if _identity(run.derivation) == wanted:
            return run
    return None


@dataclass(frozen=True)
class Built:
    """A copy's answers before they are stored: the rows (``run_id`` not set), the items
    copied and skipped, and how often each word was swapped."""

    rows: list[dict[str, Any]]
    copied: int
    skipped: int
    counts: Counter[str]


def build_copy(
    session: Session,
    judge_run_id: int,
    kinds: Sequence[str],
    swaps: Sequence[Swap],
    limit: int | None,
) -> tuple[GenerationRun, Built]:
    """The judge run's generation run and the copy of its answers with ``swaps`` applied,
    read only (``make_copy`` stores it; a dry run only counts what judging it would send).
    InvalidInputError for a run with no scored judgment and a copy with nothing to swap."""
    if not swaps:
        raise InvalidInputError("no swap pairs chosen; pick --swap names, gender, race or all")
    jrun = get_judge_run(session, judge_run_id)
    scored = (
        session.execute(
            columns(col(Judgment.item_id))
            .where(col(Judgment.judge_run_id) == judge_run_id, col(Judgment.status) == "scored")
            .distinct()
            .order_by(col(Judgment.item_id))
        )
        .scalars()
        .all()
    )
    if not scored:
        raise InvalidInputError(
            f"judge run {judge_run_id} has no scored judgment, so there is nothing to "
            "compare a counterfactual with; judge the run first (`fairjudge judge`), or "
            "pick a run that scored some answers (`fairjudge runs`)"
        )
    source = get_generation_run(session, jrun.generation_run_id)
    answers: dict[int, list[Any]] = {}
    for response in session.execute(
        columns(*(col(getattr(Response, name)) for name in _COPIED))
        .where(col(Response.run_id) == source.id)
        .order_by(col(Response.item_id), col(Response.part))
    ):  # plain rows, not ORM objects: a run has tens of thousands of answers
        answers.setdefault(response.item_id, []).append(response)
    rows: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    copied = skipped = 0
    for item_id in scored:
        if limit is not None and copied >= limit:
            break
        parts = answers.get(item_id, [])
        done = [(r, swap_text(r.raw_text or "", swaps)) for r in parts]
        if not any(s.changed for _, s in done):
            skipped += 1
            continue
        copied += 1
        for response, swapped in done:
            for change in swapped.changes:
                counts[f"{change.before} -> {change.after}"] += change.count
            rows.append(_row(response, swapped))
    if not copied:
        raise InvalidInputError(
            f"none of the {len(scored)} answers judge run {judge_run_id} scored holds a "
            f"word of the chosen swaps ({', '.join(sorted(kinds))}); choose other kinds "
            "(--swap all), or add pairs to the swap list (--swaps FILE)"
        )
    return source, Built(rows, copied, skipped, counts)


def copy_swaps(d: dict[str, Any] | None) -> tuple[Swap, ...] | None:
    """The pairs a copy was made with: recorded in its derivation, or for a copy made before
    they were recorded, the bundled list's pairs of its kinds if their hash matches; None
    when they cannot be known (a list of one's own, since changed)."""
    d = d or {}
    if d.get("pairs"):
        return tuple(Swap(str(k), str(a), str(b)) for k, a, b in d["pairs"])
    try:
        bundled = load_swaps().select(d.get("swap_kinds", ()))
    except InvalidInputError:
        return None
    return bundled if swaps_hash(bundled) == d.get("swaps_sha256") else None


_COPIED = ("id", "item_id", "part", "prompt", "raw_text", "flag", "error", "finish_reason")


def _row(response: Any, swapped: Any) -> dict[str, Any]:
    """The copied answer: the same row with the swapped text and no call of its own."""
    return {
        "item_id": response.item_id,
        "part": response.part,
        "prompt": response.prompt,
        "raw_text": swapped.text if response.raw_text is not None else None,
        "flag": response.flag,
        "error": response.error,
        "finish_reason": response.finish_reason,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_s": 0.0,
        "cache_key": "",
        "created_at": utcnow(),
        "extra": {
            "copied_from": response.id,
            "swapped": [[c.before, c.after, c.count] for c in swapped.changes],
        },
    }


def _copy_of(run: GenerationRun, *, created: bool) -> Copy:
    d = run.derivation or {}
    assert run.id is not None
    return Copy(
        run_id=run.id,
        judge_run_id=int(d["judge_run_id"]),
        swap_kinds=tuple(d.get("swap_kinds", ())),
        items_copied=int(d.get("items_copied", 0)),
        items_skipped=int(d.get("items_skipped", 0)),
        swaps=dict(d.get("swaps", {})),
        created=created,
    )
