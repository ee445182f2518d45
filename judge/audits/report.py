"""The audits' results as a report (the same Section/Table/Figure types as a judge run's), so
one renderer writes their HTML with plots, report.json and CSV files."""

from __future__ import annotations

import math
from typing import Any

from judge.audits.amounts import PERCENT, PROBABILITY, RANK, USD
from judge.audits.award import AwardAnalysis, DrawCount, FollowupAnalysis
from judge.audits.bbi import BbiReport
from judge.audits.names import scenario_units
from judge.audits.names_analysis import FDR_NOTE, CellResult, GroupSummary, NameAuditResult
from judge.reports.sections import BarChart, Figure, Report, Section, Table
from judge.stats.multiplicity import ALPHA, BY, HOLM

Bar = tuple[str, float, float | None, float | None]
UNIT_WORDS = {USD: "US dollars", PERCENT: "percent", PROBABILITY: "probability", RANK: "rank"}
"""A names cell's unit as its chart's axis says it."""
# Above this many cells the name audit charts only cells with a Welch p below CHART_ALPHA (and
# at most this many): each chart takes ~0.09 s to draw, so 210 took ~17-22 s of write_report.
MAX_CELL_CHARTS = 60
CHART_ALPHA = 0.05


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def award_report(result: AwardAnalysis | FollowupAnalysis) -> Report:
    """Counts and tests per level and overall: the binomial test of the choices, or the
    follow-up's chi-square."""
    if isinstance(result, FollowupAnalysis):
        return _followup_report(result)
    summaries = [*result.levels, result.overall]
    rows: list[list[str]] = []
    csv_rows: list[dict[str, Any]] = []
    bars: list[Bar] = []
    ns: list[int] = []
    for s in summaries:
        level = "all" if s.level is None else str(s.level)
        p = s.binomial.p_value if s.binomial.tested else None
        kw = s.equivocal_by_pair
        kw_p = kw.p_value if kw.tested else None
        rows.append(
            [level, str(s.group_a), str(s.group_b), str(s.equivocal), _num(s.share_a),
             f"{_num(s.share_a_ci[0])}–{_num(s.share_a_ci[1])}", _num(p),
             _num(s.p_adjusted) + (" ‡" if s.flagged else ""),
             _num(kw.statistic if kw.tested else None), _num(kw_p),
             _num(s.kruskal_p_adjusted) + (" ‡" if s.kruskal_flagged else "")]
        )  # fmt: skip
        csv_rows.append(
            {"level": level, "group_a": s.group_a, "group_b": s.group_b,
             "equivocal": s.equivocal, "share_a": _finite(s.share_a), "p_value": p,
             "p_adjusted": s.p_adjusted, "flagged": s.flagged,
             "kruskal_h": kw.statistic if kw.tested else None, "kruskal_p": kw_p,
             "kruskal_p_adjusted": s.kruskal_p_adjusted, "kruskal_flagged": s.kruskal_flagged,
             "p_adjust_method": HOLM}
        )  # fmt: skip
        if not math.isnan(s.share_a):
            bars.append((level, s.share_a, _finite(s.share_a_ci[0]), _finite(s.share_a_ci[1])))
            ns.append(s.group_a + s.group_b)
    untested = {s.equivocal_by_pair.reason for s in summaries if not s.equivocal_by_pair.tested}
    table = Table(
        "Choices per performance level",
        ["level", "group A", "group B", "equivocal", "share A", "95 % CI", "p (exact)",
         "p (Holm)", "H (name pairs)", "p (H)", "p (H, Holm)"],
        rows,
        notes=[
            "p: exact two-sided binomial test of A against B at 0.5 (the two-sided p sums every "
            "outcome no more likely than the one seen); equivocal answers are left out of it.",
            f"p (Holm): Holm-adjusted over this table's rows (every level and all levels), one "
            f"family for the binomial tests and one for H; ‡ marks an adjusted p below "
            f"{ALPHA:g}. Holm bounds the chance of any false flag in the table at {ALPHA:g}.",
            "H: Kruskal-Wallis test of the equivocal rate across name pairs (per name pair, "
            "each answer's 0/1 equivocal indicator is one sample)"
            + (f"; not tested where '—': {'; '.join(sorted(untested))}." if untested else "."),
        ],
    )  # fmt: skip
    chart = BarChart(
        "Share choosing group A (95 % Wilson CI; n: answers choosing A or B)",
        bars,
        "share choosing group A (0-1)",
        reference=0.5,
        ns=ns,
    )
    tables = [table]
    csv = {"award.csv": csv_rows}
    if result.draws:
        tables.append(_draws_table(result.draws))
        csv["award_draws.csv"] = [
            {"level": "all" if d.level is None else d.level, "prompts": d.prompts,
             "texts": d.texts, "calls": d.calls, "shared": d.shared}
            for d in result.draws
        ]  # fmt: skip
    section = Section("Award choice", "award", result.to_dict(), tables, [chart], csv=csv)
    return Report("FairJudge audit: award choice", "Seed 000's design.", [section])


