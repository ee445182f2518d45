"""One lifecycle for every kind of run (``judge.runs``): a run is found by its identity or
made, committed before any call, marked running under its lease, and finished with its
outcome; its status is stored as the plain text of a ``RunStatus``. Expected values are
written out by hand from the functions' docstrings."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.errors import NotFoundError
from judge.store.engine import make_engine, session_scope
from judge.store.lifecycle import commit_run, finish_run, get_or_create_run, start_run
from judge.store.tables import AuditRun, Dataset, GenerationRun, JudgeRun, RunBase
from judge.vocab import RunStatus

SAMPLING: dict[str, Any] = {
    "endpoint_name": "local",
    "model": "m",
    "temperature": 0.0,
    "max_tokens": 64,
}


def audit_identity(digest: str) -> dict[str, Any]:
    return {"config_hash": digest}


def audit_fields() -> dict[str, Any]:
    return {**SAMPLING, "suite": "award", "base_url": "http://h/v1", "params": {}}


def generation_run(session: Session) -> int:
    """A dataset and one generation run of it: the parent a judge run needs."""
    dataset = Dataset(name="d")
    session.add(dataset)
    session.flush()
    assert dataset.id is not None
    run = GenerationRun(
        dataset_id=dataset.id, base_url="http://h/v1", template_version="v1", **SAMPLING
    )
    session.add(run)
    session.flush()
    assert run.id is not None
    return run.id


def judge_fields() -> dict[str, Any]:
    return {**SAMPLING, "base_url": "http://h/v1", "prompt_variant": "base", "samples": 1,
            "aggregation": "mean"}  # fmt: skip


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The migrated store on SQLite (a copy of the template) or on a fresh PostgreSQL
    database: each driver must store a ``RunStatus`` as its text."""
    if request.param == "sqlite":
        yield request.getfixturevalue("engine")
        return
    engine = make_engine(str(request.getfixturevalue("pg_url")))
    yield engine
    engine.dispose()


def test_the_newest_run_of_the_same_identity_is_resumed(engine: Engine) -> None:
    with session_scope(engine) as session:
        first = get_or_create_run(session, AuditRun, audit_identity("a"), fields=audit_fields())
        again = get_or_create_run(session, AuditRun, audit_identity("a"), fields=audit_fields())
        other = get_or_create_run(session, AuditRun, audit_identity("b"), fields=audit_fields())
        forced = get_or_create_run(
            session, AuditRun, audit_identity("a"), fields=audit_fields(), new=True
        )
        newest = get_or_create_run(session, AuditRun, audit_identity("a"), fields=audit_fields())
        ids = [first.id, again.id, other.id, forced.id, newest.id]
    # Runs 1 (a), 2 (b) and 3 (a, forced by new=True) are made in that order; asked again,
    # identity "a" gives its newest run, 3.
    assert ids == [1, 1, 2, 3, 3]


def test_a_run_that_same_refuses_is_not_resumed(engine: Engine) -> None:
    with session_scope(engine) as session:
        first = get_or_create_run(session, AuditRun, audit_identity("a"), fields=audit_fields())
        refused = get_or_create_run(
            session, AuditRun, audit_identity("a"), fields=audit_fields(), same=lambda r: False
        )
        taken = get_or_create_run(
            session, AuditRun, audit_identity("a"), fields=audit_fields(),
            same=lambda r: r.id == 1,
        )  # fmt: skip
        ids = (first.id, refused.id, taken.id)
    assert ids == (1, 2, 1)  # the newest (2) is refused by the second predicate, 1 is taken


def test_a_new_run_has_its_identity_and_fields_and_starts_running(engine: Engine) -> None:
    with session_scope(engine) as session:
        run = get_or_create_run(session, AuditRun, audit_identity("a"), fields=audit_fields())
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT config_hash, suite, model, status, status_detail, finished_at FROM auditrun"
            )
        ).one()
    assert run.id == 1
    assert tuple(row) == ("a", "award", "m", "running", None, None)


