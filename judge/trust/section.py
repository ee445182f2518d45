"""The "Judge diagnostics" section of a judge run's report, and the short list of flags the
reliability table shows beside agreement with humans."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlmodel import Session

from judge.costs import Prices, RunCost, Usage, judge_run_cost
from judge.reports.facts import RunFacts, load_run_facts
from judge.reports.sections import BarChart, Figure, Section, Table
from judge.stats.intervals import rank_correlation_interval
from judge.stats.tests import PairedShift
from judge.trust import diagnostics, directional, position, position_view
from judge.trust.diagnostics import (
    CounterfactualResult,
    LengthRow,
    LogprobRow,
    RubricShift,
)
from judge.trust.directional import DirectionRow

SECTION_TITLE = "Judge diagnostics"
TEXT_SHOWN = 600
"""Characters of each answer shown beside its counterfactual (the JSON keeps them whole)."""


def _num(x: float | None, p_value: bool = False) -> str:
    if x is None or x != x:
        return "n/a"
    return f"{x:.3g}" if p_value else f"{x:+.2f}"


def shift_cells(s: PairedShift) -> list[str]:
    """pairs, share changed, mean difference [CI], Wilcoxon p."""
    if not s.n:
        return ["0", "n/a", "n/a", "n/a"]
    mean = f"{s.mean_difference:+.2f}"
    if s.ci_low == s.ci_low and s.ci_high == s.ci_high:
        mean += f" [{s.ci_low:+.2f}, {s.ci_high:+.2f}]"
    p = f"{s.p_value:.3g}" if s.tested else f"not tested ({s.reason})"
    return [str(s.n), f"{s.share_changed:.0%}", mean, p]


def _flag(r: RubricShift) -> str:
    return "FLAGGED" if r.flagged else ""


def _finite(x: float) -> float | None:
    return None if x != x else x


def _short(text: str) -> str:
    return text if len(text) <= TEXT_SHOWN else text[:TEXT_SHOWN] + " [...]"


def _answers(texts: dict[str, str]) -> str:
    if list(texts) == ["answer"]:
        return _short(texts["answer"])
    return "\n".join(f"{part}: {_short(text)}" for part, text in sorted(texts.items()))


def direction_cells(r: DirectionRow) -> list[str]:
    """kind, rubric, comparison, pairs, changed, mean [CI], p, Holm p, flag, equivalence."""
    mean = "n/a" if r.mean != r.mean else f"{r.mean:+.2f}"
    if r.n and r.ci_low == r.ci_low:
        mean += f" [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
    p = f"{r.p_value:.3g}" if r.p_value is not None else "n/a"
    if not r.tested:
        p += f" (not tested: {r.reason})" if r.reason else " (not tested)"
    adjusted = f"{r.p_adjusted:.3g}" if r.p_adjusted is not None else ""
    flag = f"FLAGGED: {r.finding}" if r.flagged else ""
    mds = "n/a" if r.min_detectable_shift is None else f"{r.min_detectable_shift:.2f}"
    if r.power_note:
        mds += f" ({r.power_note})"
    return [r.kind, r.scope, r.label, str(r.n), str(r.changed), mean, p, adjusted, flag,
            r.equivalence, mds]  # fmt: skip


def direction_table(results: list[CounterfactualResult]) -> Table:
    """Every copy's rows by swap kind, scope and direction, with the method in the notes."""
    head = ["swaps", "rubric", "comparison", "pairs", "changed", "mean [95 % CI]", "p"]
    head += ["p (Holm)", "flag", "equivalence", "smallest detectable shift (80 % power)"]
    rows = [direction_cells(r) for result in results for r in result.directions]
    notes: list[str] = []
    for result in results:
        for kind, (a, b) in result.sides.items():
            notes.append(f"{kind}: side A is {a}, side B is {b} (the swap list's two columns).")
        notes.append(
            f"{', '.join(result.copy.swap_kinds)} copy (generation run {result.copy.run_id}): "
            f"{diagnostics.swap_in_note(result.copy.swap_in)}."
        )
        if result.direction_note:
            notes.append(f"{', '.join(result.copy.swap_kinds)}: {result.direction_note}.")
        notes += directional.summary(result.directions, result.margin, result.alpha)
    if results:
        r0 = results[0]
        notes.append(
            "A pair's direction is the net number of the kind's words its copy moved toward "
            "side B (minus those moved toward A) over the item's whole answer; pairs with as "
            "many each way are 'mixed' and not tested. Oriented mean: score of the side-B "
            "version minus the side-A version (negative: the judge favours A). 'all rubrics' "
            "takes one value per item (its mean over rubrics). p: exact sign-flip permutation "
            f"test; Holm's correction over every tested row; flagged at {r0.alpha:g}. A row "
            "whose changed pairs are too few to reach that level is not tested. Equivalence: "
            f"two one-sided tests that the shift lies within +-{r0.margin:g} points. Smallest "
            "detectable shift: the mean shift a two-sided test at that level finds with 80 % "
            "power given the row's n and the sd of its differences, (t(1 - alpha/2, n-1) + "
            "t(0.8, n-1)) x sd / sqrt(n); a row that could not reach significance says so."
        )
    return Table("Counterfactual swaps by direction", head, rows, notes, 3)


