"""Runs are listed a page at a time in SQL (issue 26): a store with 1,200 more generation runs
and 1,200 more judge runs than the judged template answers a page of either with a fixed
number of statements, whatever the page's place or the store's size, and with the same rows
and counts as the raw tables say (read with sqlite3, not with the code under test)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import event, insert
from sqlalchemy.engine import Engine
from sqlmodel import Session

from judge.store.engine import make_engine
from judge.store.queries import page_generation_runs, page_judge_runs
from judge.store.tables import GenerationRun, JudgeRun
from tests.support import stores

EXTRA = 1_200


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory, judged_s1_template: stores.Judged
) -> Iterator[tuple[Engine, Path]]:
    """The judged S1 template (generation run 1 with 18 answers, judge run 1 with 18
    judgments) plus EXTRA empty generation runs and EXTRA empty judge runs of run 1."""
    path = tmp_path_factory.mktemp("paging") / "fairjudge.db"
    engine = make_engine(stores.copy_store(judged_s1_template.path, path))
    common = {
        "endpoint_name": "test",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "temperature": 0.0,
        "max_tokens": 32,
        "status": "finished",
    }
    with engine.begin() as conn:
        gens = [{**common, "dataset_id": 1, "template_version": "v"} for _ in range(EXTRA)]
        conn.execute(insert(GenerationRun), gens)  # type: ignore[arg-type]
        judges = [
            {
                **common,
                "generation_run_id": 1,
                "prompt_variant": "default",
                "samples": 1,
                "aggregation": "mean",
                "config_hash": f"extra-{i}",
            }
            for i in range(EXTRA)
        ]
        conn.execute(insert(JudgeRun), judges)  # type: ignore[arg-type]
    yield engine, path
    engine.dispose()


def raw(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as db:
        return list(db.execute(sql).fetchall())


def statements(engine: Engine) -> list[str]:
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


@pytest.mark.parametrize(("limit", "offset"), [(50, 0), (50, 1_150), (500, 700), (7, 1_199)])
def test_a_page_of_generation_runs_is_what_the_tables_hold(
    store: tuple[Engine, Path], limit: int, offset: int
) -> None:
    engine, path = store
    ids = [r[0] for r in raw(path, "SELECT id FROM generationrun ORDER BY id")]
    answers = dict(raw(path, "SELECT run_id, count(*) FROM response GROUP BY run_id"))
    seen = statements(engine)
    with Session(engine) as session:
        rows, total = page_generation_runs(session, limit=limit, offset=offset)
    assert total == len(ids) == EXTRA + 1
    assert [r.id for r in rows] == ids[offset : offset + limit]
    assert {r.id: r.answers for r in rows} == {i: answers.get(i, 0) for i in ids[offset:][:limit]}
    # One count, one page, one grouped count of the page's answers: never one per run.
    assert len(seen) <= 3, seen


@pytest.mark.parametrize(("limit", "offset"), [(50, 0), (500, 1_000), (3, 600)])
def test_a_page_of_judge_runs_is_what_the_tables_hold(
    store: tuple[Engine, Path], limit: int, offset: int
) -> None:
    engine, path = store
    ids = [r[0] for r in raw(path, "SELECT id FROM judgerun ORDER BY id")]
    counts = raw(path, "SELECT judge_run_id, status, count(*) FROM judgment GROUP BY 1, 2")
    scored = {run: n for run, status, n in counts if status == "scored"}
    unscored = {run: n for run, status, n in counts if status == "unscored"}
    assert sum(scored.values()) + sum(unscored.values()) == 18  # the template's judgments
    seen = statements(engine)
    with Session(engine) as session:
        rows, total = page_judge_runs(session, limit=limit, offset=offset)
    assert total == len(ids) == EXTRA + 1
    assert [r.id for r in rows] == ids[offset : offset + limit]
    for row in rows:
        assert (row.scored, row.unscored) == (scored.get(row.id, 0), unscored.get(row.id, 0))
    assert len(seen) <= 3, seen
