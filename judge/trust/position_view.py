"""The order (position) check as report content: one table row per pair rubric and a bar
chart of preference fairness (``judge.trust.position`` computes them)."""

from __future__ import annotations

from judge.reports.sections import BarChart, Table
from judge.trust.position import NOT_A_PREFERENCE, OrderResult, PositionRow


def _share(x: float) -> str:
    return "n/a" if x != x else f"{x:.0%}"


def _with_ci(value: str, low: float, high: float, fmt: str) -> str:
    if low == low and high == high:
        return f"{value} [{low:{fmt}}, {high:{fmt}}]"
    return value


def _cells(r: PositionRow) -> list[str]:
    p, s = r.stats, r.shift
    counts = f"{p.consistent} / {p.primacy} / {p.recency}"
    if not p.n:
        pc = pf = mean = p_value = "n/a"
    else:
        pc = _with_ci(_share(p.consistency), p.consistency_low, p.consistency_high, ".0%")
        pf = _with_ci(f"{p.fairness:+.2f}", p.fairness_low, p.fairness_high, "+.2f")
        mean = _with_ci(f"{s.mean_difference:+.2f}", s.ci_low, s.ci_high, "+.2f")
        p_value = f"{s.p_value:.3g}" if s.tested else f"not tested ({s.reason})"
    if not r.preference:
        pf = "not shown (similarity score)"
        counts = f"{p.consistent} / {p.primacy + p.recency} inconsistent"
    stability = "n/a" if r.repetition_stability is None else f"{r.repetition_stability:.0%}"
    flag = f"FLAGGED ({', '.join(r.reasons)})" if r.flagged else ""
    return [
        r.rubric, str(p.n), pc, pf, counts, mean,
        p_value, stability, str(r.unpaired), flag,
    ]  # fmt: skip


def order_table(result: OrderResult) -> Table:
    """Per pair rubric: position consistency and preference fairness with their CIs, the
    verdict counts, the mean score change, repetition stability and the flag."""
    head = [
        "rubric", "pairs", "position consistency [95 % CI]", "preference fairness [95 % CI]",
        "consistent / primacy / recency", "mean change swapped - given [95 % CI]",
        "Wilcoxon p", "repetition stability", "unpaired", "flag",
    ]  # fmt: skip
    samples = (
        f"each order's {result.samples} samples combined by the {result.aggregation} first"
        if result.samples > 1
        else "one sample per order"
    )
    notes = [
        f"Every pair judged in both orders ({samples}). A pair rubric rates side B (the "
        "changed story, the answer to the loaded question) against side A; as given B is "
        "shown second, swapped first. Consistent: the same score in both orders; recency: "
        "higher with B last (as given); primacy: higher with B first (swapped).",
        "Position consistency: share of consistent pairs. Preference fairness (Shi et al. "
        "2024): (recency - primacy) / pairs, in [-1, 1]; 0 is fair, > 0 favours the last "
        "position. CIs: percentile bootstrap over pairs (seed 0). Repetition stability: per "
        "pair and order, the share of samples giving the most frequent score, averaged.",
        "Position consistency counts the pairs with both orders scored; preference fairness "
        "divides by every pair judged, the unpaired ones (an order unscored) included, as "
        "Shi et al. do.",
        *(
            [
                f"{', '.join(similar)}: {NOT_A_PREFERENCE}; the pairs are counted consistent "
                "/ inconsistent."
            ]
            if (similar := [r.rubric for r in result.rubrics if not r.preference])
            else []
        ),
        f"Flagged: inconsistent when the consistency CI lies below {result.min_consistency:.0%}"
        "; primacy or recency (preference rubrics) when the fairness CI excludes 0 and the "
        "mean change's size "
        f"exceeds the tolerance ({result.tolerance:g}). The flags are decided on intervals "
        f"at {result.flag_level:.4g} confidence (Bonferroni over the run's "
        "claims, one or two per rubric), so that the chance of any false flag in this table "
        "stays at 5 %; the intervals shown are at 95 %.",
        "The run's item scores (and the stage metrics above) combine both orders.",
    ]
    rows = [_cells(r) for r in result.rubrics]
    return Table("Order (position) bias: each pair judged in both orders", head, rows, notes)


def order_figure(result: OrderResult) -> BarChart:
    """Preference fairness per rubric with its CI, around the fair value 0."""
    return BarChart(
        "Order: preference fairness (> 0 favours the last position, < 0 the first)",
        [
            (
                r.rubric,
                r.stats.fairness,
                None if r.stats.fairness_low != r.stats.fairness_low else r.stats.fairness_low,
                None if r.stats.fairness_high != r.stats.fairness_high else r.stats.fairness_high,
            )
            for r in result.rubrics
            if r.stats.n and r.preference
        ],
        "preference fairness (-1 to 1)",
        reference=0.0,
        ns=[r.stats.n for r in result.rubrics if r.stats.n and r.preference],
    )
