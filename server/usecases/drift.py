"""Watching a series of judge runs for drift (``fairjudge drift``): the runs of one judge
configuration on the same anchor items, in release order, each checked against the baseline
with an alarm that stays valid however often one looks.

The series and its refusals are ``judge.reports.drift``; the statistics are
``judge.stats.sequential``. This module opens nothing: it takes the caller's session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from judge.stats.sequential import ALPHA

if TYPE_CHECKING:
    from sqlmodel import Session

    from judge.reports.drift import DriftSeries
    from judge.reports.sections import Table


def drift(
    session: Session,
    judge_run_ids: Sequence[int],
    *,
    figures: Sequence[str] = (),
    baseline: int = 1,
    alpha: float = ALPHA,
) -> DriftSeries:
    """The drift of each figure over the series (every rubric mean when ``figures`` is empty)
    against the mean of its first ``baseline`` runs. InvalidInputError (one line saying what
    to fix) for fewer than two runs, a run listed twice, runs of another configuration or
    dataset, a gap in the anchor items, an unknown figure; NotFoundError for an unknown run."""
    from judge.reports.drift import drift_series

    return drift_series(session, judge_run_ids, figures=figures, baseline=baseline, alpha=alpha)


def drift_summary(series: DriftSeries) -> tuple[list[Table], list[str]]:
    """The tables a terminal shows (one per figure, a row per run) and the lines after them."""
    from judge.reports.drift import drift_tables

    return drift_tables(series)
