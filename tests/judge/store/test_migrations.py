"""Schema migrations: a database of the release before migrations is upgraded in place with
its rows kept and filled in, and ``tables.py`` cannot drift from the migrations unnoticed."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, col, select

import server.tables  # noqa: F401  (the server's tables: the schema compared holds both)
from judge.errors import SchemaError
from judge.store.engine import (
    BASELINE,
    Upgrade,
    alembic_config,
    current_revision,
    head_revision,
    make_engine,
    upgrade,
)
from judge.store.tables import JudgeRun, Judgment

WHEN = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
RETRY = "run the same judge command again to retry them"

# Judgments as the previous release wrote them, with the kind each must get, read by hand off
# the mapping in revision 0002 (first matching prefix, then "contains"); reasons are worded
# as that release's judging.py and parsing.py worded them.
# (judge_run_id, item_id, sample_index, status, score, reason, expected unscored_kind)
JUDGMENTS: list[tuple[int, int, int, str, int | None, str | None, str | None]] = [
    # Run 1, finished: the three rows of the issue.
    (1, 1, 0, "unscored", None, "call failed: HTTP 503: x", "call_failed"),
    (1, 2, 0, "unscored", None, "answer part B is empty", "missing_answer"),
    (1, 3, 0, "scored", 4, None, None),
    # Run 2, finished: every other wording; none is retried by a rerun, so it stays finished.
    (2, 1, 0, "scored", 5, None, None),
    (
        2,
        1,
        1,
        "unscored",
        None,
        # The prefix wins over the "outside the" inside the first reply's reason.
        "unparsable after one repair: first reply: score 7 is outside the 1-5 scale; "
        "repair reply: no score found in reply",
        "unparsable",
    ),
    (2, 1, 2, "unscored", None, "empty reply", "empty_reply"),
    (2, 1, 3, "unscored", None, "no score found in reply", "no_score"),
    (2, 1, 4, "unscored", None, "several different scores in reply: 2, 4", "several_scores"),
    (2, 1, 5, "unscored", None, "score 7 is outside the 1-5 scale", "off_scale"),
    (2, 1, 6, "unscored", None, "score 'high' is not a number", "not_a_number"),
    (2, 1, 7, "unscored", None, "score 4.5 is not a whole number", "not_a_number"),
    (2, 1, 8, "unscored", None, "something no release wrote", None),  # no guessed kind
    # Run 3, still running (interrupted): kinds are filled in, its status is left alone.
    (3, 1, 0, "unscored", None, "call failed during repair: timed out", "call_failed"),
]
# (id, status) of the judge runs before the upgrade, and (status, status_detail) after it.
# Run 1: 2 of its 3 judgments are call_failed (1) or missing_answer (1), kinds sorted.
RUNS_BEFORE = [(1, "finished"), (2, "finished"), (3, "running")]
RUNS_AFTER = {
    1: ("incomplete", f"2 of 3 judgments missing (call_failed: 1, missing_answer: 1); {RETRY}"),
    2: ("finished", None),
    3: ("running", None),
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty database: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fairjudge.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fairjudge.db'}"


@pytest.fixture
def engines() -> Iterator[list[Engine]]:
    """Engines a test made, disposed at the end so PostgreSQL can drop the database."""
    made: list[Engine] = []
    yield made
    for engine in made:
        engine.dispose()


def make_legacy_database(url: str) -> None:
    """A database as the release before migrations left it, holding the rows above.

    Its tables are revision 0001's (the baseline, which is that release's create_all schema),
    and it has no ``alembic_version`` table, as create_all never made one.
    """
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), BASELINE)
        conn.execute(sa.text("DROP TABLE alembic_version"))
        old = sa.MetaData()
        old.reflect(conn)
        assert "unscored_kind" not in old.tables["judgment"].c
        conn.execute(
            old.tables["dataset"].insert(),
            [{"id": 1, "name": "sample", "description": "", "created_at": WHEN}],
        )
        conn.execute(
            old.tables["item"].insert(),
            [
                {
                    "id": i,
                    "dataset_id": 1,
                    "key": f"item-{i}",
                    "stage": "S1",
                    "factor": "gender",
                    "scenario": "education",
                    "fields": {"question": "?"},
                    "content_hash": f"h{i}",
                }
                for i in (1, 2, 3)
            ],
        )
        conn.execute(
            old.tables["generationrun"].insert(),
            [
                {
                    "id": 1,
                    "dataset_id": 1,
                    "endpoint_name": "test",
                    "base_url": "http://127.0.0.1:1/v1",
                    "model": "m",
                    "temperature": 0.0,
                    "max_tokens": 32,
                    "template_version": "v1",
                    "status": "finished",
                    "created_at": WHEN,
                    "finished_at": WHEN,
                }
            ],
        )
        conn.execute(
            old.tables["judgerun"].insert(),
            [
                {
                    "id": run_id,
                    "generation_run_id": 1,
                    "endpoint_name": "test",
                    "base_url": "http://127.0.0.1:1/v1",
                    "model": "judge",
                    "prompt_variant": "plain",
                    "temperature": 0.0,
                    "samples": 1,
                    "aggregation": "mean",
                    "max_tokens": 64,
                    "config_hash": f"c{run_id}",
                    "status": status,
                    "created_at": WHEN,
                    "finished_at": WHEN if status == "finished" else None,
                }
                for run_id, status in RUNS_BEFORE
            ],
        )
        conn.execute(
            old.tables["judgment"].insert(),
            [
                {
                    "judge_run_id": run_id,
                    "item_id": item_id,
                    "rubric": "ICS",
                    "sample_index": sample,
                    "status": status,
                    "score": score,
                    "reason": reason,
                    "template_version": "v1",
                    "prompt_hash": "p",
                    "model": "judge",
                    "params": {},
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "latency_s": 0.0,
                    "calls": 1,
                    "cache_key": "k",
                    "created_at": WHEN,
                }
                for run_id, item_id, sample, status, score, reason, _kind in JUDGMENTS
            ],
        )
    engine.dispose()


def row_counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        names = sorted(set(sa.inspect(conn).get_table_names()) - {"alembic_version"})
        return {
            name: conn.execute(sa.select(sa.func.count()).select_from(sa.table(name))).scalar_one()
            for name in names
        }


def schema_differences(engine: Engine) -> list[Any]:
    """What autogenerate would put in a new migration: tables.py vs the database."""
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, SQLModel.metadata))


def test_old_database_is_upgraded_with_rows_kept_and_filled_in(
    url: str, engines: list[Engine]
) -> None:
    make_legacy_database(url)
    before = sa.create_engine(url)
    engines.append(before)
    counts = row_counts(before)
    assert counts["judgment"] == len(JUDGMENTS) and counts["judgerun"] == 3
    assert current_revision(before) is None

    engine = make_engine(url)
    engines.append(engine)

    assert current_revision(engine) == head_revision()
    columns = sa.inspect(engine)
    assert "status_detail" in {c["name"] for c in columns.get_columns("judgerun")}
    assert "unscored_kind" in {c["name"] for c in columns.get_columns("judgment")}
    # no row lost, none added (0003 adds the empty run-lease table, 0005 the empty campaign,
    # campaign-task, annotator and rating-history tables, 0006 the empty rubric, key and job
    # tables, 0007 the empty audit-run, audit-answer and audit-label tables, 0009 the empty
    # item-generation-call table, 0012 the empty web-session and worker-heartbeat tables,
    # 0013 the empty job-part table, 0014 the empty batch-job table, 0015 the empty
    # dashboard-figure table, 0018 the empty judge-qualification table, 0019 the empty
    # pairwise-import and pairwise-verdict tables, 0022 the empty gate-verdict table)
    new_tables = ("runlease", "campaign", "campaigntask", "annotator", "ratingchange")
    new_tables += ("rubric", "apikey", "job", "auditrun", "auditanswer", "auditlabel")
    new_tables += ("itemgenerationcall", "websession", "workerbeat", "jobpart", "batchjob")
    new_tables += ("dashboardfigure", "judgequalification")
    new_tables += ("pairwiseimport", "pairwiseverdict", "gateverdict")
    assert row_counts(engine) == {**counts, **dict.fromkeys(new_tables, 0)}
    with Session(engine) as session:
        judgments = session.exec(
            select(Judgment).order_by(
                col(Judgment.judge_run_id), col(Judgment.item_id), col(Judgment.sample_index)
            )
        ).all()
        got = [
            (j.judge_run_id, j.item_id, j.sample_index, j.status, j.score, j.reason)
            for j in judgments
        ]
        assert got == [row[:6] for row in JUDGMENTS]  # the old columns are untouched
        assert [j.unscored_kind for j in judgments] == [row[6] for row in JUDGMENTS]
        runs = {r.id: (r.status, r.status_detail) for r in session.exec(select(JudgeRun))}
        # 0006's defaults: runs made before it were judged with the built-in rubrics
        assert {r.rubric_set for r in session.exec(select(JudgeRun))} == {"fairmonitor"}
        assert {j.rubric_hash for j in judgments} == {None}
    assert runs == RUNS_AFTER
    assert schema_differences(engine) == []


def test_new_database_matches_tables_py(url: str, engines: list[Engine]) -> None:
    # Fails when tables.py changes without a migration (write one: see migrations/alembic.ini).
    # compare_type is on; SQLModel's AutoString and the migrations' sa.String() both reflect
    # as VARCHAR, so Alembic reports no difference for them (nothing needs ignoring today).
    engine = make_engine(url)
    engines.append(engine)
    assert current_revision(engine) == head_revision()
    assert schema_differences(engine) == []


def test_in_memory_sqlite_is_migrated_on_its_one_connection() -> None:
    engine = make_engine("sqlite://")
    try:
        assert current_revision(engine) == head_revision()
        assert schema_differences(engine) == []
    finally:
        engine.dispose()


def test_second_make_engine_on_the_same_file_only_reads(sqlite_url: str) -> None:
    make_engine(sqlite_url).dispose()
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    sa.event.listen(Engine, "before_cursor_execute", record)
    try:
        engine = make_engine(sqlite_url)
    finally:
        sa.event.remove(Engine, "before_cursor_execute", record)
    assert statements  # it did look at the stored revision
    assert all(s.lstrip().upper().startswith(("SELECT", "PRAGMA")) for s in statements)
    assert current_revision(engine) == head_revision()
    engine.dispose()


def test_an_up_to_date_database_is_opened_without_loading_alembic(sqlite_url: str) -> None:
    # Every CLI command opens the store: importing Alembic would add ~0.2 s to each.
    make_engine(sqlite_url).dispose()
    code = (
        "import sys; from judge.store.engine import make_engine; "
        f"make_engine({sqlite_url!r}).dispose(); print('alembic' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_engines_made_at_once_on_a_new_file_migrate_it_once(sqlite_url: str) -> None:
    errors: list[BaseException] = []

    def open_store() -> None:
        try:
            make_engine(sqlite_url).dispose()
        except BaseException as exc:  # reported below, with the thread's error
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    engine = make_engine(sqlite_url)
    with engine.connect() as conn:
        versions = conn.execute(sa.text("SELECT version_num FROM alembic_version")).all()
    engine.dispose()
    assert versions == [(head_revision(),)]


def test_upgrade_reports_the_revisions(sqlite_url: str) -> None:
    make_legacy_database(sqlite_url)
    head = head_revision()
    assert upgrade(sqlite_url) == Upgrade(before=None, after=head)
    again = upgrade(sqlite_url)
    assert again == Upgrade(before=head, after=head) and not again.changed


def test_revision_files_follow_the_naming_that_head_revision_relies_on() -> None:
    # head_revision() reads the newest revision off the file names, without Alembic; here
    # Alembic itself reads the scripts: one linear history, file NNNN_slug.py is revision NNNN.
    script = ScriptDirectory.from_config(alembic_config())
    revisions = list(reversed(list(script.walk_revisions())))
    numbered = [f"{n:04d}" for n in range(1, len(revisions) + 1)]
    assert [r.revision for r in revisions] == numbered
    assert [Path(r.path).name.split("_", 1)[0] for r in revisions] == numbered
    assert [r.down_revision for r in revisions] == [None, *numbered[:-1]]
    assert script.get_heads() == [head_revision()] and head_revision() >= "0002"


def test_downgrade_to_the_baseline_gives_the_old_release_its_schema(
    sqlite_url: str,
) -> None:
    make_legacy_database(sqlite_url)
    engine = make_engine(sqlite_url)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), BASELINE)
    columns = sa.inspect(engine)
    assert "unscored_kind" not in {c["name"] for c in columns.get_columns("judgment")}
    assert "status_detail" not in {c["name"] for c in columns.get_columns("judgerun")}
    with engine.connect() as conn:
        statuses = conn.execute(sa.text("SELECT id, status FROM judgerun ORDER BY id")).all()
    assert statuses == RUNS_BEFORE  # 'incomplete' was the old release's 'finished'
    engine.dispose()


def test_a_database_with_only_some_tables_is_refused(sqlite_url: str) -> None:
    engine = sa.create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE dataset (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    with pytest.raises(SchemaError, match="not callcache, generationrun"):
        make_engine(sqlite_url)


def test_a_database_from_a_newer_release_is_refused(sqlite_url: str) -> None:
    make_engine(sqlite_url).dispose()
    engine = sa.create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(SchemaError, match="revision '9999'.*upgrade FairJudge"):
        make_engine(sqlite_url)


# Answers as revision 0003 stored them, with the flag each has after 0004. Read off the rule
# the generation flags follow (error > empty > refusal > truncated > ok): only an 'ok' answer
# whose call stopped at the token limit becomes 'truncated'.
# (item_id, flag, finish_reason, flag after 0004)
ANSWERS: list[tuple[int, str, str | None, str]] = [
    (1, "ok", "length", "truncated"),
    (2, "ok", "stop", "ok"),
    (3, "ok", None, "ok"),  # no finish reason recorded: nothing says it was cut
    (4, "refusal", "length", "refusal"),  # a refusal outranks the cut
    (5, "empty", "length", "empty"),
    (6, "error", None, "error"),
]


def make_0003_database(url: str) -> None:
    """A database at revision 0003 holding one generation run with the answers above."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0003")
        old = sa.MetaData()
        old.reflect(conn)
        conn.execute(
            old.tables["dataset"].insert(),
            [{"id": 1, "name": "sample", "description": "", "created_at": WHEN}],
        )
        conn.execute(
            old.tables["item"].insert(),
            [
                {
                    "id": item_id,
                    "dataset_id": 1,
                    "key": f"item-{item_id}",
                    "stage": "S1",
                    "factor": "gender",
                    "scenario": "education",
                    "fields": {"question": "?"},
                    "content_hash": f"h{item_id}",
                }
                for item_id, *_ in ANSWERS
            ],
        )
        conn.execute(
            old.tables["generationrun"].insert(),
            [
                {
                    "id": 1,
                    "dataset_id": 1,
                    "endpoint_name": "test",
                    "base_url": "http://127.0.0.1:1/v1",
                    "model": "m",
                    "temperature": 0.0,
                    "max_tokens": 32,
                    "template_version": "v1",
                    "status": "finished",
                    "created_at": WHEN,
                    "finished_at": WHEN,
                }
            ],
        )
        conn.execute(
            old.tables["response"].insert(),
            [
                {
                    "run_id": 1,
                    "item_id": item_id,
                    "part": "answer",
                    "prompt": "?",
                    "raw_text": None if flag in ("empty", "error") else "Some answer",
                    "flag": flag,
                    "finish_reason": finish_reason,
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "latency_s": 0.0,
                    "cache_key": f"k{item_id}",
                    "created_at": WHEN,
                }
                for item_id, flag, finish_reason, _after in ANSWERS
            ],
        )
    engine.dispose()


