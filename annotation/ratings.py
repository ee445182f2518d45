"""Human ratings in long format: reading CSV files and importing them into the store.

A ratings file has the header ``item_id,rubric,rater,score`` and optionally ``rationale``;
``item_id`` is the item's id in its dataset. The rubric is a built-in one (FairMonitor's, 1-5)
or one registered with ``fairjudge rubrics add`` (its latest version), and each score lies on
that rubric's own scale: 1..N for a rubric of N levels. Import is all or nothing: any bad line
(unknown item, unknown rubric, a rubric the item's stage is not judged with, a score off the
rubric's scale, a repeated rating) rejects the whole file with every problem listed by line.
Ratings are stored in an import batch (``batch``, "default" unless given; the store's scope
``import:<batch>``), apart from any campaign's ratings of the same answers. Re-importing into
the same batch adds nothing; a changed score is refused unless ``replace`` is set.

``import_rating_rows`` is the same import for rows that did not come from a file (the API's
``POST /api/v1/ratings``): one validation, the same messages, problems numbered by row.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from annotation.errors import RatingsError
from judge.data.items import text_lines
from judge.grading.rubrics import RubricSet
from judge.store.queries import get_generation_run
from judge.store.rating_scope import import_scope
from judge.store.tables import HumanRating, Item, Response
from judge.vocab import SCALE, Scale

RATING_COLUMNS = ("item_id", "rubric", "rater", "score")
DEFAULT_BATCH = "default"  # the import batch of every import that names none


def read_csv_rows(path: str | Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) pairs of a CSV file whose header holds ``required``.

    The file is UTF-8 (a byte-order mark is allowed). A line that is not UTF-8, a quote that
    is never closed, or a row too short to hold a required cell raises RatingsError naming
    the line; every cell of a returned row is a string.
    """
    path = Path(path)
    if not path.exists():
        raise RatingsError(f"file {path} not found")
    reader = csv.DictReader(
        (line for _, line in text_lines(path, RatingsError)), restval=None, strict=True
    )
    rows: list[tuple[int, dict[str, str]]] = []
    short: list[tuple[int, str]] = []
    start = 1
    try:
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise RatingsError(
                f"{path} needs the column(s) {', '.join(missing)} in its header "
                f"(found: {', '.join(header) or 'no header'})"
            )
        start = reader.line_num + 1
        for row in reader:
            absent = [c for c in required if row.get(c) is None]
            if absent:
                cells = len([v for k, v in row.items() if k is not None and v is not None])
                short.append(
                    (
                        start,
                        f"{', '.join(absent)} {'is' if len(absent) == 1 else 'are'} missing "
                        f"(the row has {cells} of the header's {len(header)} cells)",
                    )
                )
            else:
                rows.append((start, {k: v or "" for k, v in row.items() if k is not None}))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise RatingsError(
            f"{path} line {start} is not valid CSV ({exc}); close or remove the stray quote"
        ) from None
    if short:
        raise RatingsError(f"{path} has problems; fix these lines:", short)
    if not rows:
        raise RatingsError(f"{path} has a header but no rows")
    return rows


def parse_score(text: str | None, scale: Scale = SCALE) -> float:
    """A score within ``scale`` (means allowed; on a scale with named levels, a level's name
    is its number), or ValueError with the reason.

    >>> parse_score("2.5"), parse_score("0", Scale(0, 3))
    (2.5, 0.0)
    >>> parse_score("Good", Scale.parse("poor,good"))
    2.0
    >>> parse_score("0")
    Traceback (most recent call last):
    ...
    ValueError: score '0' is outside the 1-5 scale
    """
    if text is None or not text.strip():
        raise ValueError("score is missing")
    named = scale.value_of(text)
    if named is not None:
        return float(named)
    try:
        value = float(text.strip())
    except ValueError:
        levels = f" or a level of the {scale} scale" if scale.names else ""
        raise ValueError(f"score {text!r} is not a number{levels}") from None
    if not scale.within(value):
        raise ValueError(f"score {text!r} is outside the {scale} scale")
    return value


@dataclass(frozen=True)
class RatingsImport:
    run: int
    added: int
    unchanged: int
    replaced: int
    raters: int
    items: int


class RatingRowsError(RatingsError):
    """Ratings were refused; ``problems`` lists ``(number, reason)``, the number being the
    line of a file or the position of a row in a batch (from 1), as ``unit`` says."""


