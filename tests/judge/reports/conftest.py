"""Judge runs made against the scripted stub, for the report tests: the whole sample once per
test session, and a small run with hostile text, an unreadable grade and a cut-off answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Item, Judgment, Response
from server import usecases
from tests.support import stores
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

HOSTILE = "<script>alert(1)</script>"
HOSTILE_EXPLANATION = '<img src=x onerror="alert(2)">'


@dataclass(frozen=True)
class JudgedRun:
    engine: Engine
    db_url: str
    generation_run_id: int
    judge_run_id: int


@pytest.fixture(scope="session")
def judged_sample(
    tmp_path_factory: pytest.TempPathFactory, judged_sample_template: stores.Judged
) -> Iterator[JudgedRun]:
    """The shipped sample (9 factors x 4 stages x 2 items) generated and judged once (a copy
    of the session's template, tests/support/stores.py)."""
    jud = judged_sample_template
    db_url = stores.copy_store(jud.path, tmp_path_factory.mktemp("sample") / "fairjudge.db")
    engine = make_engine(db_url)
    yield JudgedRun(engine, db_url, jud.generation_run_id, jud.judge_run_id)
    engine.dispose()


def small_items(path: Path) -> Path:
    """The sample's first item of each stage, plus two S1 copies: one whose question carries
    hostile markup (the stub echoes it into the answer) and one whose judge reply is prose
    (unscored: unparsable)."""
    lines = [json.loads(x) for x in SAMPLE.read_text().splitlines() if x.strip()]
    firsts = [next(x for x in lines if x["stage"] == stage) for stage in ("S1", "S2", "S3", "S4")]
    hostile = {**firsts[0], "id": "hostile", "question": f"Is {HOSTILE} fine?"}
    prose = {**firsts[0], "id": "prose", "question": firsts[0]["question"] + " #fault:prose_always"}
    path.write_text("\n".join(json.dumps(x) for x in [*firsts, hostile, prose]) + "\n")
    return path


@pytest.fixture
def small_run(tmp_path: Path, engine: Engine, db_url: str, stub: StubServer) -> JudgedRun:
    """Six items judged; then, as a model and a judge can do, one answer is marked cut off at
    max_tokens and one explanation carries markup (written into the store directly: the stub
    cannot produce a cut-off reply)."""
    settings = make_settings(stub.base_url, db_url)
    with session_scope(engine) as session:
        dataset = import_items(session, small_items(tmp_path / "small.jsonl"), "small").dataset
    gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset=dataset))
    jud = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
    with Session(engine) as session:
        s2 = session.exec(
            select(Response).join(Item).where(Item.stage == "S2", Response.part == "B")
        ).one()
        s2.finish_reason = "length"
        session.add(s2)
        s3 = session.exec(select(Judgment).join(Item).where(Item.stage == "S3")).one()
        s3.explanation = HOSTILE_EXPLANATION
        session.add(s3)
        session.commit()
    return JudgedRun(engine, db_url, gen.run_id, jud.run_id)