def answer_flags(engine: Engine) -> list[tuple[int, str]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT item_id, flag FROM response ORDER BY item_id"))
        return [(item_id, flag) for item_id, flag in rows]


def test_answers_cut_at_the_token_limit_are_reflagged_truncated(
    url: str, engines: list[Engine]
) -> None:
    make_0003_database(url)
    before = sa.create_engine(url)
    engines.append(before)
    assert current_revision(before) == "0003"
    assert answer_flags(before) == [(item_id, flag) for item_id, flag, _, _ in ANSWERS]

    engine = make_engine(url)  # brings the database to head, through 0004
    engines.append(engine)
    assert current_revision(engine) == head_revision()
    assert answer_flags(engine) == [(item_id, after) for item_id, _, _, after in ANSWERS]

    # Downgraded, the previous release sees its own flags again: 'truncated' was its 'ok'.
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0003")
    assert answer_flags(engine) == [(item_id, flag) for item_id, flag, _, _ in ANSWERS]


def test_0009_adds_item_provenance_and_the_generation_call_table_and_takes_them_back(
    url: str, engines: list[Engine]
) -> None:
    # A database at 0008 holding one hand-written item: after 0009 the item is unchanged with
    # no provenance and the call table is empty; a generated item and its call can be stored;
    # downgraded to 0008, both are gone and the hand-written item is as it was.
    engine = sa.create_engine(url)
    engines.append(engine)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0008")
        old = sa.MetaData()
        old.reflect(conn)
        assert "provenance" not in old.tables["item"].c
        assert "itemgenerationcall" not in old.tables
        conn.execute(
            old.tables["dataset"].insert(),
            [{"id": 1, "name": "sample", "description": "", "created_at": WHEN}],
        )
        conn.execute(
            old.tables["item"].insert(),
            [
                {
                    "id": 1, "dataset_id": 1, "key": "s1-gender-1", "stage": "S1",
                    "factor": "gender", "scenario": "career_counseling",
                    "fields": {"question": "?", "expected_answer": "!"}, "content_hash": "h1",
                }
            ],
        )  # fmt: skip
        command.upgrade(alembic_config(conn), "0009")
    assert current_revision(engine) == "0009"
    with engine.begin() as conn:
        rows = conn.execute(sa.text("SELECT key, provenance FROM item")).all()
        assert rows == [("s1-gender-1", None)]
        assert conn.execute(sa.text("SELECT count(*) FROM itemgenerationcall")).scalar() == 0
        new = sa.MetaData()
        new.reflect(conn)
        conn.execute(
            new.tables["item"].insert(),
            [
                {
                    "id": 2, "dataset_id": 1, "key": "gen-S1-gender-career_counseling-0a1b2c3d",
                    "stage": "S1", "factor": "gender", "scenario": "career_counseling",
                    "fields": {"question": "??", "expected_answer": "!!"}, "content_hash": "h2",
                    "review_status": "draft", "provenance": {"source": "generated"},
                }
            ],
        )  # fmt: skip
        call = {
            "dataset_id": 1, "stage": "S1", "factor": "gender", "scenario": "career_counseling",
            "attempt": 0, "asked": 1, "endpoint_name": "e", "base_url": "u", "model": "m",
            "prompt_version": "v", "prompt_hash": "p", "params": {}, "cache_key": "k",
            "cached": False, "status": "ok", "added": 1, "prompt_tokens": 0,
            "completion_tokens": 0, "latency_s": 0.0, "created_at": WHEN,
        }  # fmt: skip
        conn.execute(new.tables["itemgenerationcall"].insert(), [call])
        with pytest.raises(sa.exc.IntegrityError):  # one row per (dataset, cell, attempt)
            with conn.begin_nested():
                conn.execute(new.tables["itemgenerationcall"].insert(), [call])
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0008")
    columns = sa.inspect(engine)
    assert "provenance" not in {c["name"] for c in columns.get_columns("item")}
    assert "itemgenerationcall" not in columns.get_table_names()
    with engine.connect() as conn:
        keys = conn.execute(sa.text("SELECT key FROM item ORDER BY id")).scalars().all()
    assert keys == ["s1-gender-1", "gen-S1-gender-career_counseling-0a1b2c3d"]
