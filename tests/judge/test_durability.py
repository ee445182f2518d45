"""A kill costs at most what was in flight: ``kill -9`` at random moments of a ``judge`` or
``generate`` command, then a rerun, stores every result exactly once and pays again for at
most ``concurrency`` calls per kill (each result is committed before its worker may start
another call; docs/judging.md)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func
from sqlmodel import Session, select

from judge.store.tables import Judgment, Response
from tests.support.factories import FAIRJUDGE, SAMPLE, write_config
from tests.support.kills import kill_at_random_moments, requests_of
from tests.support.stub_openai import StubServer

CONCURRENCY = 4
KILLS = 5
# The sample's 108 judgments: 72 items with one rubric, 18 S2 items with three (72 + 2 x 18),
# as counted in tests/server/cli/test_kill_and_report.py's report test.
JUDGMENTS = 108


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("db_url" if request.param == "sqlite" else "pg_url"))


def setup(tmp_path: Path, stub: StubServer, url: str) -> list[str]:
    config = write_config(tmp_path / "c.toml", stub.base_url, url, concurrency=CONCURRENCY)
    base = [*FAIRJUDGE, "--config", str(config)]
    subprocess.run([*base, "dataset", "import", str(SAMPLE)], check=True, capture_output=True)
    return base


def test_kill_9_during_judge_repays_at_most_what_was_in_flight(
    tmp_path: Path, store_url: str
) -> None:
    with StubServer(latency=0.05) as stub:
        base = setup(tmp_path, stub, store_url)
        subprocess.run([*base, "generate", "fairmonitor_sample"], check=True, capture_output=True)
        landed = kill_at_random_moments(
            [*base, "judge", "1"], lambda: requests_of(stub, "judge"), random.Random(9), KILLS
        )
        final = subprocess.run([*base, "judge", "1"], capture_output=True, text=True)
        assert final.returncode == 0, final.stderr
        paid = requests_of(stub, "judge")
    engine = create_engine(store_url)
    try:
        with Session(engine) as s:
            keys = s.exec(select(Judgment.item_id, Judgment.rubric, Judgment.sample_index)).all()
    finally:
        # Closed now, not when collected: the database is dropped after the test, and a
        # connection left to the collector warns (warnings are errors).
        engine.dispose()
    assert len(keys) == JUDGMENTS and len(set(keys)) == JUDGMENTS
    assert landed >= 3  # most of the kills hit a running command, so the bound is tested
    # Each judgment is one call (the stub's grades are valid): every extra one was repaid.
    assert paid - JUDGMENTS <= CONCURRENCY * landed, (paid, landed)


def test_kill_9_during_generate_repays_at_most_what_was_in_flight(
    tmp_path: Path, db_url: str
) -> None:
    with StubServer(latency=0.05) as stub:
        base = setup(tmp_path, stub, db_url)
        command = [*base, "generate", "fairmonitor_sample"]
        landed = kill_at_random_moments(
            command, lambda: requests_of(stub, "gen"), random.Random(3), KILLS
        )
        final = subprocess.run(command, capture_output=True, text=True)
        assert final.returncode == 0, final.stderr
        paid = requests_of(stub, "gen")
    engine = create_engine(db_url)
    try:
        with Session(engine) as s:
            keys = s.exec(select(Response.run_id, Response.item_id, Response.part)).all()
            items = s.exec(select(func.count()).select_from(Response)).one()
    finally:
        engine.dispose()
    assert len(set(keys)) == len(keys) == items and {run for run, *_ in keys} == {1}
    assert landed >= 3
    assert paid - len(keys) <= CONCURRENCY * landed, (paid, landed)
