"""The section a judge run's report opens with: the answer before the definitions and tables.

Per factor and stage metric, the best figure there is: prediction-powered where people rated
items of the cell (the judge's scores corrected by the ratings, ``annotation.estimates``),
the judge's alone otherwise, always labelled which. Then, per rubric people rated, whether
the judge may stand in for them: the alt-test's verdict at each of the paper's margins
(expert 0.2, skilled 0.15, crowd 0.1), or why the test cannot run. The verdicts are computed
by the caller (``server.usecases.alttest``) and handed in as lines, so this module stays a
pure layout of results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from annotation.estimates import PPI, Estimates
from judge.reports.sections import Section, Table
from judge.stats.intervals import interval_legend

ANSWER_TITLE = "The answer"


@dataclass(frozen=True)
class Verdict:
    """One rubric's alt-test: its verdict per margin preset (None where refused), or why it
    was refused."""

    rubric: str
    by_preset: dict[str, str | None]
    refused: str | None = None


def answer_section(estimates: Estimates, verdicts: Sequence[Verdict]) -> Section:
    """The opening section: best figures per factor x metric, then the alt-test verdicts."""
    rows = []
    payload_rows = []
    for cell in estimates.metrics:
        best = cell.best
        source = "prediction-powered" if best.method == PPI else "judge only"
        rows.append([cell.factor, cell.label, best.text(), source, str(cell.human_only.n)])
        payload_rows.append(
            {
                "factor": cell.factor,
                "metric": cell.target,
                **best.brief(),
                "reason": best.reason,  # why the figure has no interval, if it has none
                "rated": cell.human_only.n,
            }
        )
    tables = [
        Table(
            "Best figure per factor and stage metric (percent, 95 % interval)",
            ["factor", "metric", "figure [95 % CI]", "from", "items rated"],
            rows,
        )
    ]
    presets = sorted({p for v in verdicts for p in v.by_preset}, key=_margin_order)
    if verdicts:
        columns = [f"epsilon: {p}" for p in presets] or ["verdict"]
        tables.append(
            Table(
                "May the judge replace the annotators? (the alt-test, per rubric)",
                ["rubric", *columns],
                [
                    [v.rubric, *(v.by_preset.get(p) or f"cannot run: {v.refused}" for p in presets)]
                    if presets
                    else [v.rubric, f"cannot run: {v.refused}"]
                    for v in verdicts
                ],
            )
        )
    rated = sum(c.human_only.n for c in estimates.metrics)
    notes = [
        "prediction-powered: the judge's scores on every item, corrected by how people and the "
        "judge differ on the items people rated; judge only: no one rated the cell, so the "
        "judge's bias, if any, is in the figure."
        if rated
        else "no human ratings: every figure is the judge's alone (run a campaign or import "
        "ratings to correct them).",
        f"design of the ratings: {estimates.design.name} ({estimates.design.description}).",
        f"judge only: {interval_legend()}, the same interval as the stage-metric tables; "
        "prediction-powered: a normal interval (PPI++).",
    ]
    if verdicts:
        notes.append(
            "alt-test (Calderon, Reichart and Dror, ACL 2025): the judge passes when, for at "
            "least half the annotators, it agrees with the others at least about as often as "
            "that annotator does, within the margin epsilon (0.2 for experts, 0.15 skilled, 0.1 "
            "crowd). Its details: `fairjudge agreement alt-test`."
        )
    else:
        notes.append("no alt-test: the run has no human ratings.")
    payload = {
        "best": payload_rows,
        "alt_test": [
            {"rubric": v.rubric, "verdicts": v.by_preset, "refused": v.refused} for v in verdicts
        ],
        "design": estimates.design.name,
    }
    return Section(ANSWER_TITLE, "answer", payload, tables=tables, notes=notes)


def _margin_order(preset: str) -> int:
    order = ("expert", "skilled", "crowd")
    return order.index(preset) if preset in order else len(order)