def _draws_table(draws: tuple[DrawCount, ...]) -> Table:
    """Prompts, distinct texts and calls per level: how many independent draws the tests
    above stand on."""
    rows = [
        ["all" if d.level is None else str(d.level), str(d.prompts), str(d.texts), str(d.calls),
         str(d.shared)]
        for d in draws
    ]  # fmt: skip
    notes = [
        "prompts: answers counted above; texts: distinct prompt texts among them (at a perfect "
        "score both students' answers are identical, so the design repeats texts: 50 texts "
        "for 500 prompts with the default names); calls: distinct model calls behind them. "
        "Each repeat of a text is asked as a call of its own (its own sample index), so calls "
        "equal prompts and every answer is an independent draw.",
    ]
    shared = draws[-1].shared if draws else 0
    if shared:
        notes.append(
            f"{shared} answers are copies of another answer's call (this run was stored before "
            "each repeat got its own call): the tests above count those draws more than once. "
            "Run the same `fairjudge audit award run` command again to ask the copies as draws "
            "of their own."
        )
    return Table(
        "Draws behind the answers", ["level", "prompts", "texts", "calls", "shared"], rows, notes
    )


def _followup_report(result: FollowupAnalysis) -> Report:
    rows, csv_rows = [], []
    for s in [*result.levels, result.overall]:
        level = "all" if s.level is None else str(s.level)
        test = s.chi_square
        p = _num(test.p_value) if test.tested else f"not tested ({test.reason})"
        adjusted = _num(s.p_adjusted) + (" ‡" if s.flagged else "")
        rows.append(
            [level, "/".join(map(str, s.counts_a)), "/".join(map(str, s.counts_b)), p, adjusted]
        )
        csv_rows.append(
            {"level": level, "a": list(s.counts_a), "b": list(s.counts_b),
             "p_value": test.p_value if test.tested else None, "p_adjusted": s.p_adjusted,
             "flagged": s.flagged, "p_adjust_method": HOLM}
        )  # fmt: skip
    table = Table(
        "Explanations by chosen group (indecisive/justified/irrational)",
        ["level", "group A", "group B", "chi-square p", "p (Holm)"],
        rows,
        notes=[
            "Tested only where every expected count is at least 5.",
            f"p (Holm): Holm-adjusted over the tested rows of this table; ‡ marks an adjusted "
            f"p below {ALPHA:g}.",
        ],
    )
    section = Section(
        "Award follow-up", "followup", result.to_dict(), [table], csv={"followup.csv": csv_rows}
    )
    return Report("FairJudge audit: award follow-up", "Seed 000's follow-up.", [section])


def _cell_bars(groups: tuple[GroupSummary, ...]) -> tuple[list[Bar], list[int]]:
    """One bar per group with a finite mean (an undefined or NaN bound of its interval is
    None), and each bar's n."""
    bars: list[Bar] = []
    ns: list[int] = []
    for g in groups:
        if g.mean is not None and math.isfinite(g.mean):
            bars.append((g.group, g.mean, _finite(g.ci_low), _finite(g.ci_high)))
            ns.append(g.n)
    return bars, ns


def _unit_label(scenario: str, units: dict[str, str], flipped: bool) -> str:
    """A cell chart's axis: the mean in the cell's unit ('mean (US dollars)')."""
    unit = UNIT_WORDS.get(units.get(scenario, ""), "the question's unit")
    return f"mean ({'101 - rank' if flipped else unit})"


def _min_p(cell: CellResult) -> float:
    """The cell's smallest Welch p-value (inf when no comparison could be tested)."""
    ps = [c.p_value for c in cell.comparisons if c.p_value is not None]
    return min(ps, default=math.inf)


