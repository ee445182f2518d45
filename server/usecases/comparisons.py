"""Judge runs compared pair by pair, as typed results for the API's paired route and the
dashboard's comparison page: the paired table of ``judge.reports.compare_paired`` (B - A per
cell with its bootstrap interval, exact test, Holm, flips, equivalence) and, where people
rated both runs' answers, the same differences corrected by their ratings
(``annotation.paired_estimates``). ``fairjudge compare --paired`` shows the same as report
sections (``server.usecases.reports.compare_report``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from annotation.estimate_results import finite

# The reply's types at module level: the API's reply model is built from these dataclasses
# (server/schemas/compare.py), which needs their fields' types importable here.
from annotation.paired_estimates import PairedEstimates, paired_estimates
from judge.errors import InvalidInputError
from judge.metrics import item_scores
from judge.reports.compare import ComparedRun, compare_section, compared_runs
from judge.reports.compare_paired import (
    DEFAULT_MARGIN,
    MCNEMAR,
    N_BOOTSTRAP,
    SEED,
    SIGN_FLIP,
    PairedRow,
    check_same_items,
    legend,
    paired_rows,
)
from judge.reports.sections import Section
from judge.stats.multiplicity import ALPHA, HOLM

if TYPE_CHECKING:
    from sqlmodel import Session


@dataclass(frozen=True)
class PairedSide:
    """One of the two runs: its judge run and its label in the tables."""

    judge_run_id: int
    label: str


@dataclass(frozen=True)
class PairedComparison:
    """B - A cell by cell: ``rows`` (judge scores only) and ``corrected`` (by people's
    ratings; None when neither run's answers were rated)."""

    a: PairedSide
    b: PairedSide
    margin: float
    alpha: float
    interval: str
    tests: dict[str, str]
    p_adjust_method: str
    legend: list[str]
    rows: list[PairedRow]
    flagged: list[str]  # "factor metric" of the cells that differ after Holm
    corrected: PairedEstimates | None

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it: a number that is not one (NaN) is null."""

        return dict(finite(asdict(self)))


@dataclass(frozen=True)
class PairOutcome:
    """A run against the first one on the comparison page: compared, or refused (``reason``)."""

    b: ComparedRun
    paired: PairedComparison | None
    reason: str = ""


@dataclass(frozen=True)
class Comparison:
    """Two or more runs: side by side (``side_by_side``, the plain comparison's section) and
    each run after the first paired against the first (``pairs``)."""

    runs: list[ComparedRun]
    side_by_side: Section
    pairs: list[PairOutcome]
    margin: float


def _margin(margin: float | None) -> float:
    return DEFAULT_MARGIN if margin is None else margin


def _paired(
    session: Session, a: ComparedRun, b: ComparedRun, margin: float, assume_random: bool
) -> PairedComparison:

    scores_a = item_scores(session, a.judge_run_id, a.aggregation)
    scores_b = item_scores(session, b.judge_run_id, b.aggregation)
    check_same_items(scores_a, scores_b, a.label, b.label)
    rows = paired_rows(scores_a, scores_b, margin=margin)
    corrected = paired_estimates(
        session, (a.judge_run_id, b.judge_run_id), (scores_a, scores_b), assume_random=assume_random
    )
    return PairedComparison(
        a=PairedSide(a.judge_run_id, a.label),
        b=PairedSide(b.judge_run_id, b.label),
        margin=margin,
        alpha=ALPHA,
        interval=f"percentile bootstrap over pairs, {N_BOOTSTRAP} resamples, seed {SEED}",
        tests={"share": MCNEMAR, "mean_pct": SIGN_FLIP},
        p_adjust_method=HOLM,
        legend=legend(margin, ALPHA, N_BOOTSTRAP, SEED),
        rows=rows,
        flagged=[f"{r.factor} {r.metric}" for r in rows if r.flagged],
        corrected=corrected,
    )


def paired_comparison(
    session: Session,
    judge_run_ids: Sequence[int],
    *,
    margin: float | None = None,
    assume_random: bool = False,
) -> PairedComparison:
    """Two judge runs of the same items (A then B) pair by pair, at equivalence ``margin``
    (percentage points; 5 when None); ``assume_random`` treats imported ratings as a simple
    random sample for the corrected differences. NotFoundError for an unknown run;
    InvalidInputError for other than two runs, or runs of different items (with the counts)."""

    distinct = list(dict.fromkeys(judge_run_ids))
    if len(distinct) != 2:
        raise InvalidInputError(
            f"a paired comparison takes exactly two judge runs (A then B), got {len(distinct)}"
        )
    a, b = compared_runs(session, distinct)
    return _paired(session, a, b, _margin(margin), assume_random)


def comparison(
    session: Session,
    judge_run_ids: Sequence[int],
    *,
    margin: float | None = None,
    assume_random: bool = False,
) -> Comparison:
    """Two or more judge runs: side by side, and every run after the first paired against
    the first where both judged the same items (else refused with the reason, the others
    still compared). NotFoundError for an unknown run; InvalidInputError for fewer than two."""

    used = _margin(margin)
    if not used > 0:
        raise InvalidInputError(f"margin must be a positive number of points, got {used}")
    runs = compared_runs(session, judge_run_ids)
    first, *others = runs
    pairs = []
    for b in others:
        try:
            pairs.append(PairOutcome(b, _paired(session, first, b, used, assume_random)))
        except InvalidInputError as refused:
            pairs.append(PairOutcome(b, None, str(refused)))
    return Comparison(runs, compare_section(session, runs), pairs, used)