def counterfactual_tables(results: list[CounterfactualResult]) -> list[Table]:
    """The rows by direction, the shift per copy and rubric (both directions together), and
    the largest moves with both answers."""
    head = ["swaps", "rubric", "pairs", "score changed", "mean change [95 % CI]", "Wilcoxon p"]
    head += ["unpaired", "flag"]
    rows, moves = [], []
    notes = [
        "Both directions together: a judge preferring one side's words moves the scores up "
        "one way and down the other, so this mean can cancel. It is shown for reference; the "
        "flags come from the table by direction."
    ]
    for result in results:
        kinds = ", ".join(result.copy.swap_kinds)
        if result.copy_judge_run_id is None or not result.rubrics:
            notes.append(
                f"The {kinds} copy (generation run {result.copy.run_id}) has not been judged "
                "with this run's settings yet: run `fairjudge checks counterfactual` again."
            )
            continue
        for r in result.rubrics:
            rows.append([kinds, r.rubric, *shift_cells(r.shift), str(r.unpaired), _flag(r)])
            for m in r.moves:
                moves.append(
                    [m.rubric, m.item_key, f"{m.before:g} -> {m.after:g}", "; ".join(m.swaps),
                     _answers(m.original), _answers(m.swapped)]
                )  # fmt: skip
        notes.append(
            f"{kinds}: {result.copy.items_copied} items copied, {result.copy.items_skipped} "
            f"skipped (nothing to swap); copy judged as judge run {result.copy_judge_run_id} "
            f"({result.status})."
        )
    directed = [r for r in results if r.directions or r.direction_note]
    tables = [direction_table(directed)] if directed else []
    tables.append(
        Table("Counterfactual swaps: score change (copy minus original)", head, rows, notes, 2)
    )
    if moves:
        tables.append(
            Table(
                "Largest counterfactual moves",
                ["rubric", "item", "score", "swapped", "original answer", "counterfactual answer"],
                moves,
                key_columns=2,
            )
        )
    return tables


def length_figure(lengths: list[LengthRow]) -> BarChart:
    """Spearman's rho per rubric, the judge's over every scored item and the people's over
    the rated ones, each with its Fisher z interval and its n."""
    bars: list[tuple[str, float, float | None, float | None]] = []
    ns: list[int] = []
    for label, rho, n in [
        *((r.rubric, r.rho, r.n) for r in lengths),
        *((f"{r.rubric} people", r.rho_human, r.n_rated) for r in lengths),
    ]:
        if rho is not None:
            ci = rank_correlation_interval(rho, n)
            bars.append((label, rho, ci.low, ci.high))
            ns.append(n)
    return BarChart(
        "Spearman rho between answer length (words) and score (95 % Fisher z interval; n items)",
        bars,
        "Spearman rho (-1 to 1)",
        reference=0.0,
        ns=ns,
    )


