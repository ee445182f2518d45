"""Counterfactual copies of a judge run's answers, stored as a generation run of their own.

A copy holds, for each item the judge run judged, every answer part with the chosen sensitive
words swapped (``judge.trust.swaps.swap_text``) and nothing else changed. Items in
which no part has a word to swap are skipped and counted. The copy is an ordinary generation
run (``source = 'counterfactual'``, ``derived_from`` the original run), so judging it uses the
same machinery, cache, resume and reports as any other run; each copied answer records in
``Response.extra`` the answer it was copied from and what was swapped.

What is swapped is chosen (``swap_in``): the answers, the questions (every text field of
the item the judge is shown beside the answers: the question, the stories, the expected
answer), or both (the default). A judge can be swayed by the question's wording as much as by
the answer's, and a swap of the answers alone leaves a question's words as they were, so it
cannot see that. Swapped item fields are stored on the copy's first answer part of the item
(``Response.extra['item_fields']``, with what changed in ``extra['question_swapped']``), and
judging a copy reads them in place of the item's own (``judge.grading.judging``).

A copy is identified by the judge run, the swap kinds, the pairs themselves (their hash), what
was swapped and the item limit: asking again finds the same copy. A copy made before the
choice existed swapped the answers only, and is read as such.
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
from judge.store.tables import GenerationRun, Item, Judgment, Response, utcnow
from judge.trust.swaps import Change, Swap, Swapped, load_swaps, swap_text
from judge.vocab import RunStatus

COUNTERFACTUAL = "counterfactual"
"""``GenerationRun.source`` and ``derivation['kind']`` of a counterfactual copy."""
SWAP_IN = ("answers", "questions", "both")
"""What a copy swaps: the answers, the items' questions (their text fields), or both."""
LEGACY_SWAP_IN = "answers"
"""What a copy recorded without ``swap_in`` swapped (copies made before the choice)."""


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
    swap_in: str = LEGACY_SWAP_IN


def swaps_hash(swaps: Sequence[Swap]) -> str:
    """The identity of the pairs used: their kinds and words, in a fixed order."""
    return content_hash(sorted([s.kind, s.a, s.b] for s in swaps))[:16]


def derivation(
    judge_run_id: int,
    kinds: Sequence[str],
    swaps: Sequence[Swap],
    limit: int | None,
    swap_in: str = "both",
) -> dict[str, Any]:
    """What identifies a copy (``GenerationRun.derivation`` holds this and the counts)."""
    _check_swap_in(swap_in)
    return {
        "kind": COUNTERFACTUAL,
        "judge_run_id": judge_run_id,
        "swap_kinds": sorted(kinds),
        "swaps_sha256": swaps_hash(swaps),
        "limit": limit,
        "swap_in": swap_in,
    }


def _check_swap_in(swap_in: str) -> None:
    if swap_in not in SWAP_IN:
        raise InvalidInputError(f"swap_in must be one of {', '.join(SWAP_IN)}, got {swap_in!r}")


