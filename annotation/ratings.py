"""Human ratings in long format: reading CSV files and importing them into the store.

A ratings file has the header ``item_id,rubric,rater,score`` and optionally ``rationale``;
``item_id`` is the item's id in its dataset. Import is all or nothing: any bad line (unknown
item, a rubric the item's stage is not judged with, a score off the scale, 1-5 unless another
``Scale`` is given, a repeated rating) rejects the whole file with every problem listed.
Re-importing adds nothing; a changed score is refused unless ``replace`` is set.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session, col, select

from annotation.errors import RatingsError
from judge.data.items import text_lines
from judge.grading.rubrics import RubricSet
from judge.store.queries import get_generation_run
from judge.store.tables import HumanRating, Item, Response
from judge.vocab import SCALE, Scale

RATING_COLUMNS = ("item_id", "rubric", "rater", "score")


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


def import_ratings(
    session: Session,
    path: str | Path,
    generation_run_id: int,
    rubrics: RubricSet,
    *,
    replace: bool = False,
    source: str = "import",
    scale: Scale = SCALE,
) -> RatingsImport:
    """Import a ratings file for a generation run; all or nothing. Scores must lie within
    ``scale`` (FairMonitor's rubrics, and so a judge run's scores, are 1-5)."""
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
    parsed: dict[tuple[int, str, str], tuple[float, str | None, int]] = {}
    for number, row in read_csv_rows(path, RATING_COLUMNS):
        key, rubric, rater = (row.get(c, "").strip() for c in ("item_id", "rubric", "rater"))
        rubric = rubric.upper()
        item = items.get(key)
        if item is None:
            problems.append((number, f"unknown item_id {key!r} (not in the run's dataset)"))
            continue
        if item.id not in answered:
            problems.append((number, f"item {key!r} has no answer in run {generation_run_id}"))
            continue
        if rubric not in rubrics.for_stage(item.stage):
            problems.append(
                (
                    number,
                    f"rubric {rubric!r} does not apply to {item.stage} item "
                    f"{key!r} (use {', '.join(rubrics.for_stage(item.stage))})",
                )
            )
            continue
        if not rater:
            problems.append((number, "rater is empty"))
            continue
        try:
            score = parse_score(row.get("score"), scale)
        except ValueError as exc:
            problems.append((number, str(exc)))
            continue
        ident = (item.id, rubric, rater)  # type: ignore[assignment]
        if ident in parsed:
            problems.append(
                (
                    number,
                    f"rater {rater!r} already rated {key!r} / {rubric} on line {parsed[ident][2]}",
                )
            )
            continue
        parsed[ident] = (score, (row.get("rationale") or "").strip() or None, number)  # type: ignore[index]
    existing = {
        (r.item_id, r.rubric, r.rater): r
        for r in session.exec(
            select(HumanRating).where(HumanRating.generation_run_id == generation_run_id)
        )
    }
    if not replace:
        problems += [
            (
                number,
                f"rater {rater!r} already has score {existing[(i, rb, rater)].score:g}"
                f" for this item and rubric (file says {score:g}); pass --replace "
                "to overwrite",
            )
            for (i, rb, rater), (score, _, number) in parsed.items()
            if (i, rb, rater) in existing and existing[(i, rb, rater)].score != score
        ]
    if problems:
        raise RatingsError(
            f"{path} was not imported; fix these lines and try again:", sorted(problems)
        )
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
                )
            )
            added += 1
        elif old.score == score:
            unchanged += 1
        else:
            old.score, old.rationale, old.source = score, rationale, source
            replaced += 1
    session.flush()
    return RatingsImport(
        generation_run_id,
        added,
        unchanged,
        replaced,
        len({r for _, _, r in parsed}),
        len({i for i, _, _ in parsed}),
    )
