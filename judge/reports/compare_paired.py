"""Two judge runs on the same items, compared pair by pair: for every stage metric cell (per
stage x rubric, over all factors and per factor) and every rubric mean, the difference B - A
with a paired interval, a paired test, Holm's correction over the table, the items that
changed verdict, and an equivalence verdict at a margin.

Pairing: an item x rubric of run A is paired with the same item x rubric of run B (the same
stored item id, so both runs answered the same dataset's items). Runs whose item x rubric sets
differ are refused (``check_same_items``): a paired statistic on part of the items would
silently describe a different population, and an independent-samples comparison is what the
plain ``fairjudge compare`` already shows. A pair with an unscored side is dropped and counted
(``dropped_a``, ``dropped_b``: an item unscored on both sides counts in both).

Methods, per cell (values in percent, as the stage tables; a difference in percentage points):

* interval: percentile bootstrap over the pairs (``judge.stats.paired.bootstrap_mean_ci``,
  ``N_BOOTSTRAP`` resamples, seeded): the 95 % interval of the mean difference, and the
  ``1 - 2 alpha`` (90 %) one the equivalence verdicts read;
* test, share metrics: exact McNemar, a two-sided binomial test (p = 0.5; ``judge.stats.
  paired.mcnemar_exact``, equal to ``scipy.stats.binomtest``) of the fail->pass count among
  the discordant pairs (those that changed verdict);
* test, means: the exact sign-flip permutation test of the mean difference
  (``judge.stats.paired.sign_flip_test``): scores on a 1-5 scale tie and change by whole
  points, where Wilcoxon's normal approximation is poor and a paired t assumes a shape the
  differences do not have; the sign-flip test is exact at any number of pairs;
* Holm's step-down correction over every tested cell of the table (overall and per factor;
  ``judge.stats.multiplicity.holm``): a cell is flagged when its adjusted p is below alpha;
* flips: pairs whose verdict at the metric's threshold changed, pass->fail and fail->pass (a
  mean row counts them at its rubric's share threshold: ICS >= 3, the others >= 4);
* equivalence (TOST): both one-sided tests at alpha, i.e. the 90 % interval inside
  [-margin, +margin]; no worse: the 90 % interval's lower bound above -margin (every rubric
  of FairMonitor scores a fairer answer higher, so a drop is the worse direction). When every
  pair's difference is the same the bootstrap interval has no width and says nothing; then
  the verdicts use the Clopper-Pearson bound of ``judge.stats.paired.equivalence_test``
  (how far unseen pairs, each at most the scale's full range away, could move the mean).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from statistics import fmean
from typing import Any

from judge.errors import InvalidInputError
from judge.metrics import STAGE_METRICS, ItemScore, StageMetric
from judge.reports.sections import Section, Table
from judge.stats.multiplicity import ALPHA, HOLM, flags, holm
from judge.stats.paired import (
    bootstrap_mean_cis,
    equivalence_test,
    mcnemar_exact,
    sign_flip_test,
)
from judge.vocab import SCALE

PAIRED_TITLE = "Paired comparison"
DEFAULT_MARGIN = 5.0
"""The equivalence margin in percentage points unless ``--margin`` says otherwise."""
N_BOOTSTRAP = 2000
SEED = 0
MCNEMAR, SIGN_FLIP = "mcnemar exact", "sign-flip exact"


def _rubric_means() -> tuple[StageMetric, ...]:
    """A mean (% of the maximum) for every stage x rubric that has only a share metric."""
    with_mean = {(m.stage, m.rubric) for m in STAGE_METRICS if m.kind == "mean_pct"}
    pairs = dict.fromkeys((m.stage, m.rubric) for m in STAGE_METRICS)
    return tuple(
        StageMetric(
            stage,
            rubric,
            f"{stage} {rubric} mean (% of max)",
            "mean_pct",
            0,
            f"{stage} {rubric} mean",
        )
        for stage, rubric in pairs
        if (stage, rubric) not in with_mean
    )


PAIRED_METRICS: tuple[StageMetric, ...] = tuple(
    sorted((*STAGE_METRICS, *_rubric_means()), key=lambda m: m.stage)
)
"""The stage metrics and a mean for every rubric, in stage order."""


def flip_threshold(metric: StageMetric) -> int:
    """The score at or above which an item passes, for the flip counts of ``metric``."""
    if metric.kind == "share":
        return metric.threshold
    return next(
        m.threshold
        for m in STAGE_METRICS
        if m.kind == "share" and (m.stage, m.rubric) == (metric.stage, metric.rubric)
    )


@dataclass(frozen=True)
class PairedRow:
    """One cell of the paired table; values and differences in percent (points)."""

    factor: str  # "all" on the overall rows
    stage: str
    rubric: str
    metric: str
    n_pairs: int
    dropped_a: int  # pairs dropped because A's side is unscored
    dropped_b: int
    value_a: float | None
    value_b: float | None
    diff: float | None  # B - A
    ci_low: float | None
    ci_high: float | None
    test: str
    p_value: float | None
    p_adjusted: float | None
    p_adjust_method: str
    flagged: bool
    pass_to_fail: int
    fail_to_pass: int
    tost_low: float | None  # the 1 - 2 alpha interval the verdicts read
    tost_high: float | None
    margin: float
    equivalent: bool | None  # None: too few pairs to say
    no_worse: bool | None
    note: str = ""


def check_same_items(
    a: Sequence[ItemScore], b: Sequence[ItemScore], label_a: str, label_b: str
) -> None:
    """InvalidInputError, with the counts, unless both runs judged the same items x rubrics."""
    keys_a = {(s.item_id, s.rubric) for s in a}
    keys_b = {(s.item_id, s.rubric) for s in b}
    if keys_a == keys_b and keys_a:
        return
    only_a, only_b = keys_a - keys_b, keys_b - keys_a
    key = {(s.item_id, s.rubric): s.item_key for s in (*a, *b)}
    example = sorted(only_a or only_b)[:1]
    named = f" (e.g. item {key[example[0]]} {example[0][1]})" if example else ""
    raise InvalidInputError(
        f"paired comparison refused: {label_a} and {label_b} did not judge the same items: "
        f"{len(keys_a & keys_b)} item x rubric pairs in both, {len(only_a)} only in "
        f"{label_a}, {len(only_b)} only in {label_b}{named}. Paired statistics need two judge "
        "runs of the same dataset's items (judge one generation run twice, or generate both "
        "models on the same dataset); without --paired, compare shows the runs side by side "
        "as independent samples."
    )


def _unit(metric: StageMetric, score: float) -> float:
    if metric.kind == "mean_pct":
        return score * 100 / SCALE.high
    return 100.0 if score >= metric.threshold else 0.0


def _none(x: float) -> float | None:
    return None if x != x else x


def _test(
    metric: StageMetric, pass_to_fail: int, fail_to_pass: int, diffs: Sequence[float]
) -> tuple[float, str]:
    """A cell's p-value and its test: exact McNemar on the flips of a share, the sign-flip
    test on the differences of a mean."""
    if metric.kind == "share":
        return mcnemar_exact(fail_to_pass, pass_to_fail + fail_to_pass), MCNEMAR
    return float(sign_flip_test(diffs).p_value), SIGN_FLIP


def paired_p_value(
    metric: StageMetric, pairs: Sequence[tuple[float | None, float | None]]
) -> float | None:
    """The p-value ``paired_cell`` gives a cell (None: no scored pair), without its values,
    interval and verdicts: what Holm's correction over the table needs of a cell nobody reads
    (``judge.reports.gate_checks.paired_table``)."""
    kept = [(x, y) for x, y in pairs if x is not None and y is not None]
    if not kept:
        return None
    if metric.kind == "share":
        cut = flip_threshold(metric)
        down = sum(x >= cut > y for x, y in kept)
        return _test(metric, down, sum(y >= cut > x for x, y in kept), ())[0]
    return _test(metric, 0, 0, [_unit(metric, y) - _unit(metric, x) for x, y in kept])[0]


def paired_cell(
    metric: StageMetric,
    factor: str,
    pairs: Sequence[tuple[float | None, float | None]],
    *,
    margin: float,
    alpha: float = ALPHA,
    n_bootstrap: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> PairedRow:
    """One cell from its (A score, B score) pairs (None: unscored), before Holm."""
    dropped_a = sum(x is None for x, _ in pairs)
    dropped_b = sum(y is None for _, y in pairs)
    kept = [(x, y) for x, y in pairs if x is not None and y is not None]
    ua = [_unit(metric, x) for x, _ in kept]
    ub = [_unit(metric, y) for _, y in kept]
    diffs = [y - x for x, y in zip(ua, ub, strict=True)]
    cut = flip_threshold(metric)
    pass_to_fail = sum(x >= cut > y for x, y in kept)
    fail_to_pass = sum(y >= cut > x for x, y in kept)
    empty = PairedRow(
        factor,
        metric.stage,
        metric.rubric,
        metric.name,
        len(kept),
        dropped_a,
        dropped_b,
        None,
        None,
        None,
        None,
        None,
        "",
        None,
        None,
        HOLM,
        False,
        pass_to_fail,
        fail_to_pass,
        None,
        None,
        margin,
        None,
        None,
    )
    if not kept:
        return replace(empty, note="no scored pair")
    value_a, value_b, diff = fmean(ua), fmean(ub), fmean(diffs)
    p, test = _test(metric, pass_to_fail, fail_to_pass, diffs)
    row = replace(empty, value_a=value_a, value_b=value_b, diff=diff, test=test, p_value=p)
    if len(kept) < 2:
        return replace(row, note="one pair: no interval and no equivalence verdict")
    # Both intervals from one set of resampled means (the same seed gave the same draws).
    (low, high), (t_low, t_high) = bootstrap_mean_cis(
        diffs, levels=(0.95, 1 - 2 * alpha), n_bootstrap=n_bootstrap, seed=seed
    )
    row = replace(row, ci_low=low, ci_high=high, tost_low=t_low, tost_high=t_high)
    if len(set(diffs)) > 1:
        return replace(
            row, equivalent=-margin < t_low and t_high < margin, no_worse=t_low > -margin
        )
    # Every pair moved by the same amount: bound what unseen pairs could do instead.
    bound = 100.0 if metric.kind == "share" else (SCALE.high - SCALE.low) * 100 / SCALE.high
    reach = bound * (1 - alpha ** (1 / len(diffs)))
    equivalent = equivalence_test(diffs, margin=margin, alpha=alpha, bound=bound).equivalent
    return replace(
        row,
        ci_low=None,  # a zero-width interval would claim certainty the pairs do not give
        ci_high=None,
        tost_low=None,
        tost_high=None,
        equivalent=equivalent,
        no_worse=diff - reach > -margin,
        note="every pair differs by the same amount: the verdicts use the Clopper-Pearson "
        f"bound of {reach:.1f} points on what unseen pairs could change",
    )


def paired_rows(
    a: Sequence[ItemScore],
    b: Sequence[ItemScore],
    *,
    margin: float = DEFAULT_MARGIN,
    alpha: float = ALPHA,
    n_bootstrap: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> list[PairedRow]:
    """Every cell of the paired table (overall rows first, then each factor), Holm-adjusted
    over all its tested cells. The runs must have judged the same items (``check_same_items``)."""
    if not margin > 0:
        raise InvalidInputError(f"--margin must be a positive number of points, got {margin}")
    by_key = {(s.item_id, s.rubric): s for s in b}
    cells: dict[tuple[str, str, str], list[tuple[float | None, float | None]]] = defaultdict(list)
    for s in a:
        other = by_key[(s.item_id, s.rubric)]
        for factor in ("all", s.factor):
            cells[(factor, s.stage, s.rubric)].append((s.score, other.score))
    factors = ["all", *sorted({f for f, _, _ in cells} - {"all"})]
    rows = [
        paired_cell(
            metric, factor, cell, margin=margin, alpha=alpha, n_bootstrap=n_bootstrap, seed=seed
        )
        for factor in factors
        for metric in PAIRED_METRICS
        for cell in [cells.get((factor, metric.stage, metric.rubric))]
        if cell
    ]
    adjusted = holm([r.p_value for r in rows])
    flagged = flags(adjusted, alpha)
    return [
        replace(r, p_adjusted=_none(p), flagged=f)
        for r, p, f in zip(rows, adjusted, flagged, strict=True)
    ]


def _points(x: float | None, sign: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.1f}" if sign else f"{x:.1f}"


def _interval(r: PairedRow) -> str:
    if r.ci_low is not None:
        return f" [{_points(r.ci_low, True)}, {_points(r.ci_high, True)}]"
    return " (no spread)" if r.note.startswith("every pair") else ""


def _verdict(v: bool | None) -> str:
    return "too few pairs" if v is None else ("yes" if v else "no")


def legend(margin: float, alpha: float, n_bootstrap: int, seed: int) -> list[str]:
    """What the paired table's columns are and how they were computed."""
    level = round((1 - 2 * alpha) * 100)
    return [
        "Pairs: the same item x rubric in both runs; a pair with an unscored side is dropped "
        "and counted (dropped A / dropped B).",
        "B - A: difference of the two runs' values in percentage points, with its 95 % "
        f"percentile bootstrap interval over the pairs ({n_bootstrap} resamples, seed {seed}).",
        "p: shares by the exact McNemar test (binomial test on the pairs that changed verdict); "
        "means by the exact sign-flip permutation test of the mean difference; p (Holm): "
        f"Holm-adjusted over every tested cell of the table; flagged when below {alpha:g}.",
        "Flips: pairs whose verdict changed at the metric's threshold (a mean at its rubric's "
        "share threshold), pass->fail / fail->pass.",
        "No spread: every pair differs by the same amount, so no interval is shown and the "
        "verdicts bound what unseen pairs could change (one-sided Clopper-Pearson on the share "
        "of pairs that could differ by the scale's full range).",
        f"Equivalent: TOST at +-{margin:g} points (the {level} % bootstrap interval inside "
        f"[-{margin:g}, +{margin:g}]); no worse: that interval's lower bound above -{margin:g} "
        "(every rubric scores a fairer answer higher).",
    ]