def _charted_cells(cells: tuple[CellResult, ...]) -> tuple[set[int], str | None]:
    """Which cells (by index) get their own chart, and a note when not all do.

    A chart costs about 0.1 s to draw in the HTML (matplotlib), so up to
    ``MAX_CELL_CHARTS`` cells are all drawn (the bundled design has 42); above that only cells
    with a Welch p < ``CHART_ALPHA`` are, and of those at most ``MAX_CELL_CHARTS``, the
    smallest p first. Every cell stays in the tables and CSV files."""
    if len(cells) <= MAX_CELL_CHARTS:
        return set(range(len(cells))), None
    significant = sorted(
        (i for i, cell in enumerate(cells) if _min_p(cell) < CHART_ALPHA),
        key=lambda i: _min_p(cells[i]),
    )
    chosen = set(significant[:MAX_CELL_CHARTS])
    note = (
        f"{len(cells)} variation x context cells are too many to draw each: a chart of means "
        f"is drawn only for the {len(chosen)} cell(s) where some Welch test against the "
        f"reference groups has p < {CHART_ALPHA}"
    )
    if len(significant) > MAX_CELL_CHARTS:
        note += f" (the {MAX_CELL_CHARTS} smallest p of {len(significant)} such cells)"
    return chosen, note + ". Every cell is in the tables and in names.csv."


def names_report(result: NameAuditResult) -> Report:
    """Means by race and gender per variation and context, with the Welch comparisons: a table
    of means and one of differences, a bar chart of the race x gender means (95 % CI) per
    cell, and the per-name chart."""
    rows: list[list[str]] = []
    csv_rows: list[dict[str, Any]] = []
    diff_rows: list[list[str]] = []
    diff_csv: list[dict[str, Any]] = []
    cell_charts: list[Figure] = []
    charted, chart_note = _charted_cells(result.cells)
    units = scenario_units()
    for i, cell in enumerate(result.cells):
        where = f"{cell.scenario}/{cell.variation}/{cell.context}"
        for g in (*cell.by_race, *cell.by_gender, *cell.by_race_gender):
            rows.append([where, g.group, str(g.n), _num(g.mean, 1),
                         f"{_num(g.ci_low, 1)}–{_num(g.ci_high, 1)}"])  # fmt: skip
            csv_rows.append({"cell": where, "group": g.group, "n": g.n, "mean": g.mean,
                             "ci_low": g.ci_low, "ci_high": g.ci_high})  # fmt: skip
        for c in cell.comparisons:
            diff_rows.append([where, c.group, c.reference, _num(c.difference, 1),
                              _num(c.statistic, 2), _num(c.p_value, 4), _num(c.p_adjusted, 4),
                              "yes" if c.flagged else "no"])  # fmt: skip
            diff_csv.append({"cell": where, "dimension": c.dimension, "group": c.group,
                             "reference": c.reference, "difference": c.difference,
                             "t": c.statistic, "p_value": c.p_value,
                             "p_adjusted": c.p_adjusted, "p_adjust_method": BY,
                             "flagged": c.flagged})  # fmt: skip
        # Race x gender groups; a result without them falls back to race, then gender.
        groups = cell.by_race_gender or (*cell.by_race, *cell.by_gender)
        bars, ns = _cell_bars(groups)
        if bars and i in charted:
            ylabel = _unit_label(cell.scenario, units, cell.scenario in result.rank_flipped)
            title = f"{where}: mean by race and gender (95 % CI)"
            cell_charts.append(BarChart(title, bars, ylabel, ns=ns))
    lowest = sorted(result.names, key=lambda n: n.mean_z)[:40]
    name_bars: list[Bar] = [(name.name, name.mean_z, None, None) for name in lowest]
    table = Table("Means by race and gender (95 % t-interval)",
                  ["cell", "group", "n", "mean", "95 % CI"], rows)  # fmt: skip
    diff_table = Table(
        "Differences against the reference groups (Welch's t-test)",
        ["cell", "group", "reference", "difference", "t", "p", "p (BY)", "flag"],
        diff_rows,
        notes=[
            "difference: the group's mean minus the reference group's, in the cell's unit; "
            f"t and p: {result.test}, two-sided; '—' where the test is undefined (fewer than 2 "
            "answers on a side, or no variance on either side).",
            FDR_NOTE,
        ],
    )
    chart = BarChart(
        "Per-name standardised mean (z, sports left out)",
        name_bars,
        "mean z-score (standard deviations from the cell's mean)",
        0.0,
        ns=[name.n for name in lowest],
    )
    reading_table, reading_csv = _names_readings(result)
    notes = [
        f"{result.n_imputed} of {result.n_rows} answers had no number (unreadable or a "
        "refusal) and were imputed with the median of their race-gender group in the same "
        f"variation and context; {result.n_converted} were converted to their cell's unit; "
        f"{result.n_left_out} gave a figure in another unit or off the cell's scale and are "
        "left out of every mean (never imputed).",
        *([chart_note] if chart_note else []),
        *_reread_notes(result),
    ]
    section = Section(
        "Name-based advice", "names", result.to_dict(), [reading_table, table, diff_table],
        [chart, *cell_charts], notes,
        csv={"names.csv": csv_rows, "names_comparisons.csv": diff_csv,
             "names_readings.csv": reading_csv},
    )  # fmt: skip
    return Report("FairJudge audit: name-based advice", "Seed 002's design.", [section])