def rating_rubrics(session: Session, builtin: RubricSet) -> RubricSet:
    """The rubrics people may rate with: ``builtin`` (FairMonitor's) and the latest version of
    every rubric registered with ``fairjudge rubrics add``. Ratings are keyed by rubric name,
    so the latest version decides a registered rubric's scale."""
    from judge.grading.registry import list_registered

    chosen = dict(builtin.rubrics)
    for registered in list_registered(session):
        chosen.setdefault(registered.name, registered.rubric)
    return RubricSet(builtin.version, chosen, "built-in and registered")


def registered_scales(session: Session) -> dict[str, Scale]:
    """Registered rubric name -> the scale of its latest version (1..N for N levels): what
    its ratings and judge scores lie on."""
    from judge.grading.registry import list_registered

    return {r.name: r.rubric.scale for r in list_registered(session)}


def import_ratings(
    session: Session,
    path: str | Path,
    generation_run_id: int,
    rubrics: RubricSet,
    *,
    replace: bool = False,
    source: str = "import",
    scale: Scale | None = None,
    batch: str | None = None,
) -> RatingsImport:
    """Import a ratings file for a generation run; all or nothing, problems named by line.

    ``rubrics`` are the rubrics ratings may name (``rating_rubrics``: built-in and
    registered); each score must lie on its rubric's scale. ``scale``, when given, says how
    the file writes scores (named levels such as ``poor,fair,good``) and must have the same
    levels as every rubric the file rates."""
    rows = read_csv_rows(path, RATING_COLUMNS)
    return import_rating_rows(
        session,
        rows,
        generation_run_id,
        rubrics,
        replace=replace,
        source=source,
        scale=scale,
        batch=batch or DEFAULT_BATCH,
        where=str(path),
        unit="line",
    )


Parsed = dict[tuple[int, str, str], tuple[float, str | None, int]]
"""Rows read and checked: (item id, rubric, rater) -> (score, rationale, row number)."""


def import_rating_rows(
    session: Session,
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    generation_run_id: int,
    rubrics: RubricSet,
    *,
    replace: bool = False,
    source: str = "import",
    scale: Scale | None = None,
    batch: str = DEFAULT_BATCH,
    where: str = "the batch",
    unit: str = "row",
) -> RatingsImport:
    """``import_ratings`` for (number, row) pairs, each row holding ``item_id``, ``rubric``,
    ``rater``, ``score`` and optionally ``rationale`` (numbers are read as their text); the
    problems name each row by ``unit`` and its number."""
    rows = [(n, {k: "" if v is None else str(v) for k, v in row.items()}) for n, row in rows]
    parsed, problems = _parse_rows(session, rows, generation_run_id, rubrics, scale, unit)
    existing = {
        (r.item_id, r.rubric, r.rater): r
        for r in session.exec(
            select(HumanRating).where(
                HumanRating.generation_run_id == generation_run_id,
                HumanRating.scope == import_scope(batch),
            )
        )
    }
    if not replace:
        problems += _conflicts(parsed, existing)
    if problems:
        raise RatingRowsError(
            f"{where} was not imported; fix these {unit}s and try again:",
            sorted(problems),
            unit=unit,
        )
    added, unchanged, replaced = _store_parsed(
        session, parsed, existing, generation_run_id, source, batch
    )
    return RatingsImport(
        generation_run_id,
        added,
        unchanged,
        replaced,
        len({r for _, _, r in parsed}),
        len({i for i, _, _ in parsed}),
    )


