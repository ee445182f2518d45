"""Pairwise judgments made elsewhere: imported from files, and their position bias, repetition
stability, win rates and Bradley-Terry strengths per judge (``fairjudge judgments``, ``GET
/api/v1/pairwise/position``). The domain is ``judge.trust.pairwise*``; this is its door."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.trust.pairwise_import import PairwiseImportSummary

FORMATS = ("shi2024", "csv", "jsonl")


class PositionOptions(BaseModel):
    """How the figures are computed (the options of ``fairjudge judgments position``)."""

    model_config = ConfigDict(extra="forbid")
    judge: str | None = Field(
        default=None, min_length=1, max_length=200, description="Only this judge (default: all)."
    )
    inconsistent: Literal["tie", "apart"] = Field(
        default="tie",
        description="An inconsistent pair (the verdict follows the position): counted as a "
        "tie, or kept apart (left out of win rates and Bradley-Terry, counted on its own).",
    )
    level: float = Field(default=0.95, gt=0.5, lt=1, description="Confidence of the intervals.")
    n_bootstrap: int = Field(
        default=1000, ge=100, le=10_000, description="Bootstrap resamples of each interval."
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="The bootstrap's seed.")


def import_judgments(
    engine: Engine,
    path: str | Path,
    fmt: str,
    *,
    judge: str | None = None,
    repetition: int | None = None,
    models: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Store the pairwise judgments of ``path`` (a file, or a folder of shi2024 records),
    checked whole: ``InvalidInputError`` lists every problem and nothing is stored."""
    from judge.trust.pairwise_import import import_pairwise

    summary = import_pairwise(engine, path, fmt, judge=judge, repetition=repetition, models=models)
    return asdict(summary)


def import_judgments_text(
    engine: Engine,
    text: str,
    fmt: str,
    *,
    judge: str | None = None,
    models: Sequence[str] | None = None,
) -> PairwiseImportSummary:
    """``import_judgments`` of a request's text (one file's content): checked whole, every
    problem listed, nothing stored from a bad text."""
    from judge.trust.pairwise_files import read_pairwise_text
    from judge.trust.pairwise_import import store_source

    read = read_pairwise_text(text, fmt, judge=judge)
    return store_source(engine, read, "request body", fmt, models)


def pairwise_position(session: Session, options: PositionOptions) -> dict[str, Any]:
    """Every judge's figures (of ``options.judge`` alone when given) as JSON-ready data;
    ``NotFoundError`` when no verdict is stored (for that judge)."""
    found = pairwise_position_or_none(session, options)
    if found is None:
        from judge.errors import NotFoundError

        who = f" of judge {options.judge!r}" if options.judge else ""
        raise NotFoundError(
            f"no pairwise judgments{who} stored: import some with `fairjudge judgments import`"
        )
    return found


def pairwise_position_or_none(session: Session, options: PositionOptions) -> dict[str, Any] | None:
    """``pairwise_position``'s figures, or None when no verdict is stored (the dashboard's
    page then says so)."""
    from judge.trust.pairwise import load_verdicts, pairwise_figures

    verdicts = load_verdicts(session, options.judge)
    if not verdicts:
        return None
    result = pairwise_figures(
        verdicts, inconsistent=options.inconsistent, level=options.level,
        n_bootstrap=options.n_bootstrap, seed=options.seed,
    )  # fmt: skip
    return result.to_json()
