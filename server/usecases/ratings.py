"""Human ratings collected outside Label Studio: a ratings file (``fairjudge ratings
import``) or a batch of rows (``POST /api/v1/ratings``), checked the same way and stored all
or nothing, against the built-in rubrics and every registered one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.usecases.rubrics import rubrics

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from annotation.ratings import RatingsImport
    from judge.config import Settings
    from judge.vocab import Scale


def import_ratings_file(
    engine: Engine,
    settings: Settings,
    path: str | Path,
    generation_run_id: int,
    *,
    replace: bool = False,
    scale: Scale | None = None,
    batch: str | None = None,
) -> RatingsImport:
    """Import a ratings file (CSV: item_id,rubric,rater,score[,rationale]) for a generation
    run's answers; every bad line is named and nothing is stored."""
    from annotation.ratings import import_ratings, rating_rubrics
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        applicable = rating_rubrics(session, rubrics(settings))
        return import_ratings(
            session, path, generation_run_id, applicable, replace=replace, scale=scale,
            batch=batch,
        )  # fmt: skip


def import_rating_rows(
    session: Session,
    settings: Settings,
    generation_run_id: int,
    rows: Sequence[Mapping[str, Any]],
    *,
    replace: bool = False,
    scale: Scale | None = None,
    batch: str | None = None,
) -> tuple[RatingsImport, str]:
    """Import a batch of ratings (each row as a ratings file's columns, named by position
    from 1 in problems); the summary and the batch they were stored in. The caller commits."""
    from annotation.ratings import DEFAULT_BATCH, rating_rubrics
    from annotation.ratings import import_rating_rows as store

    chosen = batch or DEFAULT_BATCH
    applicable = rating_rubrics(session, rubrics(settings))
    numbered = list(enumerate(rows, start=1))
    done = store(
        session, numbered, generation_run_id, applicable, replace=replace, scale=scale,
        batch=chosen,
    )  # fmt: skip
    return done, chosen