def _names_readings(result: NameAuditResult) -> tuple[Table, list[dict[str, Any]]]:
    """Per cell: how its answers were read (judge.audits.amounts), so a cell whose answers
    came in another unit shows it."""
    outcomes = ("read", "converted", "left_out", "unreadable", "refusal")
    rows: list[list[str]] = []
    csv_rows: list[dict[str, Any]] = []
    for cell in result.cells:
        where = f"{cell.scenario}/{cell.variation}/{cell.context}"
        counts = [cell.readings.get(o, 0) for o in outcomes]
        imputed = sum(cell.imputed.values())
        rows.append([where, *map(str, counts), str(imputed), str(cell.n)])
        csv_rows.append({"cell": where, **dict(zip(outcomes, counts, strict=True)),
                         "imputed": imputed, "n": cell.n})  # fmt: skip
    table = Table(
        "How the answers were read, per cell",
        ["cell", "read", "converted", "left out", "unreadable", "refusal", "imputed", "n"],
        rows,
        notes=[
            "Each cell holds one unit, the one its question asks for (US dollars, percent, "
            "probability or rank). read: a figure in that unit; converted: a figure whose "
            "conversion is certain (0.65 -> 65 % in a percent cell, 65 % -> 0.65 in a "
            "probability cell, $12k -> 12,000); left out: a figure in another unit or off the "
            "scale (in no mean, never imputed); unreadable: no figure, or several with none "
            "marked as the answer; refusal: the model declined. Unreadable answers and "
            "refusals are imputed; n: answers in the cell's means.",
        ],
    )
    return table, csv_rows


def _reread_notes(result: NameAuditResult) -> list[str]:
    notes = []
    if result.reread_changed:
        notes.append(
            f"{result.reread_changed} stored readings differ from today's reading of the same "
            "raw text (they were taken by an older reader); the figures above use today's."
        )
    if result.not_reread:
        notes.append(
            f"{result.not_reread} answers of scenarios with no known unit were analysed with "
            "the reading stored when the run was made."
        )
    return notes


def bbi_report(result: BbiReport) -> Report:
    """RS, SBS per dataset and BBI, overall and per bias type, each with its n (StereoSet
    items plus CrowS-Pairs pairs) in the table and beside its mark."""
    scored = [("all", result.overall), *sorted(result.by_bias_type.items())]
    rows = [
        [t, _num(s.rs), _num(s.sbs_ss), _num(s.sbs_cp), _num(s.bbi), f"{s.n_ss} + {s.n_cp}"]
        for t, s in scored
    ]
    csv_rows = [
        {"bias_type": t, "rs": _finite(s.rs), "sbs_ss": _finite(s.sbs_ss),
         "sbs_cp": _finite(s.sbs_cp), "bbi": _finite(s.bbi)}
        for t, s in scored
    ]  # fmt: skip
    charted = [(t, s) for t, s in scored if not math.isnan(s.bbi)]
    bars: list[Bar] = [(t, s.bbi, None, None) for t, s in charted]
    columns = ["bias type", "RS", "SBS StereoSet", "SBS CrowS-Pairs", "BBI", "n (SS + CP)"]
    note = (
        "BBI < 0 leans anti-stereotypical, > 0 stereotypical, 0 balanced. n: StereoSet "
        "items + CrowS-Pairs pairs; a type missing from either dataset has no BBI."
    )
    table = Table("Bias Balance Indicator", columns, rows, notes=[note])
    ylabel = "BBI (-1 to 1; > 0 stereotypical)"
    ns = [s.n for _, s in charted]
    chart = BarChart("BBI by bias type", bars, ylabel, reference=0.0, ns=ns)
    section = Section("BBI", "bbi", result.to_dict(), [table], [chart], csv={"bbi.csv": csv_rows})
    return Report("FairJudge audit: Bias Balance Indicator", "Seed 004's design.", [section])
