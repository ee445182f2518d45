"""The paired difference B - A of two judge runs corrected by human ratings: beside the
judge-only difference, the one people's ratings of some items imply, prediction-powered
(PPI++, ``judge.stats.ppi.ppi_mean``) on the pairs' differences.

Pairing is that of ``judge.reports.compare_paired``: the same item x rubric in both runs, a
pair with an unscored side dropped. Each run's items were answered by its own generation run,
and people rate a generation run's answers, so an item's human difference is its combined
human score on B's answer minus that on A's (the same answer when both runs judged one
generation run: then the human difference is 0 and the target is "no difference"). Values are
in the paired table's unit (percent: a share counts 100 or 0 at its threshold, a mean is the
score as a percentage of the scale's maximum), the difference in percentage points.

Per cell, with ``d = J_B - J_A`` the judges' difference and ``h = H_B - H_A`` the people's:

- **judge-only**: the mean of ``d`` over every scored pair, normal interval; what the judges
  say, their bias included;
- **human-only**: the mean of ``h`` over the pairs people rated on both sides;
- **prediction-powered**: ``mean(d over unrated pairs) * lam + mean(h - lam * d over rated
  pairs)``, the rated pairs' rectifier correcting the judges' difference (ppi_py's convention:
  a rated pair is left out of the unlabelled set; ``lam`` tuned as PPI++ does). Where every
  pair was rated nothing is left for the judges: the human-only mean.

The rated pairs must be a simple random sample of the pairs: each run's ratings must come from
one random campaign, or be assumed random (``assume_random``, which passes the random-subset
check of ``annotation.estimate_checks`` as the run's own estimates do). A weighted design
(stratified, disagreement) is refused with the reason: the two runs' inclusion probabilities
do not combine into one for a pair.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlmodel import Session

from annotation.estimate_cells import RunData, metric_value
from annotation.estimate_results import ALL, HUMAN_ONLY, JUDGE_ONLY, PPI, Design, Estimate, finite
from annotation.estimates import load_run_data, run_design
from judge.config_estimates import EstimatesConfig
from judge.metrics import ItemScore, StageMetric
from judge.reports.compare_paired import PAIRED_METRICS
from judge.reports.sections import Section, Table
from judge.stats.ppi import classical_mean, judge_only_mean, ppi_mean

CORRECTED_TITLE = "Paired comparison corrected by human ratings"
BOUNDS = (-100.0, 100.0)
"""A difference of two percentages."""
PAIRS = "every scored pair"


@dataclass(frozen=True)
class PairedEstimate:
    """One cell: B - A three ways, in percentage points. ``n_pairs``: pairs both judges
    scored; ``n_rated``: those people rated on both sides."""

    factor: str
    stage: str
    rubric: str
    metric: str
    n_pairs: int
    n_rated: int
    judge_only: Estimate
    human_only: Estimate
    prediction_powered: Estimate


@dataclass(frozen=True)
class PairedEstimates:
    """Every cell of the paired table corrected by ratings, and the designs that allowed
    it (``usable``: False with ``reason`` when the ratings cannot be used)."""

    judge_run_a: int
    judge_run_b: int
    design_a: str
    design_b: str
    usable: bool
    reason: str
    alpha: float
    rows: list[PairedEstimate]

    def to_dict(self) -> dict[str, object]:
        from dataclasses import asdict

        return dict(finite(asdict(self)))


def paired_cell_estimates(
    judge_a: Mapping[int, float],
    judge_b: Mapping[int, float],
    human_a: Mapping[int, float],
    human_b: Mapping[int, float],
    *,
    alpha: float = 0.05,
    lam: float | None = None,
) -> tuple[int, int, Estimate, Estimate, Estimate]:
    """Pairs, rated pairs, and the judge-only, human-only and prediction-powered B - A of
    one cell from each item's value: the judges' (scored items) and people's (rated items)."""
    pairs = sorted(set(judge_a) & set(judge_b))
    d = {i: judge_b[i] - judge_a[i] for i in pairs}
    rated = [i for i in pairs if i in human_a and i in human_b]
    y = [human_b[i] - human_a[i] for i in rated]
    N = len(pairs)
    if N:
        judge_only = Estimate.of(judge_only_mean(list(d.values()), alpha=alpha), JUDGE_ONLY, N,
                                 PAIRS, BOUNDS)  # fmt: skip
    else:
        judge_only = Estimate.refused(JUDGE_ONLY, 0, 0, PAIRS, "no scored pair")
    if len(rated) < 2:
        why = (
            f"{'no' if not rated else f'only {len(rated)}'} pair(s) rated on both sides (2 needed)"
        )
        return (
            N,
            len(rated),
            judge_only,
            Estimate.refused(HUMAN_ONLY, len(rated), N, "rated pairs", why),
            Estimate.refused(PPI, len(rated), N, "rated pairs", why),
        )
    human = Estimate.of(classical_mean(y, alpha=alpha), HUMAN_ONLY, N, "rated pairs", BOUNDS)
    unrated = [d[i] for i in pairs if i not in set(rated)]
    if not unrated:
        return (
            N,
            len(rated),
            judge_only,
            human,
            Estimate.of(classical_mean(y, alpha=alpha), PPI, N, "every pair rated", BOUNDS),
        )
    m = ppi_mean(y, [d[i] for i in rated], unrated, lam=lam, alpha=alpha)
    return N, len(rated), judge_only, human, Estimate.of(m, PPI, N, "rated pairs", BOUNDS)


