"""Exports: a judge run's judgments and the answers it judged as CSV and JSON Lines files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.exports import ExportResult


def export_formats(text: str | Sequence[str]) -> tuple[str, ...]:
    """The file formats named in ``text`` ("csv,jsonl"); InvalidInputError for another."""
    from judge.exports import parse_formats

    return parse_formats(text)


def export_run(
    engine: Engine, judge_run_id: int, out_dir: str | Path, *, formats: Sequence[str]
) -> ExportResult:
    """Write every judgment of the judge run and every answer it judged into ``out_dir``,
    each judgment with the run's standing on its rubric (``judge_standing``)."""
    from judge.exports import export_judge_run
    from judge.store.engine import session_scope
    from server.usecases.standing import run_standing

    with session_scope(engine) as session:
        standing = {r: s.state for r, s in run_standing(session, judge_run_id).items()}
        return export_judge_run(session, judge_run_id, out_dir, standing=standing, formats=formats)
