"""The judge's agreement with itself across samples, as a report section (runs with
samples > 1, with or without human ratings)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlmodel import Session, col, select

from judge.reports.sections import Section, Table
from judge.stats.levels import self_consistency
from judge.store.queries import get_judge_run
from judge.store.tables import Judgment

SELF_CONSISTENCY_TITLE = "Judge self-consistency"


def self_consistency_section(session: Session, judge_run_id: int) -> Section | None:
    """Agreement of the judge with itself across samples; None for single-sample runs."""
    jrun = get_judge_run(session, judge_run_id)
    if jrun.samples < 2:
        return None
    rows = session.exec(
        select(Judgment.item_id, Judgment.rubric, Judgment.sample_index, Judgment.score)
        .where(Judgment.judge_run_id == judge_run_id)
        .order_by(col(Judgment.item_id), col(Judgment.rubric), col(Judgment.sample_index))
    ).all()
    payload: dict[str, Any] = {}
    table_rows = []
    for rubric in sorted({r for _, r, _, _ in rows}):
        keys = sorted({i for i, r, _, _ in rows if r == rubric})
        index = {k: n for n, k in enumerate(keys)}
        grid = np.full((len(keys), jrun.samples), np.nan)
        for item, r, sample, score in rows:
            if r == rubric and score is not None:
                grid[index[item], sample] = score
        result = self_consistency(grid, warn=False)  # an undefined alpha keeps its reason
        payload[rubric] = result.to_dict()
        alpha = result.alpha_ordinal
        share = result.share_disagreeing
        table_rows.append(
            [
                rubric,
                str(result.n_items),
                f"n/a ({alpha.undefined_reason})"
                if alpha.undefined_reason
                else f"{alpha.value:.2f}",
                "n/a" if share is None else f"{share * 100:.0f} %",
            ]
        )
    return Section(
        title=SELF_CONSISTENCY_TITLE,
        json_key="self_consistency",
        payload=payload,
        tables=[
            Table(
                f"Judge self-consistency over {jrun.samples} samples",
                ["rubric", "items", "alpha (ordinal) across samples", "items whose samples differ"],
                table_rows,
            )
        ],
    )
