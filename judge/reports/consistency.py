"""The judge's agreement with itself across samples, as a report section (runs with
samples > 1, with or without human ratings).

In a run judged in both orders (``--swap-order``) a pair rubric's item has ``samples`` repeats
in each order. Its repeats are compared only within one order: each (item, order) is one row
of the grid, so the order effect (reported apart, under order bias) does not count as the
judge disagreeing with itself."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlmodel import Session

from judge.reports.facts import RunFacts, load_run_facts
from judge.reports.sections import Section, Table
from judge.stats.levels import self_consistency
from judge.store.queries import sample_slot

SELF_CONSISTENCY_TITLE = "Judge self-consistency"


def self_consistency_section(
    session: Session, judge_run_id: int, *, facts: RunFacts | None = None
) -> Section | None:
    """Agreement of the judge with itself across samples; None for single-sample runs. From
    ``facts`` when given (then it reads nothing), else from the store."""
    facts = facts or load_run_facts(session, judge_run_id)
    jrun = facts.judge_run
    if jrun.samples < 2:
        return None
    rows = [
        (j.item_id, j.rubric, sample_slot(j.sample_index, j.position, jrun.samples), j.score)
        for j in (row.judgment for row in facts.judgments)
    ]
    payload: dict[str, Any] = {}
    table_rows = []
    for rubric in sorted({r for _, r, _, _ in rows}):
        # one row per item and order: repeats of one order are the judge's self-agreement
        keys = sorted({(i, slot.order or "") for i, r, slot, _ in rows if r == rubric})
        index = {k: n for n, k in enumerate(keys)}
        grid = np.full((len(keys), jrun.samples), np.nan)
        for item, r, slot, score in rows:
            if r == rubric and score is not None:
                grid[index[(item, slot.order or "")], slot.repeat] = score
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
                [
                    "Judged in both orders: a pair rubric's item counts once per order, and "
                    "only repeats of the same order are compared (the order effect is under "
                    "order bias)."
                ]
                if jrun.swap_order
                else [],
            )
        ],
    )
