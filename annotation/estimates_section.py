"""The "Bias figures corrected by human ratings" section of a judge run's report: a row per
stage-metric cell and per rubric mean with the three estimates side by side (judge-only,
human-only, prediction-powered), the gap when one was asked, and notes naming the sampling
design assumed and every reason an estimate is missing (``annotation.estimates``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sqlmodel import Session

from annotation.estimates import HUMAN_ONLY, JUDGE_ONLY, PPI, CellEstimate, Estimates
from judge.reports.sections import Section, Table
from judge.stats.ppi import SMALL_N

SECTION_TITLE = "Bias figures corrected by human ratings"
COLUMNS = ["factor", "metric", JUDGE_ONLY, HUMAN_ONLY, PPI, "n rated", "effective n", "design"]


def rated_text(n: int) -> str:
    """A row's count of rated items, marked under ``SMALL_N``: '18 (< 30)'."""
    return f"{n} (< {SMALL_N})" if 0 < n < SMALL_N else str(n)


def _rows(cells: Sequence[CellEstimate]) -> list[list[str]]:
    rows = []
    for c in cells:
        ppi = c.prediction_powered
        effective = "" if ppi.effective_n is None else f"{ppi.effective_n:.0f}"
        estimates = [c.judge_only.text(), c.human_only.text(), ppi.text()]
        rated = rated_text(c.human_only.n)
        rows.append([c.factor, c.label, *estimates, rated, effective, ppi.design])
    return rows


def _missing(result: Estimates) -> list[str]:
    """Each distinct reason an estimate is missing, with how many are."""
    counted = Counter(
        e.reason
        for c in (*result.metrics, *result.rubrics)
        for e in (c.human_only, c.prediction_powered)
        if e.reason
    )
    return [f"n/a in {k} estimate(s): {reason}" for reason, k in counted.most_common()]


def _gap_table(result: Estimates) -> list[Table]:
    g = result.gap
    if g is None:
        return []
    rows = []
    for estimate in (g.judge_only, g.human_only, g.prediction_powered):
        a, b = g.groups[estimate.method]
        rows.append([estimate.method, estimate.text(sign="+"), a.text(), b.text(), estimate.reason])
    return [
        Table(
            f"Gap in {g.target} ({g.unit}): {g.group_by} {g.a} minus {g.b}",
            ["method", "gap [CI]", g.a, g.b, "note"],
            rows,
        )
    ]


def section_of(result: Estimates) -> Section:
    """The section for a computed result (its payload is ``result.to_dict()``)."""
    level = f"{100 * (1 - result.alpha):g} %"
    cells = (*result.metrics, *result.rubrics)
    small = sum(c.small_sample for c in cells)
    notes = [
        f"design assumed: {result.design.name} ({result.design.description}); "
        f"{result.ratings_note}",
        f"{level} intervals, clipped to the unit's range: normal, Student t where a row has "
        f"fewer than {SMALL_N} rated items (marked '(< {SMALL_N})'). judge-only: every item "
        "the judge scored, its bias included; human-only: the rated items; "
        "prediction-powered: the judge's scores of the unrated items, corrected by the "
        "difference between people and judge on the rated items (PPI++).",
        "effective n: how many human ratings alone would give the prediction-powered "
        "interval's width.",
        *_missing(result),
    ]
    if small:
        notes.append(
            f"{small} row(s) rest on fewer than {SMALL_N} rated items: their human-only and "
            "prediction-powered intervals are t intervals, and approximate"
        )
    rubric_columns = ["factor", "rubric", *COLUMNS[2:]]
    return Section(
        title=SECTION_TITLE,
        json_key="corrected_estimates",
        payload=result.to_dict(),
        tables=[
            Table("Stage metrics (%), three ways", COLUMNS, _rows(result.metrics), key_columns=2),
            Table(
                "Rubric means (each on its own scale), three ways",
                rubric_columns,
                _rows(result.rubrics),
                key_columns=2,
            ),
            *_gap_table(result),
        ],
        notes=notes,
    )


def estimates_section(
    session: Session,
    judge_run_id: int,
    *,
    campaigns: Sequence[str] = (),
    human: str = "mean",
    assume_random: bool = False,
    alpha: float = 0.05,
) -> Section | None:
    """The section of a judge run's report; None when its generation run has no human
    ratings (nothing to correct with)."""
    from annotation.estimates import run_estimates

    result = run_estimates(
        session, judge_run_id, campaigns=campaigns, human=human, assume_random=assume_random,
        alpha=alpha,
    )  # fmt: skip
    if not result.ratings_used.get("scopes"):
        return None
    return section_of(result)
