"""Reads that more than one stage needs, so no stage reads another's rows through its runner."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, func, select

from judge.errors import NotFoundError
from judge.store.tables import Dataset, GenerationRun, Item, JudgeRun, Judgment, Response


def get_dataset(session: Session, name: str) -> Dataset:
    dataset = session.exec(select(Dataset).where(Dataset.name == name)).first()
    if dataset is None:
        known = ", ".join(session.exec(select(Dataset.name)).all()) or "none yet"
        raise NotFoundError(
            f"no dataset named {name!r} (known: {known}); "
            "import one with `fairjudge dataset import FILE`"
        )
    return dataset


def dataset_items(session: Session, name: str) -> list[Item]:
    dataset = get_dataset(session, name)
    return list(
        session.exec(select(Item).where(Item.dataset_id == dataset.id).order_by(col(Item.id)))
    )


def get_generation_run(session: Session, run_id: int) -> GenerationRun:
    run = session.get(GenerationRun, run_id)
    if run is None:
        raise NotFoundError(f"no generation run {run_id}; see `fairjudge runs`")
    return run


def get_judge_run(session: Session, run_id: int) -> JudgeRun:
    run = session.get(JudgeRun, run_id)
    if run is None:
        raise NotFoundError(f"no judge run {run_id}; see `fairjudge runs`")
    return run


def responses_by_item(session: Session, run_id: int) -> dict[int, dict[str, Response]]:
    """{item_id: {part: Response}} for one generation run."""
    out: dict[int, dict[str, Response]] = {}
    for row in session.exec(select(Response).where(Response.run_id == run_id)):
        out.setdefault(row.item_id, {})[row.part] = row
    return out


def run_items(session: Session, run_id: int) -> list[Item]:
    """The items that have at least one stored response in the run, in id order."""
    ids = select(Response.item_id).where(Response.run_id == run_id).distinct()
    return list(session.exec(select(Item).where(col(Item.id).in_(ids)).order_by(col(Item.id))))


@dataclass(frozen=True)
class GenerationRunInfo:
    id: int
    dataset: str
    endpoint: str
    model: str
    temperature: float
    answers: int
    status: str
    created_at: str


@dataclass(frozen=True)
class JudgeRunInfo:
    id: int
    generation_run: int
    model: str
    prompt_variant: str
    temperature: float
    samples: int
    scored: int
    unscored: int
    status: str


@dataclass(frozen=True)
class RunListing:
    generation_runs: list[GenerationRunInfo]
    judge_runs: list[JudgeRunInfo]


def list_runs(session: Session) -> RunListing:
    """Generation runs and judge runs with their row counts."""
    gens = []
    for run, name in session.exec(
        select(GenerationRun, Dataset.name).join(Dataset).order_by(col(GenerationRun.id))
    ):
        assert run.id is not None
        n = session.exec(select(func.count()).where(Response.run_id == run.id)).one()
        gens.append(
            GenerationRunInfo(
                run.id,
                name,
                run.endpoint_name,
                run.model,
                run.temperature,
                n,
                run.status,
                run.created_at.isoformat(),
            )
        )
    judges = []
    for jrun in session.exec(select(JudgeRun).order_by(col(JudgeRun.id))):
        assert jrun.id is not None
        counts = dict(
            session.exec(
                select(Judgment.status, func.count())
                .where(Judgment.judge_run_id == jrun.id)
                .group_by(Judgment.status)
            ).all()
        )
        judges.append(
            JudgeRunInfo(
                jrun.id,
                jrun.generation_run_id,
                jrun.model,
                jrun.prompt_variant,
                jrun.temperature,
                jrun.samples,
                counts.get("scored", 0),
                counts.get("unscored", 0),
                jrun.status,
            )
        )
    return RunListing(gens, judges)
