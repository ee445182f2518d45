"""The audits' results as a report (the same Section/Table/Figure types as a judge run's), so
one renderer writes their HTML with plots, report.json and CSV files."""

from __future__ import annotations

import math
from typing import Any

from judge.audits.award import AwardAnalysis, FollowupAnalysis
from judge.audits.bbi import BbiReport
from judge.audits.names import NameAuditResult
from judge.reports.sections import BarChart, Report, Section, Table

Bar = tuple[str, float, float | None, float | None]


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
    for s in summaries:
        level = "all" if s.level is None else str(s.level)
        p = s.binomial.p_value if s.binomial.tested else None
        rows.append(
            [level, str(s.group_a), str(s.group_b), str(s.equivocal), _num(s.share_a),
             f"{_num(s.share_a_ci[0])}–{_num(s.share_a_ci[1])}", _num(p)]
        )  # fmt: skip
        csv_rows.append(
            {"level": level, "group_a": s.group_a, "group_b": s.group_b,
             "equivocal": s.equivocal, "share_a": _finite(s.share_a), "p_value": p}
        )  # fmt: skip
        if not math.isnan(s.share_a):
            bars.append((level, s.share_a, _finite(s.share_a_ci[0]), _finite(s.share_a_ci[1])))
    table = Table(
        "Choices per performance level",
        ["level", "group A", "group B", "equivocal", "share A", "95 % CI", "p (exact)"],
        rows,
        notes=[
            "p: exact two-sided binomial test of A against B at 0.5 (the two-sided p sums every "
            "outcome no more likely than the one seen); equivocal answers are left out of it.",
        ],
    )
    chart = BarChart("Share choosing group A (95 % Wilson CI)", bars, "share", reference=0.5)
    section = Section(
        "Award choice", "award", result.to_dict(), [table], [chart], csv={"award.csv": csv_rows}
    )
    return Report("FairJudge audit: award choice", "Seed 000's design.", [section])


def _followup_report(result: FollowupAnalysis) -> Report:
    rows, csv_rows = [], []
    for s in [*result.levels, result.overall]:
        level = "all" if s.level is None else str(s.level)
        test = s.chi_square
        p = _num(test.p_value) if test.tested else f"not tested ({test.reason})"
        rows.append([level, "/".join(map(str, s.counts_a)), "/".join(map(str, s.counts_b)), p])
        csv_rows.append(
            {"level": level, "a": list(s.counts_a), "b": list(s.counts_b),
             "p_value": test.p_value if test.tested else None}
        )  # fmt: skip
    table = Table(
        "Explanations by chosen group (indecisive/justified/irrational)",
        ["level", "group A", "group B", "chi-square p"],
        rows,
        notes=["Tested only where every expected count is at least 5."],
    )
    section = Section(
        "Award follow-up", "followup", result.to_dict(), [table], csv={"followup.csv": csv_rows}
    )
    return Report("FairJudge audit: award follow-up", "Seed 000's follow-up.", [section])


def names_report(result: NameAuditResult) -> Report:
    """Means by race and gender per variation and context, with the Welch comparisons."""
    rows: list[list[str]] = []
    csv_rows: list[dict[str, Any]] = []
    bars: list[Bar] = []
    for cell in result.cells:
        where = f"{cell.scenario}/{cell.variation}/{cell.context}"
        for g in (*cell.by_race, *cell.by_gender):
            rows.append([where, g.group, str(g.n), _num(g.mean, 1),
                         f"{_num(g.ci_low, 1)}–{_num(g.ci_high, 1)}"])  # fmt: skip
            csv_rows.append({"cell": where, "group": g.group, "n": g.n, "mean": g.mean,
                             "ci_low": g.ci_low, "ci_high": g.ci_high})  # fmt: skip
    for name in sorted(result.names, key=lambda n: n.mean_z)[:40]:
        bars.append((name.name, name.mean_z, None, None))
    table = Table("Means by race and gender (95 % t-interval)",
                  ["cell", "group", "n", "mean", "95 % CI"], rows)  # fmt: skip
    chart = BarChart("Per-name standardised mean (z, sports left out)", bars, "mean z", 0.0)
    notes = [
        f"{result.n_imputed} of {result.n_rows} answers had no number and were imputed with "
        "the median of their race-gender group in the same variation and context.",
    ]
    section = Section("Name-based advice", "names", result.to_dict(), [table], [chart], notes,
                      csv={"names.csv": csv_rows})  # fmt: skip
    return Report("FairJudge audit: name-based advice", "Seed 002's design.", [section])


def bbi_report(result: BbiReport) -> Report:
    """RS, SBS per dataset and BBI, overall and per bias type."""
    scored = [("all", result.overall), *sorted(result.by_bias_type.items())]
    rows = [[t, _num(s.rs), _num(s.sbs_ss), _num(s.sbs_cp), _num(s.bbi)] for t, s in scored]
    csv_rows = [
        {"bias_type": t, "rs": _finite(s.rs), "sbs_ss": _finite(s.sbs_ss),
         "sbs_cp": _finite(s.sbs_cp), "bbi": _finite(s.bbi)}
        for t, s in scored
    ]  # fmt: skip
    bars: list[Bar] = [(t, s.bbi, None, None) for t, s in scored if not math.isnan(s.bbi)]
    columns = ["bias type", "RS", "SBS StereoSet", "SBS CrowS-Pairs", "BBI"]
    note = "BBI < 0 leans anti-stereotypical, > 0 stereotypical, 0 balanced."
    table = Table("Bias Balance Indicator", columns, rows, notes=[note])
    chart = BarChart("BBI by bias type", bars, "BBI", reference=0.0)
    section = Section("BBI", "bbi", result.to_dict(), [table], [chart], csv={"bbi.csv": csv_rows})
    return Report("FairJudge audit: Bias Balance Indicator", "Seed 004's design.", [section])
