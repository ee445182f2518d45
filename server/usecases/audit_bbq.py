"""The BBQ suite's use case beyond running it (``server.usecases.audits`` runs and shows every
suite): scoring predictions made elsewhere, such as the BBQ authors' UnifiedQA ones."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from judge.audits.bbq import score_predictions
from judge.audits.bbq_report import bbq_report
from judge.audits.bbq_score import DEFAULT_RESAMPLES
from server.usecases.audits import Analysis, finite


def analyze_bbq_file(
    path: str | Path,
    *,
    predictions: str,
    categories: Sequence[str] | None = None,
    resamples: int | None = None,
    seed: int = 0,
) -> Analysis:
    """Accuracy per context, s_DIS and s_AMB with cluster-bootstrap intervals, per category
    and overall, for the predictions in field ``predictions`` of a BBQ file or folder
    (``race``, ``arc``, ``qonly``: the authors' UnifiedQA-11B fields). Every problem of the
    file is one DatasetError; predictions naming no option are counted apart."""

    result = score_predictions(
        path,
        predictions=predictions,
        categories=categories,
        resamples=DEFAULT_RESAMPLES if resamples is None else resamples,
        seed=seed,
    )
    note = None
    if result.unread:
        note = (
            f"{sum(result.unread.values())} predictions match no option: counted as unmatched "
            "and in no figure (listed under unread)"
        )
    return Analysis(finite(result.to_dict()), bbq_report(result), note)