def length_table(rows: list[LengthRow]) -> Table:
    head = ["rubric", "n", "Spearman rho (length, judge)", "p", "n rated by people"]
    head += ["rho judge (rated items)", "rho people", "judge minus people [95 % CI]", "flag"]
    body = []
    for r in rows:
        diff = "n/a"
        if r.difference_low is not None and r.difference_high is not None:
            assert r.rho_judge_rated is not None and r.rho_human is not None
            diff = (
                f"{r.rho_judge_rated - r.rho_human:+.2f} "
                f"[{r.difference_low:+.2f}, {r.difference_high:+.2f}]"
            )
        body.append(
            [r.rubric, str(r.n), _num(r.rho), _num(r.p_value, p_value=True), str(r.n_rated),
             _num(r.rho_judge_rated), _num(r.rho_human), diff, "FLAGGED" if r.flagged else ""]
        )  # fmt: skip
    return Table(
        "Length: does the judge reward longer answers?",
        head,
        body,
        [
            "Length is the answer's words (both answers for a pair). Flagged when the judge's "
            "correlation with length exceeds the people's on the items both rated: the "
            "difference's interval lies above 0 at the simultaneous confidence "
            + (f"{rows[0].flag_level:.4g}" if rows else "0.95")
            + " (Bonferroni over the rubrics with a difference, so that the chance of any "
            "false flag in this table stays at 5 %; the CI shown is at 95 %)."
        ],
    )