def _identity(d: dict[str, Any] | None) -> tuple[Any, ...] | None:
    if not d:
        return None
    d = {"swap_in": LEGACY_SWAP_IN, **d}
    keys = ("kind", "judge_run_id", "swap_kinds", "swaps_sha256", "limit", "swap_in")
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
    swap_in: str = "both",
) -> Copy:
    """The counterfactual copy of a judge run's answers with ``swaps`` applied (in the
    answers, the questions or both: ``swap_in``), made and stored in one transaction if it
    does not exist yet. Refuses a judge run with no scored judgment and a copy with nothing
    to swap (InvalidInputError saying what to change)."""
    wanted = derivation(judge_run_id, kinds, swaps, limit, swap_in)
    with session_scope(engine) as session:
        found = find_copy(session, judge_run_id, kinds, swaps, limit, swap_in)
        if found is not None:
            return _copy_of(found, created=False)
        source, built = build_copy(session, judge_run_id, kinds, swaps, limit, swap_in)
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
    swap_in: str = "both",
) -> GenerationRun | None:
    """The copy with this identity, if it was made already (NotFoundError: no judge run)."""
    wanted = _identity(derivation(judge_run_id, kinds, swaps, limit, swap_in))
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
    swap_in: str = "both",
) -> tuple[GenerationRun, Built]:
    """The judge run's generation run and the copy of its answers with ``swaps`` applied,
    read only (``make_copy`` stores it; a dry run only counts what judging it would send).
    InvalidInputError for a run with no scored judgment and a copy with nothing to swap."""
    if not swaps:
        raise InvalidInputError("no swap pairs chosen; pick --swap names, gender, race or all")
    _check_swap_in(swap_in)
    in_answers, in_questions = swap_in in ("answers", "both"), swap_in in ("questions", "both")
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
    fields = _item_fields(session, scored) if in_questions else {}
    rows: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    copied = skipped = 0
    for item_id in scored:
        if limit is not None and copied >= limit:
            break
        parts = answers.get(item_id, [])
        done = [
            (r, swap_text(r.raw_text or "", swaps) if in_answers else Swapped(r.raw_text or "", ()))
            for r in parts
        ]
        asked, asked_changes = _swap_fields(fields.get(item_id, {}), swaps)
        if not parts or not (any(s.changed for _, s in done) or asked_changes):
            skipped += 1
            continue
        copied += 1
        for change in asked_changes:
            counts[f"{change.before} -> {change.after}"] += change.count
        for i, (response, swapped) in enumerate(done):
            for change in swapped.changes:
                counts[f"{change.before} -> {change.after}"] += change.count
            row = _row(response, swapped, swap_in)
            if i == 0 and asked_changes:
                row["extra"]["item_fields"] = asked
                row["extra"]["question_swapped"] = [
                    [c.before, c.after, c.count] for c in asked_changes
                ]
            rows.append(row)
    if not copied:
        what = {
            "answers": f"answers judge run {judge_run_id} scored",
            "questions": f"questions of the items judge run {judge_run_id} scored",
            "both": f"answers judge run {judge_run_id} scored, nor their questions,",
        }[swap_in]
        raise InvalidInputError(
            f"none of the {len(scored)} {what} holds a word of the chosen swaps "
            f"({', '.join(sorted(kinds))}); choose other kinds (--swap all), swap elsewhere "
            "(--swap-in both), or add pairs to the swap list (--swaps FILE)"
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


def _item_fields(session: Session, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Item -> its fields, for the items a copy may swap the questions of."""
    out: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), _IN_LIMIT):  # bounded IN lists
        chunk = list(ids[start : start + _IN_LIMIT])
        query = columns(col(Item.id), col(Item.fields)).where(col(Item.id).in_(chunk))
        for item_id, item_fields in session.execute(query):
            out[item_id] = dict(item_fields or {})
    return out


def _swap_fields(
    fields: dict[str, Any], swaps: Sequence[Swap]
) -> tuple[dict[str, Any], list[Change]]:
    """The item's text fields with the pairs swapped (other fields as they are), and every
    word swapped, in field-name order."""
    out: dict[str, Any] = {}
    changes: list[Change] = []
    for name in sorted(fields):
        value = fields[name]
        if isinstance(value, str):
            done = swap_text(value, swaps)
            value = done.text
            changes += done.changes
        out[name] = value
    return out, changes


_IN_LIMIT = 5000


def _row(response: Any, swapped: Any, swap_in: str = LEGACY_SWAP_IN) -> dict[str, Any]:
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
        "cached_prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_s": 0.0,
        "cache_key": "",
        "created_at": utcnow(),
        "extra": {
            "copied_from": response.id,
            "swapped": [[c.before, c.after, c.count] for c in swapped.changes],
            "swap_in": swap_in,
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
        swap_in=str(d.get("swap_in", LEGACY_SWAP_IN)),
    )
