"""Pairwise judgments made elsewhere, checked whole and stored (``fairjudge judgments import``).

A source (``judge.trust.pairwise_files``) is stored only when nothing in it is wrong; else
every problem is listed at once and nothing is stored. Beyond a row's own problems:

* a judgment given twice (same judge, question, order and repetition);
* a pair with one order missing: every pair must be judged in both orders, since position
  consistency compares them;
* a model outside ``models`` when the user names the models the file may hold;
* a judgment already stored by an earlier import (importing a file again adds nothing and
  says so, rather than doubling the counts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from judge.errors import InvalidInputError
from judge.store.engine import session_scope
from judge.store.pairwise_tables import PairwiseImport, PairwiseVerdict
from judge.trust.pairwise_files import PairRecord, ReadSource, read_pairwise

Key = tuple[str, str, str, str, int]


@dataclass(frozen=True)
class PairwiseImportSummary:
    """What an import stored."""

    import_id: int
    source: str
    format: str
    files: int
    records: int
    judges: list[str]
    models: list[str]
    questions: int
    repetitions: list[int]
    unreadable: int


def _key(r: PairRecord) -> Key:
    return (r.judge, r.question, r.model_first, r.model_second, r.repetition)


def _at(r: PairRecord, why: str) -> tuple[int, str]:
    return r.line, f"{r.file}: {why}" if r.file else why


def check_records(
    records: Sequence[PairRecord], models: Sequence[str] | None = None
) -> list[tuple[int, str]]:
    """Problems across records: repeats, a missing order, models outside ``models``."""
    problems: list[tuple[int, str]] = []
    known = set(models or [])
    names = ", ".join(sorted(known))
    seen: dict[Key, PairRecord] = {}
    for r in records:
        if known:
            for m in (r.model_first, r.model_second):
                if m not in known:
                    problems.append(_at(r, f"unknown model {m!r} (--models: {names})"))
        k = _key(r)
        if k in seen:
            problems.append(_at(r, (
                f"the same judgment as line {seen[k].line} (judge {r.judge!r}, "
                f"question {r.question!r}, repetition {r.repetition})"
            )))  # fmt: skip
            continue
        seen[k] = r
    for k, r in seen.items():
        judge, question, first, second, rep = k
        if (judge, question, second, first, rep) not in seen:
            problems.append(_at(r, (
                f"judge {judge!r}, question {question!r}, repetition {rep}: only the order "
                f"{first!r} first was given; the other order ({second!r} first) is missing"
            )))  # fmt: skip
    return problems


def _stored(engine: Engine, records: Sequence[PairRecord]) -> list[tuple[int, str]]:
    judges = sorted({r.judge for r in records})
    wanted = {_key(r): r for r in records}
    problems: list[tuple[int, str]] = []
    with session_scope(engine) as session:
        rows = session.execute(
            select(
                col(PairwiseVerdict.judge), col(PairwiseVerdict.question),
                col(PairwiseVerdict.model_first), col(PairwiseVerdict.model_second),
                col(PairwiseVerdict.repetition), col(PairwiseVerdict.import_id),
            ).where(col(PairwiseVerdict.judge).in_(judges))
        )  # fmt: skip
        imports = Counter[int]()
        first: dict[int, PairRecord] = {}
        for *key, import_id in rows:
            r = wanted.get((key[0], key[1], key[2], key[3], key[4]))
            if r is not None:
                imports[import_id] += 1
                if import_id not in first or r.line < first[import_id].line:
                    first[import_id] = r
    for import_id, n in sorted(imports.items()):
        problems.append(_at(first[import_id], (
            f"{n} of the file's judgments are already stored by import {import_id} "
            "(the same judge, question, order and repetition); nothing was added"
        )))  # fmt: skip
    return problems


def import_pairwise(
    engine: Engine,
    path: str | Path,
    fmt: str,
    *,
    judge: str | None = None,
    repetition: int | None = None,
    models: Sequence[str] | None = None,
) -> PairwiseImportSummary:
    """Read ``path`` (``judge.trust.pairwise_files.read_pairwise``), check it whole and store
    it in one transaction; ``InvalidInputError`` lists every problem, nothing stored."""
    read = read_pairwise(path, fmt, judge=judge, repetition=repetition)
    return store_source(engine, read, str(path), fmt, models)


def store_source(
    engine: Engine,
    read: ReadSource,
    source: str,
    fmt: str,
    models: Sequence[str] | None = None,
) -> PairwiseImportSummary:
    """Check what was read from ``source`` whole and store it in one transaction;
    ``InvalidInputError`` lists every problem, nothing stored."""
    problems = read.problems + check_records(read.records, models)
    if not problems and not read.records:
        problems.append((0, "no judgments in the source"))
    if not problems:
        problems = _stored(engine, read.records)
    if problems:
        raise InvalidInputError(
            f"{source}: {len(problems)} problem(s); nothing was stored", sorted(problems)
        )
    records = read.records
    with session_scope(engine) as session:
        batch = PairwiseImport(source=source, format=fmt, sha256=read.sha256, records=len(records))
        session.add(batch)
        session.flush()
        assert batch.id is not None
        session.execute(
            insert(PairwiseVerdict),
            [
                {
                    "import_id": batch.id, "judge": r.judge, "question": r.question,
                    "model_first": r.model_first, "model_second": r.model_second,
                    "repetition": r.repetition, "verdict": r.verdict, "category": r.category,
                    "raw": r.raw,
                }
                for r in records
            ],
        )  # fmt: skip
        import_id = batch.id
    return PairwiseImportSummary(
        import_id=import_id,
        source=source,
        format=fmt,
        files=read.files,
        records=len(records),
        judges=sorted({r.judge for r in records}),
        models=sorted({m for r in records for m in (r.model_first, r.model_second)}),
        questions=len({r.question for r in records}),
        repetitions=sorted({r.repetition for r in records}),
        unreadable=sum(r.verdict == "unreadable" for r in records),
    )