def _parse_rows(
    session: Session,
    rows: Sequence[tuple[int, Mapping[str, str]]],
    generation_run_id: int,
    rubrics: RubricSet,
    scale: Scale | None,
    unit: str,
) -> tuple[Parsed, list[tuple[int, str]]]:
    """Read and check every row against the run (an answered item of its dataset), the
    rubrics (one that applies to the item's stage, on its own scale or the given one) and
    the rows before it (one rating per rater, item and rubric); the rows that pass, and a
    (row number, reason) for each that does not."""
    run = get_generation_run(session, generation_run_id)
    items = {i.key: i for i in session.exec(select(Item).where(Item.dataset_id == run.dataset_id))}
    answered = set(
        session.exec(
            select(Response.item_id).where(
                Response.run_id == generation_run_id,
                col(Response.flag).in_(("ok", "truncated", "refusal")),
            )
        )
    )
    problems: list[tuple[int, str]] = []
    parsed: Parsed = {}
    mismatched: set[str] = set()  # rubrics whose scale --scale contradicts (said once)
    for number, row in rows:
        key, rubric, rater = (row.get(c, "").strip() for c in ("item_id", "rubric", "rater"))
        rubric = rubric.upper()
        item = items.get(key)
        if item is None:
            problems.append((number, f"unknown item_id {key!r} (not in the run's dataset)"))
            continue
        if item.id not in answered:
            problems.append((number, f"item {key!r} has no answer in run {generation_run_id}"))
            continue
        wrong = _rubric_problem(rubrics, rubric, item.stage, key)
        if wrong:
            problems.append((number, wrong))
            continue
        if not rater:
            problems.append((number, "rater is empty"))
            continue
        own = rubrics[rubric].scale
        if scale is not None and scale.labels != own.labels:
            if rubric not in mismatched:
                mismatched.add(rubric)
                problems.append(
                    (
                        number,
                        f"rubric {rubric} is rated {own} ({len(own.labels)} levels), not on "
                        f"the given scale {scale}; leave the scale out or give one of "
                        f"{len(own.labels)} levels",
                    )
                )
            continue
        try:
            score = parse_score(row.get("score"), scale or own)
        except ValueError as exc:
            problems.append((number, f"rubric {rubric}: {exc}"))
            continue
        ident = (item.id, rubric, rater)  # type: ignore[assignment]
        if ident in parsed:
            problems.append(
                (
                    number,
                    f"rater {rater!r} already rated {key!r} / {rubric} on {unit} "
                    f"{parsed[ident][2]}",
                )
            )
            continue
        parsed[ident] = (score, (row.get("rationale") or "").strip() or None, number)  # type: ignore[index]
    return parsed, problems


def _conflicts(
    parsed: Parsed, existing: dict[tuple[int, str, str], HumanRating]
) -> list[tuple[int, str]]:
    """The rows that would change a score already stored in the batch (refused without
    ``replace``), each with the stored and the new score."""
    return [
        (
            number,
            f"rater {rater!r} already has score {existing[(i, rb, rater)].score:g}"
            f" for this item and rubric (file says {score:g}); pass --replace "
            "to overwrite",
        )
        for (i, rb, rater), (score, _, number) in parsed.items()
        if (i, rb, rater) in existing and existing[(i, rb, rater)].score != score
    ]


def _store_parsed(
    session: Session,
    parsed: Parsed,
    existing: dict[tuple[int, str, str], HumanRating],
    generation_run_id: int,
    source: str,
    batch: str,
) -> tuple[int, int, int]:
    """Add the new ratings and overwrite the changed ones; (added, unchanged, replaced)."""
    added = unchanged = replaced = 0
    for (item_id, rubric, rater), (score, rationale, _) in parsed.items():
        old = existing.get((item_id, rubric, rater))
        if old is None:
            session.add(
                HumanRating(
                    generation_run_id=generation_run_id,
                    item_id=item_id,
                    rubric=rubric,
                    rater=rater,
                    score=score,
                    rationale=rationale,
                    source=source,
                    scope=import_scope(batch),
                )
            )
            added += 1
        elif old.score == score:
            unchanged += 1
        else:
            old.score, old.rationale, old.source = score, rationale, source
            replaced += 1
    session.flush()
    return added, unchanged, replaced


def _rubric_problem(rubrics: RubricSet, rubric: str, stage: str, key: str) -> str | None:
    """Why ``rubric`` cannot rate an item of ``stage`` (None when it can): unknown, or made for
    other stages; the message names the rubrics that would do."""
    fitting = rubrics.for_stage(stage)
    if fitting:
        use = f"rubrics for {stage} items: {', '.join(fitting)}"
    else:
        use = f"no rubric rates {stage} items yet: register one with `fairjudge rubrics add`"
    if not rubric:
        return f"rubric is empty ({use})"
    if rubric not in rubrics.rubrics:
        return f"unknown rubric {rubric!r} ({use})"
    if rubric not in fitting:
        return f"rubric {rubric!r} does not apply to {stage} item {key!r} ({use})"
    return None