def paired_section(
    a: Sequence[ItemScore],
    b: Sequence[ItemScore],
    labels: tuple[str, str],
    run_ids: tuple[int, int],
    *,
    margin: float = DEFAULT_MARGIN,
    alpha: float = ALPHA,
    n_bootstrap: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> Section:
    """The paired comparison of two runs' item scores as a report section (``paired`` in
    report.json); refuses runs of different items."""
    check_same_items(a, b, *labels)
    rows = paired_rows(a, b, margin=margin, alpha=alpha, n_bootstrap=n_bootstrap, seed=seed)
    label_a, label_b = labels
    notes = legend(margin, alpha, n_bootstrap, seed)
    payload: dict[str, Any] = {
        "a": {"label": label_a, "judge_run_id": run_ids[0]},
        "b": {"label": label_b, "judge_run_id": run_ids[1]},
        "margin": margin,
        "alpha": alpha,
        "interval": f"percentile bootstrap over pairs, {n_bootstrap} resamples, seed {seed}",
        "tests": {"share": MCNEMAR, "mean_pct": SIGN_FLIP},
        "p_adjust_method": HOLM,
        "legend": notes,
        "rows": [asdict(r) for r in rows],
    }
    body = [
        [
            r.factor,
            next(m.label for m in PAIRED_METRICS if m.name == r.metric),
            f"{r.n_pairs} ({r.dropped_a}/{r.dropped_b})",
            _points(r.value_a),
            _points(r.value_b),
            _points(r.diff, sign=True) + _interval(r),
            "-" if r.p_adjusted is None else f"{r.p_adjusted:.3g}" + (" *" if r.flagged else ""),
            f"{r.pass_to_fail}/{r.fail_to_pass}",
            _verdict(r.equivalent),
            _verdict(r.no_worse),
        ]
        for r in rows
    ]
    table = Table(
        f"Paired differences {label_b} - {label_a}",
        [
            "factor",
            "metric",
            "pairs (dropped A/B)",
            label_a,
            label_b,
            "B - A [95 % CI]",
            "p (Holm)",
            "flips P>F/F>P",
            f"equivalent +-{margin:g}",
            "no worse",
        ],
        body,
        notes=notes,
        key_columns=2,
    )
    flagged = [f"{r.factor} {r.metric}" for r in rows if r.flagged]
    summary = (
        f"Cells that differ after Holm at {alpha:g}: " + "; ".join(flagged) + "."
        if flagged
        else f"No cell differs after Holm at {alpha:g}."
    )
    return Section(
        title=PAIRED_TITLE,
        json_key="paired",
        payload=payload,
        tables=[table],
        notes=[summary],
        csv={"paired.csv": payload["rows"]},
    )
