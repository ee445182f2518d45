"""The pipeline's entry points, wiring settings to the runners; the CLI and server call these."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from judge.calls import RunSummary
from judge.client import ModelClient
from judge.config import Settings
from judge.generation import Progress, get_or_create_run, run_generation
from judge.judging import get_or_create_judge_run, run_judging
from judge.prompts import PromptBook
from judge.store import make_engine, session_scope
from judge.tables import Dataset, GenerationRun, JudgeRun, Judgment, Response


def open_store(settings: Settings) -> Engine:
    return make_engine(settings.database_url)


def make_client(settings: Settings, endpoint: str) -> ModelClient:
    """A client for a named endpoint, after checking that it serves the configured model."""
    client = ModelClient(endpoint, settings.endpoint(endpoint))
    client.check_model()
    return client


def generate(
    engine: Engine,
    settings: Settings,
    dataset: str,
    *,
    limit: int | None = None,
    new: bool = False,
    progress: Progress | None = None,
) -> RunSummary:
    cfg = settings.generation
    client = make_client(settings, cfg.endpoint)
    book = PromptBook(settings.prompts_dir)
    with session_scope(engine) as session:
        run = get_or_create_run(
            session,
            dataset,
            client,
            book,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            new=new,
        )
        run_id = run.id
    assert run_id is not None
    return run_generation(engine, run_id, client, book, limit=limit, progress=progress)


def judge(
    engine: Engine, settings: Settings, generation_run_id: int, *, progress: Progress | None = None
) -> RunSummary:
    client = make_client(settings, settings.judge.endpoint)
    book = PromptBook(settings.prompts_dir)
    with session_scope(engine) as session:
        jrun = get_or_create_judge_run(session, generation_run_id, client, settings.judge, book)
        jrun_id = jrun.id
    assert jrun_id is not None
    return run_judging(engine, jrun_id, client, book, progress=progress)


def list_runs(session: Session) -> dict[str, list[dict[str, Any]]]:
    """Generation runs and judge runs with their row counts."""
    gens = []
    for run, name in session.exec(
        select(GenerationRun, Dataset.name).join(Dataset).order_by(col(GenerationRun.id))
    ):
        n = session.exec(select(func.count()).where(Response.run_id == run.id)).one()
        gens.append(
            {
                "id": run.id,
                "dataset": name,
                "endpoint": run.endpoint_name,
                "model": run.model,
                "temperature": run.temperature,
                "answers": n,
                "status": run.status,
                "created_at": run.created_at.isoformat(),
            }
        )
    judges = []
    for jrun in session.exec(select(JudgeRun).order_by(col(JudgeRun.id))):
        counts = dict(
            session.exec(
                select(Judgment.status, func.count())
                .where(Judgment.judge_run_id == jrun.id)
                .group_by(Judgment.status)
            ).all()
        )
        judges.append(
            {
                "id": jrun.id,
                "generation_run": jrun.generation_run_id,
                "model": jrun.model,
                "prompt_variant": jrun.prompt_variant,
                "temperature": jrun.temperature,
                "samples": jrun.samples,
                "scored": counts.get("scored", 0),
                "unscored": counts.get("unscored", 0),
                "status": jrun.status,
            }
        )
    return {"generation_runs": gens, "judge_runs": judges}