def logprob_table(rows: list[LogprobRow]) -> Table:
    head = ["rubric", "scored", "with probabilities", "mean sampled score"]
    head += ["mean expected score", "mean entropy (bits)", "likeliest level not sampled"]
    head += ["no probabilities (why)"]

    def num(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    body = [
        [r.rubric, str(r.scored), str(r.with_distribution), num(r.mean_sampled),
         num(r.mean_expected), num(r.mean_entropy_bits), str(r.argmax_differs),
         "; ".join(f"{why}: {n}" for why, n in r.missing_reasons.items()) or "none"]
        for r in rows
    ]  # fmt: skip
    return Table(
        "Expected score from log-probabilities (beside the sampled score)",
        head,
        body,
        [
            "Each judgment keeps its sampled score; the expected score is the sum of p(level) "
            "x level over the score token's alternatives, normalised over the levels. The run's "
            "item scores and metrics use the sampled scores."
        ],
    )


def cost_table(run: RunCost) -> Table:
    """Calls, tokens and cost per rubric and for the whole run, live and at the batch price
    ("unknown" without prices, never 0)."""

    def money(value: float | None) -> str:
        return "unknown" if value is None else f"{value:.4f}"

    def cells(name: str, u: Usage) -> list[str]:
        return [name, str(u.judgments), str(u.calls), f"{u.prompt_tokens:,}",
                f"{u.completion_tokens:,}", money(u.cost), money(u.cost_batch)]  # fmt: skip

    rows = [cells(name, u) for name, u in run.by_rubric.items()]
    rows.append(cells("all", run.total))
    head = ["rubric", "judgments", "calls", "prompt tokens", "completion tokens", "cost",
            "cost at batch price"]  # fmt: skip
    return Table(f"Tokens and cost ({run.endpoint}, {run.model})", head, rows, [run.note])


def diagnostics_section(
    session: Session,
    judge_run_id: int,
    *,
    tolerance: float = 0.0,
    prices: Prices | None = None,
    margin: float = directional.MARGIN,
    facts: RunFacts | None = None,
) -> Section:
    """Self-preference, counterfactual copies, order, length and cost for one judge run
    (cost in money only with ``prices``, the judge endpoint's, or the prices in ``facts``;
    ``margin``: the counterfactual equivalence margin in score points). The run's own rows
    come from ``facts`` when given; copies, ratings, orders and costs are read here."""
    # a missing run is an error (NotFoundError), not an empty section
    facts = facts or load_run_facts(session, judge_run_id, prices=prices)
    prices = facts.prices if prices is None else prices
    notes: list[str] = []
    selfpref = facts.self_preference
    if selfpref:
        notes.append(selfpref)
    tables: list[Table] = []
    figures: list[Figure] = []
    payload: dict[str, Any] = {"self_preference": selfpref is not None, "tolerance": tolerance}
    results = diagnostics.counterfactual(
        session, judge_run_id, tolerance=tolerance, margin=margin, facts=facts
    )
    payload["counterfactual"] = [r.to_json() for r in results]
    payload["equivalence_margin"] = margin
    if results:
        tables += counterfactual_tables(results)
        for r in results:
            oriented = [d for d in r.directions if d.direction == directional.ORIENTED and d.n]
            if oriented:
                figures.append(
                    BarChart(
                        f"Counterfactual ({', '.join(r.copy.swap_kinds)}): side B minus side A",
                        [
                            (f"{d.kind} {d.scope}", d.mean, _finite(d.ci_low), _finite(d.ci_high))
                            for d in oriented
                        ],
                        "oriented score difference (B version minus A version, score points)",
                        reference=0.0,
                        ns=[d.n for d in oriented],
                    )  # fmt: skip
                )
    else:
        notes.append(
            "No counterfactual check yet: `fairjudge checks counterfactual --judge-run "
            f"{judge_run_id} --swap all` judges a copy of the answers with names, gendered "
            "words and group words swapped."
        )
    order = position.order_bias(session, judge_run_id, tolerance=tolerance)
    payload["order"] = order.to_json() if order else None
    if order is not None:
        tables.append(position_view.order_table(order))
        if any(r.preference and r.stats.n for r in order.rubrics):
            figures.append(position_view.order_figure(order))
    else:
        notes.append(
            "Order bias not measured: judge with --swap-order to judge every pair in both orders."
        )
    lengths = diagnostics.length(session, judge_run_id, facts=facts)
    payload["length"] = [r.to_json() for r in lengths]
    if lengths:
        tables.append(length_table(lengths))
        figures.append(length_figure(lengths))
    probabilities = diagnostics.logprob(session, judge_run_id, facts=facts)
    payload["logprob"] = [r.to_json() for r in probabilities] if probabilities else None
    if probabilities:
        tables.append(logprob_table(probabilities))
    cost = judge_run_cost(session, judge_run_id, prices)
    tables.append(cost_table(cost))
    payload["cost"] = {k: v for k, v in cost.to_json().items() if k != "by_item"}
    csv = {"cost_by_item.csv": [{"item": key, **u.to_json()} for key, u in cost.by_item.items()]}
    payload["flagged"] = flags(
        session, judge_run_id, tolerance=tolerance, computed=(results, order, lengths), facts=facts
    )
    return Section(SECTION_TITLE, "judge_diagnostics", payload, tables, figures, notes, csv)


def flags(
    session: Session,
    judge_run_id: int,
    *,
    tolerance: float = 0.0,
    computed: tuple[Any, Any, Any] | None = None,
    facts: RunFacts | None = None,
) -> dict[str, list[str]]:
    """Rubric -> the checks its judge failed ("counterfactual (names)", "order (recency)",
    "length"); the key "*" holds run-wide marks ("self-preference"). ``computed``: the
    counterfactual, order and length results when the caller has them already."""
    facts = facts or load_run_facts(session, judge_run_id)
    if computed is None:
        computed = (
            diagnostics.counterfactual(session, judge_run_id, tolerance=tolerance, facts=facts),
            position.order_bias(session, judge_run_id, tolerance=tolerance),
            diagnostics.length(session, judge_run_id, facts=facts),
        )
    results, order, lengths = computed
    out: dict[str, list[str]] = defaultdict(list)
    if facts.self_preference:
        out["*"].append("self-preference")
    for r in results:
        # one mark per kind and rubric ("counterfactual (gender: favours male)"), the
        # oriented finding first, the per-direction ones only without it; a flag on all
        # rubrics pooled is run-wide
        found: dict[tuple[str, str], list[DirectionRow]] = defaultdict(list)
        for row in r.directions:
            if row.flagged:
                found[(row.kind, row.scope)].append(row)
        for (kind, scope), hits in found.items():
            oriented = [h for h in hits if h.direction == directional.ORIENTED]
            what = "; ".join(str(h.finding) for h in (oriented or hits))
            if scope == directional.ALL_RUBRICS:
                out["*"].append(f"counterfactual ({kind}, all rubrics: {what})")
            else:
                out[scope].append(f"counterfactual ({kind}: {what})")
    if order is not None:
        for row in order.rubrics:
            if row.flagged:
                out[row.rubric].append(f"order ({', '.join(row.reasons)})")
    for row in lengths:
        if row.flagged:
            out[row.rubric].append("length")
    return dict(out)