def test_two_processes_making_one_judge_run_get_the_same_row(engine: Engine) -> None:
    """The other process inserts the run between this one's look and its insert: this
    insert meets the unique key (generation run, config hash), and the second look finds the
    other's row, so both get its id and there is one row."""
    with session_scope(engine) as session:
        parent = generation_run(session)
    identity: dict[str, Any] = {"generation_run_id": parent, "config_hash": "h"}
    looks: list[int] = []

    def get(session: Session) -> RunBase:
        looks.append(len(looks) + 1)
        if len(looks) == 1:
            with session_scope(engine) as other:  # the other process, committed first
                other.add(JudgeRun(**identity, **judge_fields()))
            # This process had looked before the other's commit and found nothing.
            return get_or_create_run(session, JudgeRun, identity, fields=judge_fields(), new=True)
        return get_or_create_run(session, JudgeRun, identity, fields=judge_fields())

    run_id = commit_run(engine, get)
    with Session(engine) as session:
        ids = [r.id for r in session.exec(select(JudgeRun))]
    assert looks == [1, 2]
    assert ids == [1] and run_id == 1


def test_status_is_stored_as_plain_text_through_start_and_finish(any_engine: Engine) -> None:
    engine = any_engine
    with session_scope(engine) as session:
        run = get_or_create_run(session, AuditRun, audit_identity("a"), fields=audit_fields())
        assert run.id is not None
        run_id = run.id
        run.status, run.status_detail = RunStatus.INCOMPLETE, "2 of 3 answers missing"
    with session_scope(engine) as session:
        started = start_run(session, AuditRun, run_id)
        assert (started.status, started.status_detail) == ("running", None)

    def raw() -> tuple[Any, ...]:
        with engine.connect() as conn:
            return tuple(
                conn.execute(
                    sa.text("SELECT status, status_detail, finished_at FROM auditrun")
                ).one()
            )

    status, detail, finished_at = raw()
    # Exactly str: the driver stored the member's text, and the column gives text back.
    assert (type(status), status, detail, finished_at) == (str, "running", None, None)

    ended = finish_run(
        engine, AuditRun, run_id, lambda session, run: (RunStatus.INCOMPLETE, f"run {run.id}")
    )
    status, detail, finished_at = raw()
    assert ended == ("incomplete", "run 1")
    assert (type(status), status, detail) == (str, "incomplete", "run 1")
    assert finished_at is not None

    finish_run(engine, AuditRun, run_id, lambda session, run: (RunStatus.FINISHED, None))
    status, detail, _ = raw()
    assert (status, detail) == ("finished", None)


def test_finish_run_reads_the_outcome_in_the_same_session_as_it_writes(engine: Engine) -> None:
    with session_scope(engine) as session:
        run_id = get_or_create_run(session, AuditRun, audit_identity("a"), fields=audit_fields()).id
    assert run_id is not None
    seen: list[tuple[str, datetime | None]] = []

    def outcome(session: Session, run: AuditRun) -> tuple[RunStatus, str | None]:
        seen.append((run.status, run.finished_at))  # the row as it was before finishing
        return RunStatus.FINISHED, None

    finish_run(engine, AuditRun, run_id, outcome)
    assert seen == [("running", None)]


def test_a_run_deleted_under_the_command_is_named_by_kind(engine: Engine) -> None:
    with session_scope(engine) as session, pytest.raises(NotFoundError) as caught:
        start_run(session, JudgeRun, 7)
    assert str(caught.value) == "judge run 7 was deleted while this command worked on it"
    with pytest.raises(NotFoundError, match="^generation run 3 was deleted"):
        finish_run(engine, GenerationRun, 3, lambda session, run: (RunStatus.FINISHED, None))


def test_the_three_run_tables_share_the_base_columns_alike() -> None:
    """RunBase's columns mean the same in each table: same type, nullability and default."""
    shared = [
        "id", "endpoint_name", "base_url", "model", "temperature", "max_tokens", "status",
        "status_detail", "created_at", "finished_at",
        "max_cost",  # the run's cost bound, kept across reruns (migration 0016)
    ]  # fmt: skip
    assert sorted(RunBase.model_fields) == sorted(shared)

    def described(table: Any, name: str) -> tuple[str, bool, bool, str | None]:
        column = table.__table__.c[name]
        default = column.default
        if default is not None:  # SQLAlchemy wraps a callable default per column
            default = "callable" if default.is_callable else repr(default.arg)
        return (repr(column.type), column.nullable, column.primary_key, default)

    for name in shared:
        kinds = {described(t, name) for t in (GenerationRun, JudgeRun, AuditRun)}
        assert len(kinds) == 1, (name, kinds)
    # Written out from tables.py before the base existed: status was a plain "running".
    assert described(JudgeRun, "status")[1:] == (False, False, "'running'")
    assert described(JudgeRun, "status_detail")[:3] == ("Text()", True, False)
    assert [t.run_kind for t in (GenerationRun, JudgeRun, AuditRun)] == [
        "generation",
        "judge",
        "audit",
    ]
