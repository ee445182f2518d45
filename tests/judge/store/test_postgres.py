"""The same pipeline on a real PostgreSQL database instead of SQLite."""

from __future__ import annotations

import pytest
from sqlmodel import Session, func, select

from judge.data.datasets import import_items
from judge.grading.rubrics import load_rubrics
from judge.prompts import PromptBook
from judge.store.engine import make_engine, session_scope
from judge.store.queries import responses_by_item
from judge.store.tables import CallCache, Item, Judgment
from server import usecases
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer, grade_for

pytestmark = pytest.mark.postgres


def test_pipeline_on_postgres(pg_url: str, stub: StubServer) -> None:
    engine = make_engine(pg_url)
    settings = make_settings(stub.base_url, pg_url)
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    with session_scope(engine) as session:  # re-import adds nothing on PostgreSQL either
        assert import_items(session, SAMPLE, "sample").added == 0
    gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset="sample", limit=24))
    summary = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
    # 18 S1 items (ICS) + 6 S2 items (TCS, PCS, ETCS): 18 + 18 judgments.
    assert summary.tasks == 36 and summary.flags == {"scored": 36}

    # Provenance: rebuild every judge prompt from the stored item and answers; its hash must
    # match the stored one, and the stored score must be the stub's grade for that prompt
    # (1 + first byte of sha256(messages) mod 5, computed here independently of the run).
    book = PromptBook(settings.prompts_path())
    rubrics = load_rubrics(settings.prompts_path())
    with Session(engine) as s:
        answers = responses_by_item(s, gen.run_id)
        rows = s.exec(select(Judgment, Item).join(Item)).all()
        cached = s.exec(select(func.count()).select_from(CallCache)).one()
        for judgment, item in rows:
            texts = {p: r.raw_text or "" for p, r in answers[item.id].items()}
            rubric = rubrics[judgment.rubric]
            prompt = book.judge_prompt(
                rubric, rubric.render_texts(item.fields, texts), variant="plain"
            )
            assert judgment.prompt_hash == prompt.prompt_hash
            assert judgment.score == grade_for(prompt.messages)
    assert cached == 30 + 36  # 18 + 2 x 6 answers, 36 judgments: one cache row per call

    with session_scope(engine) as session:
        report = usecases.full_report(session, summary.run_id).to_json()
    assert report["n_item_scores"] == 36 and report["n_unscored_items"] == 0
    assert (
        usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id)
        ).model_calls
        == 0
    )
    engine.dispose()
