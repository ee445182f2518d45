"""The store read page by page, as the web API lists it: a dataset's items, a generation
run's answers, judgments filtered by run, rubric, status, score and item; and the store's
schema revision (``/health``). Answers produced elsewhere, posted as a batch of rows, are
stored here too (``POST /responses``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.config import Settings
    from judge.data.responses import ResponseRow, ResponsesImport
    from judge.store.tables import Item, Response


def list_items(
    session: Session,
    dataset: str,
    *,
    stage: str | None = None,
    factor: str | None = None,
    limit: int,
    offset: int,
) -> tuple[list[Item], int]:
    """One page of a dataset's items (by id), optionally of one stage or factor, and how
    many match in all."""
    from judge.store.queries import list_items as listing

    return listing(session, dataset, stage=stage, factor=factor, limit=limit, offset=offset)


def get_item(session: Session, dataset: str, key: str) -> Item:
    """One item of a dataset by its key; NotFoundError when there is none."""
    from judge.store.queries import get_item as get

    return get(session, dataset, key)


def list_responses(
    session: Session, generation_run_id: int, *, limit: int, offset: int
) -> tuple[list[Response], int]:
    """One page of a generation run's answers, and how many it has in all."""
    from judge.store.queries import list_responses as listing

    return listing(session, generation_run_id, limit=limit, offset=offset)


def list_judgments(
    session: Session,
    *,
    judge_run: int | None = None,
    rubric: str | None = None,
    status: str | None = None,
    score: int | None = None,
    item: str | None = None,
    limit: int,
    offset: int,
) -> tuple[list[dict[str, Any]], int]:
    """One page of judgments (by id) with their item's key, filtered by what is given, and
    how many match in all."""
    from judge.store.queries import JudgmentFilter
    from judge.store.queries import list_judgments as listing

    where = JudgmentFilter(judge_run, rubric, status, score, item)
    return listing(session, where, limit=limit, offset=offset)


def schema_revision(engine: Engine) -> str | None:
    """The migration the store is at (None before the first)."""
    from judge.store.engine import current_revision

    return current_revision(engine)


def import_response_rows(
    engine: Engine,
    settings: Settings,
    dataset: str,
    rows: Sequence[ResponseRow],
    *,
    model: str | None = None,
) -> ResponsesImport:
    """A batch of answers produced elsewhere into the imported generation run of
    ``dataset`` and the model label; all or nothing, bad rows named by position from 1."""
    from judge.data.responses import import_responses
    from judge.prompts import PromptBook

    book = PromptBook(settings.prompts_path())
    return import_responses(engine, dataset, rows, model=model, book=book)
