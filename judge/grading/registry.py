"""The rubrics users register, stored in the ``rubric`` table, and the rubric sets judge runs
apply (built-in and registered rubrics by name).

Registering checks a whole file first (``judge.grading.rubrics.parse_rubric_file``) and stores
all of its rubrics or none. The same definition again stores nothing; a changed definition
under the same name is that name's next version. Judging takes each name's latest version, and
every judgment records the version and the definition's hash, so a judge run can always be
traced to the exact wording it used.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from judge.errors import InvalidInputError, NotFoundError
from judge.grading.rubrics import (
    BUILTIN_NAMES,
    BUILTIN_SET,
    Rubric,
    RubricSet,
    parse_rubric_file,
)
from judge.store.engine import session_scope
from judge.store.tables import JudgeRun, Judgment, RubricRecord


@dataclass(frozen=True)
class RegisteredRubric:
    """A stored version of a registered rubric."""

    id: int
    rubric: Rubric
    version: int
    text_hash: str
    created_at: datetime
    created: bool = False  # registering it just now added this version
    versions: int = 1  # versions stored under the name

    @property
    def name(self) -> str:
        return self.rubric.name

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "text_hash": self.text_hash,
            "created_at": self.created_at.isoformat(),
            "created": self.created,
            "versions": self.versions,
            "definition": self.rubric.definition(),
        }


def _from_record(record: RubricRecord, **extra: Any) -> RegisteredRubric:
    spec = record.spec
    rubric = Rubric(
        name=record.name,
        title=spec["title"],
        compares=spec["compares"],
        criterion=spec["criterion"],
        levels=tuple(spec["levels"]),
        applies_to=tuple(spec["applies_to"]),
        texts=tuple((label, text) for label, text in spec["texts"]),
        version=str(record.version),
        registered=True,
    )
    assert record.id is not None
    return RegisteredRubric(
        record.id, rubric, record.version, record.text_hash, record.created_at, **extra
    )


def read_rubric_source(source: str | Path) -> tuple[str, str]:
    """(text, how to name it in messages): a Path is a file to read, a str the file's text."""
    if isinstance(source, str):
        return source, "the rubric file"
    try:
        return source.read_text(encoding="utf-8"), str(source)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInputError(f"cannot read rubric file {source}: {why}") from None


def register_rubrics(
    engine: Engine, source: str | Path, *, reserved: tuple[str, ...] = BUILTIN_NAMES
) -> list[RegisteredRubric]:
    """Check and store every rubric of a file (``source``: a Path to read, or the text
    itself); all or nothing. A rubric whose definition equals its name's latest version is
    not stored again (``created`` False); a changed one becomes the next version."""
    text, where = read_rubric_source(source)
    rubrics = parse_rubric_file(text, source=where, reserved=reserved)
    for attempt in range(2):
        try:
            with session_scope(engine) as session:
                return [_store(session, rubric, text) for rubric in rubrics]
        except IntegrityError:
            # Another process stored a version of the same name at the same moment: read the
            # store again and number this one after it.
            if attempt:
                raise
    raise AssertionError("unreachable")


def _store(session: Session, rubric: Rubric, text: str) -> RegisteredRubric:
    latest = _latest(session, rubric.name)
    if latest is not None and latest.text_hash == rubric.definition_hash:
        return _from_record(latest, versions=latest.version)
    version = latest.version + 1 if latest is not None else 1
    record = RubricRecord(
        name=rubric.name,
        version=version,
        text_hash=rubric.definition_hash,
        spec=rubric.definition(),
        source=text,
    )
    session.add(record)
    session.flush()
    return _from_record(record, created=True, versions=version)


def _latest(session: Session, name: str) -> RubricRecord | None:
    return session.exec(
        select(RubricRecord)
        .where(RubricRecord.name == name)
        .order_by(col(RubricRecord.version).desc())
    ).first()


def list_registered(session: Session) -> list[RegisteredRubric]:
    """The latest version of every registered rubric, by name."""
    latest: dict[str, RubricRecord] = {}
    for record in session.exec(select(RubricRecord).order_by(col(RubricRecord.version))):
        latest[record.name] = record
    return [_from_record(r, versions=r.version) for _, r in sorted(latest.items())]


def get_registered(session: Session, name: str, version: int | None = None) -> RegisteredRubric:
    """One registered rubric: its latest version, or ``version``; NotFoundError names what
    is there."""
    wanted = name.strip().upper()
    latest = _latest(session, wanted)
    if latest is None:
        known = ", ".join(r.name for r in list_registered(session)) or "none yet"
        raise NotFoundError(
            f"no registered rubric named {name!r} (registered: {known}); "
            "see `fairjudge rubrics add`"
        )
    if version is None:
        return _from_record(latest, versions=latest.version)
    record = session.exec(
        select(RubricRecord).where(RubricRecord.name == wanted, RubricRecord.version == version)
    ).first()
    if record is None:
        raise NotFoundError(f"rubric {wanted} has versions 1 to {latest.version}, not {version}")
    return _from_record(record, versions=latest.version)


# --- rubric sets for judging ------------------------------------------------------------------


def resolve_rubric_set(session: Session, builtin: RubricSet, names: str | None) -> RubricSet:
    """The rubrics a judge run applies: ``builtin`` for None or "fairmonitor", else the
    comma-separated ``names`` (case ignored), each a built-in rubric or the latest version of
    a registered one. The set is named by its sorted names, so their order does not matter."""
    if names is None or names.strip().lower() == BUILTIN_SET:
        return builtin
    wanted = sorted({n.strip().upper() for n in names.split(",") if n.strip()})
    if not wanted:
        raise InvalidInputError(f"rubric set {names!r} names no rubric")
    if BUILTIN_SET.upper() in wanted:
        raise InvalidInputError(
            f"rubric set {names!r}: '{BUILTIN_SET}' stands alone; name built-in rubrics one by "
            f"one ({', '.join(builtin.rubrics)}) to mix them with registered ones"
        )
    chosen: dict[str, Rubric] = {}
    unknown = []
    for name in wanted:
        if name in builtin.rubrics:
            chosen[name] = builtin[name]
            continue
        latest = _latest(session, name)
        if latest is None:
            unknown.append(name)
        else:
            chosen[name] = _from_record(latest).rubric
    if unknown:
        registered = ", ".join(r.name for r in list_registered(session)) or "none"
        raise NotFoundError(
            f"no rubric named {', '.join(unknown)} (built-in: {', '.join(builtin.rubrics)}; "
            f"registered: {registered}); register one with `fairjudge rubrics add FILE`"
        )
    return RubricSet(0, chosen, ",".join(wanted))


def judge_run_rubric_set(session: Session, builtin: RubricSet, judge_run_id: int) -> RubricSet:
    """The rubrics a stored judge run applied, each in the version its judgments record (the
    latest version for a rubric with no judgment yet): what a campaign over that run rates."""
    run = session.get(JudgeRun, judge_run_id)
    if run is None:
        raise NotFoundError(f"no judge run {judge_run_id}")
    current = resolve_rubric_set(session, builtin, run.rubric_set)
    if run.rubric_set == BUILTIN_SET:
        return current
    used = dict(
        session.exec(
            select(Judgment.rubric, Judgment.rubric_version)
            .where(Judgment.judge_run_id == judge_run_id)
            .distinct()
        ).all()
    )
    chosen: dict[str, Rubric] = {}
    for name, rubric in current.rubrics.items():
        version = used.get(name)
        if rubric.registered and version and version != rubric.version:
            rubric = get_registered(session, name, int(version)).rubric
        chosen[name] = rubric
    return RubricSet(0, chosen, run.rubric_set)
