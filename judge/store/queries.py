"""Reads that more than one stage needs, so no stage reads another's rows through its runner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlmodel import Session, col, func, select

from judge.endpoint_url import redacted
from judge.errors import NotFoundError
from judge.store.tables import (
    CallCache,
    Dataset,
    GenerationRun,
    Item,
    JudgeRun,
    Judgment,
    Response,
)


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


def run_answers(session: Session, run_id: int) -> list[tuple[Response, Item]]:
    """Every answer of one generation run with its item, in the order they were stored (id)."""
    rows = session.exec(
        select(Response, Item)
        .join(Item, col(Item.id) == col(Response.item_id))
        .where(col(Response.run_id) == run_id)
        .order_by(col(Response.id))
    )
    return list(rows.all())


def run_judgments(session: Session, judge_run_id: int) -> list[tuple[Judgment, Item, str | None]]:
    """Every judgment of one judge run with its item and the finish reason of the judge's call
    (None when the call cache has no row for it), in the order they were stored (id)."""
    rows = session.exec(
        select(Judgment, Item, CallCache.finish_reason)
        .join(Item, col(Item.id) == col(Judgment.item_id))
        .join(CallCache, col(CallCache.key) == col(Judgment.cache_key), isouter=True)
        .where(col(Judgment.judge_run_id) == judge_run_id)
        .order_by(col(Judgment.id))
    )
    return list(rows.all())


def judgment_scores(session: Session, judge_run_id: int) -> list[tuple[int, str, str, int | None]]:
    """(item id, rubric, status, score) of every judgment of one judge run, in the order they
    were stored (id)."""
    rows = session.exec(
        select(Judgment.item_id, Judgment.rubric, Judgment.status, Judgment.score)
        .where(col(Judgment.judge_run_id) == judge_run_id)
        .order_by(col(Judgment.id))
    )
    return list(rows.all())


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
    source: str = "generated"
    base_url: str = ""


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
    rubric_set: str = "fairmonitor"
    endpoint: str = ""
    base_url: str = ""


@dataclass(frozen=True)
class RunListing:
    generation_runs: list[GenerationRunInfo]
    judge_runs: list[JudgeRunInfo]


def list_runs(
    session: Session, *, generation_run: int | None = None, judge_run: int | None = None
) -> RunListing:
    """Generation runs and judge runs with their row counts; with ``generation_run`` or
    ``judge_run`` only that run (and no runs of the other kind)."""
    if generation_run is not None or judge_run is not None:
        gens = [] if generation_run is None else _generation_runs(session, only=generation_run)
        judges = [] if judge_run is None else _judge_runs(session, only=judge_run)
        return RunListing(gens, judges)
    return RunListing(_generation_runs(session), _judge_runs(session))


def page_generation_runs(
    session: Session, *, limit: int, offset: int
) -> tuple[list[GenerationRunInfo], int]:
    """One page of generation runs (by id), read with LIMIT/OFFSET, and how many there are."""
    total = session.exec(select(func.count()).select_from(GenerationRun)).one()
    return _generation_runs(session, limit=limit, offset=offset), int(total)


def page_judge_runs(session: Session, *, limit: int, offset: int) -> tuple[list[JudgeRunInfo], int]:
    """One page of judge runs (by id), read with LIMIT/OFFSET, and how many there are."""
    total = session.exec(select(func.count()).select_from(JudgeRun)).one()
    return _judge_runs(session, limit=limit, offset=offset), int(total)


def _generation_runs(
    session: Session, *, only: int | None = None, limit: int | None = None, offset: int = 0
) -> list[GenerationRunInfo]:
    query = select(GenerationRun, Dataset.name).join(Dataset).order_by(col(GenerationRun.id))
    if only is not None:
        query = query.where(col(GenerationRun.id) == only)
    if limit is not None:
        query = query.limit(limit).offset(offset)
    rows = list(session.exec(query))
    ids = [run.id for run, _ in rows]
    answers = dict(
        session.exec(
            select(Response.run_id, func.count())
            .where(col(Response.run_id).in_(ids))
            .group_by(col(Response.run_id))
        ).all()
    )
    out = []
    for run, name in rows:
        assert run.id is not None
        out.append(
            GenerationRunInfo(
                run.id,
                name,
                run.endpoint_name,
                run.model,
                run.temperature,
                int(answers.get(run.id, 0)),
                run.status,
                run.created_at.isoformat(),
                run.source,
                redacted(run.base_url),  # a secret stored before 0017 is never shown
            )
        )
    return out


def _judge_runs(
    session: Session, *, only: int | None = None, limit: int | None = None, offset: int = 0
) -> list[JudgeRunInfo]:
    query = select(JudgeRun).order_by(col(JudgeRun.id))
    if only is not None:
        query = query.where(col(JudgeRun.id) == only)
    if limit is not None:
        query = query.limit(limit).offset(offset)
    runs = list(session.exec(query))
    counts: dict[tuple[int, str], int] = {
        (int(run_id), str(status)): int(n)
        for run_id, status, n in session.exec(
            select(Judgment.judge_run_id, Judgment.status, func.count())
            .where(col(Judgment.judge_run_id).in_([r.id for r in runs]))
            .group_by(col(Judgment.judge_run_id), col(Judgment.status))
        ).all()
    }
    out = []
    for jrun in runs:
        assert jrun.id is not None
        out.append(
            JudgeRunInfo(
                jrun.id,
                jrun.generation_run_id,
                jrun.model,
                jrun.prompt_variant,
                jrun.temperature,
                jrun.samples,
                counts.get((jrun.id, "scored"), 0),
                counts.get((jrun.id, "unscored"), 0),
                jrun.status,
                jrun.rubric_set,
                jrun.endpoint_name,
                redacted(jrun.base_url),
            )
        )
    return out


@dataclass(frozen=True)
class JudgmentFilter:
    """Which judgments a listing returns; None leaves a field unfiltered."""

    judge_run: int | None = None
    rubric: str | None = None
    status: str | None = None
    score: int | None = None
    item: str | None = None


def list_judgments(
    session: Session, where: JudgmentFilter, *, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """One page of judgments (by id) with their item's key, and how many match in all."""
    conditions = []
    if where.judge_run is not None:
        conditions.append(col(Judgment.judge_run_id) == where.judge_run)
    if where.rubric is not None:
        conditions.append(col(Judgment.rubric) == where.rubric)
    if where.status is not None:
        conditions.append(col(Judgment.status) == where.status)
    if where.score is not None:
        conditions.append(col(Judgment.score) == where.score)
    if where.item is not None:
        conditions.append(col(Item.key) == where.item)
    query = select(Judgment, Item.key).join(Item, col(Item.id) == Judgment.item_id)
    counted = (
        select(func.count()).select_from(Judgment).join(Item, col(Item.id) == Judgment.item_id)
    )
    for condition in conditions:
        query, counted = query.where(condition), counted.where(condition)
    rows = session.exec(query.order_by(col(Judgment.id)).offset(offset).limit(limit)).all()
    out = [{**j.model_dump(), "item_key": key} for j, key in rows]
    return out, int(session.exec(counted).one())