def _values(metric: StageMetric, data: RunData, factor: str) -> tuple[dict[int, float], ...]:
    """The judge's and people's values of the cell's items in one run."""
    scale = data.scale(metric.rubric)
    cell = [
        s
        for s in data.scores
        if (s.stage, s.rubric) == (metric.stage, metric.rubric) and factor in (ALL, s.factor)
    ]
    rated = data.human.get(metric.rubric, {})
    judge = {s.item_id: metric_value(metric, s.score, scale) for s in cell if s.score is not None}
    human = {s.item_id: metric_value(metric, rated[s.item_id], scale) for s in cell
             if s.item_id in rated}  # fmt: skip
    return judge, human


def design_refusal(a: Design, b: Design) -> str:
    """Why the two runs' ratings cannot correct the paired difference, or "" when they can."""
    for side, design in (("A", a), ("B", b)):
        if not design.usable:
            return f"run {side}: {design.reason}"
        if design.weights:
            return (
                f"run {side}'s ratings were drawn with unequal probabilities ({design.name}): "
                "a pair has no inclusion probability of its own, so the paired difference is "
                "not corrected; rate both runs' answers in random campaigns"
            )
    return ""


def paired_estimates(
    session: Session,
    judge_runs: tuple[int, int],
    scores: tuple[Sequence[ItemScore], Sequence[ItemScore]],
    *,
    assume_random: bool = False,
    accept_unrepresentative: bool = False,
    rules: EstimatesConfig | None = None,
    alpha: float = 0.05,
) -> PairedEstimates | None:
    """B - A corrected by the ratings of both runs' answers (every campaign's and import
    batch's, the newest winning per rater), or None when neither run's answers were rated.
    ``scores``: the runs' item scores as the paired table read them."""
    data = [
        load_run_data(session, run, scores=found)
        for run, found in zip(judge_runs, scores, strict=True)
    ]
    if not any(d.selection.ratings for d in data):
        return None
    design_a, design_b = (run_design(session, d, assume_random, accept_unrepresentative, rules)
                          for d in data)  # fmt: skip
    reason = design_refusal(design_a, design_b)
    rows = [] if reason else _rows(data[0], data[1], alpha)
    return PairedEstimates(
        judge_runs[0], judge_runs[1], design_a.name, design_b.name, not reason, reason, alpha, rows
    )


def _rows(a: RunData, b: RunData, alpha: float) -> list[PairedEstimate]:
    factors: dict[tuple[str, str], set[str]] = defaultdict(set)
    for s in a.scores:
        factors[(s.stage, s.rubric)].add(s.factor)
    rows = []
    for factor in [ALL, *sorted({f for fs in factors.values() for f in fs if f})]:
        for metric in PAIRED_METRICS:
            if factor != ALL and factor not in factors.get((metric.stage, metric.rubric), ()):
                continue
            if (metric.stage, metric.rubric) not in factors:
                continue
            judge_a, human_a = _values(metric, a, factor)
            judge_b, human_b = _values(metric, b, factor)
            found = paired_cell_estimates(judge_a, judge_b, human_a, human_b, alpha=alpha)
            rows.append(PairedEstimate(factor, metric.stage, metric.rubric, metric.name, *found))
    return rows


def corrected_section(estimates: PairedEstimates, labels: tuple[str, str]) -> Section:
    """The corrected differences as a report section (``paired_corrected`` in report.json)."""
    label_a, label_b = labels
    level = round((1 - estimates.alpha) * 100)
    notes = [
        f"B - A in percentage points with {level} % normal intervals (Student t under 30 "
        "rated pairs): judge-only over every scored pair; human-only over the pairs people "
        "rated on both sides; prediction-powered: the judges' difference on the unrated pairs "
        "corrected by people's on the rated ones (PPI++).",
        f"Ratings: A {estimates.design_a}; B {estimates.design_b}.",
    ]
    body = [
        [
            r.factor,
            r.metric,
            f"{r.n_pairs} ({r.n_rated})",
            r.judge_only.text(sign="+"),
            r.human_only.text(sign="+") if r.human_only.value is not None else "n/a",
            r.prediction_powered.text(sign="+")
            if r.prediction_powered.value is not None
            else r.prediction_powered.reason,
        ]
        for r in estimates.rows
    ]
    columns = ["factor", "metric", "pairs (rated)", "judge-only", "human-only",
               "prediction-powered"]  # fmt: skip
    table = Table(f"Corrected differences {label_b} - {label_a}", columns, body, notes=notes,
                  key_columns=2)  # fmt: skip
    summary = estimates.reason or f"{sum(r.n_rated > 1 for r in estimates.rows)} cell(s) corrected."
    return Section(
        title=CORRECTED_TITLE,
        json_key="paired_corrected",
        payload=estimates.to_dict(),
        tables=[table] if estimates.rows else [],
        notes=[summary],
        csv={"paired_corrected.csv": [_flat(r) for r in estimates.rows]} if estimates.rows else {},
    )


def _flat(r: PairedEstimate) -> dict[str, object]:
    out: dict[str, object] = {"factor": r.factor, "metric": r.metric, "n_pairs": r.n_pairs,
                              "n_rated": r.n_rated}  # fmt: skip
    for name, e in (("judge", r.judge_only), ("human", r.human_only),
                    ("ppi", r.prediction_powered)):  # fmt: skip
        out |= {f"{name}_diff": e.value, f"{name}_ci_low": e.ci_low, f"{name}_ci_high": e.ci_high}
    return dict(finite(out))
