"""Rubrics: the bundled and registered ones, registering a user's rubric file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.config import Settings
    from judge.grading.registry import RegisteredRubric
    from judge.grading.rubrics import RubricSet


def rubrics(
    settings: Settings,
    session: Session | None = None,
    *,
    rubric_set: str | None = None,
    judge_run_id: int | None = None,
) -> RubricSet:
    """The built-in FairMonitor rubrics; with ``rubric_set`` ("NAME,NAME") the named built-in
    and registered rubrics; with ``judge_run_id`` the rubrics that judge run applied, in the
    versions it used (what a campaign over it rates). Both read through ``session``."""
    from judge.grading.registry import judge_run_rubric_set, resolve_rubric_set
    from judge.grading.rubrics import BUILTIN_SET, load_rubrics

    builtin = load_rubrics(settings.prompts_path())
    named = rubric_set is not None and rubric_set.strip().lower() != BUILTIN_SET
    if not named and judge_run_id is None:
        return builtin
    if session is None:
        raise ValueError("reading registered rubrics needs a session")
    if judge_run_id is not None:
        return judge_run_rubric_set(session, builtin, judge_run_id)
    return resolve_rubric_set(session, builtin, rubric_set)


def register_rubric(engine: Engine, source: str | Path) -> list[RegisteredRubric]:
    """Check and store the rubrics of a file (a Path to read, or its text as a str): all or
    none; an unchanged definition adds nothing, a changed one is the name's next version."""
    from judge.grading.registry import register_rubrics

    return register_rubrics(engine, source)


def list_rubrics(session: Session) -> list[RegisteredRubric]:
    """The latest version of every registered rubric, by name."""
    from judge.grading.registry import list_registered

    return list_registered(session)


def registered_rubric(session: Session, name: str, version: int | None = None) -> RegisteredRubric:
    """A registered rubric in one version (default: its latest); NotFoundError naming the
    registered ones."""
    from judge.grading.registry import get_registered

    return get_registered(session, name, version)