def list_items(
    session: Session,
    dataset: str,
    *,
    stage: str | None = None,
    factor: str | None = None,
    limit: int,
    offset: int,
) -> tuple[list[Item], int]:
    """One page of a dataset's items (by id), and how many match in all."""
    ds = get_dataset(session, dataset)
    conditions = [col(Item.dataset_id) == ds.id]
    if stage is not None:
        conditions.append(col(Item.stage) == stage)
    if factor is not None:
        conditions.append(col(Item.factor) == factor)
    rows = session.exec(
        select(Item).where(*conditions).order_by(col(Item.id)).offset(offset).limit(limit)
    ).all()
    total = session.exec(select(func.count()).select_from(Item).where(*conditions)).one()
    return list(rows), int(total)


def get_item(session: Session, dataset: str, key: str) -> Item:
    ds = get_dataset(session, dataset)
    item = session.exec(
        select(Item).where(col(Item.dataset_id) == ds.id, col(Item.key) == key)
    ).first()
    if item is None:
        raise NotFoundError(f"dataset {dataset!r} has no item {key!r}")
    return item


def list_responses(
    session: Session, run_id: int, *, limit: int, offset: int
) -> tuple[list[Response], int]:
    """One page of a generation run's answers (by id), and how many it has."""
    get_generation_run(session, run_id)
    rows = session.exec(
        select(Response)
        .where(col(Response.run_id) == run_id)
        .order_by(col(Response.id))
        .offset(offset)
        .limit(limit)
    ).all()
    total = session.exec(
        select(func.count()).select_from(Response).where(col(Response.run_id) == run_id)
    ).one()
    return list(rows), int(total)


class Slot(NamedTuple):
    """Where one judgment sits in its item x rubric cell: the ``order`` it was judged in
    ("given", "swapped", or None for a rubric judged in one order) and its ``repeat``, the
    sample within that order (0 .. samples - 1)."""

    order: str | None
    repeat: int


def sample_slot(sample_index: int, position: str | None, samples: int) -> Slot:
    """The order and repeat of a judgment. A run judged in both orders (``--swap-order``)
    stores a pair rubric's ``samples`` repeats as given at indices 0..n-1 and the swapped
    ones at n..2n-1, so a cell holds 2n judgments there; anything that lays samples out per
    item (self-consistency grids, exports) must read the repeat, not the raw index.

    >>> sample_slot(3, "swapped", 2)
    Slot(order='swapped', repeat=1)
    >>> sample_slot(1, None, 2)
    Slot(order=None, repeat=1)
    """
    if position == "swapped":
        return Slot("swapped", sample_index - samples)
    return Slot(position, sample_index)
