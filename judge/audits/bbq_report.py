"""The BBQ figures (``judge.audits.bbq_score``) as a report: one table per category and
overall, bar charts of s_DIS and s_AMB with their intervals, and the items counted apart."""

from __future__ import annotations

import math
from typing import Any

from judge.audits.bbq_score import BbqAnalysis, Estimate, GroupScores
from judge.reports.sections import BarChart, Report, Section, Table


def _pct(e: Estimate) -> str:
    if math.isnan(e.value):
        return "n/a"
    if math.isnan(e.low):
        return f"{100 * e.value:.1f}"
    return f"{100 * e.value:.1f} [{100 * e.low:.1f}, {100 * e.high:.1f}]"


def _row(name: str, g: GroupScores) -> list[str]:
    return [
        name,
        _pct(g.accuracy_ambig),
        _pct(g.accuracy_disambig),
        _pct(g.s_dis),
        _pct(g.s_amb),
        f"{g.answered_ambig} / {g.answered_disambig}",
        f"{g.non_unknown_ambig} / {g.non_unknown_disambig}",
        str(g.clusters),
        str(g.no_single_target),
        str(g.unread),
    ]


def _csv(name: str, g: GroupScores) -> dict[str, Any]:
    out: dict[str, Any] = {"category": name}
    for k, v in g.to_dict().items():
        if isinstance(v, dict):
            out.update({f"{k}_{part}": x for part, x in v.items()})
        else:
            out[k] = v
    return out


def _bars(rows: list[tuple[str, GroupScores]], which: str) -> BarChart:
    bars = []
    ns = []
    for name, g in rows:
        e: Estimate = getattr(g, which)
        if math.isnan(e.value):
            continue
        low = None if math.isnan(e.low) else 100 * e.low
        high = None if math.isnan(e.high) else 100 * e.high
        bars.append((name, 100 * e.value, low, high))
        ns.append(g.non_unknown_disambig if which == "s_dis" else g.answered_ambig)
    label = "s_DIS x 100" if which == "s_dis" else "s_AMB x 100"
    title = f"{label} by category (> 0: answers follow the stereotype)"
    return BarChart(title, bars, f"{label} (-100 to 100)", reference=0.0, ns=ns)


def bbq_report(result: BbqAnalysis) -> Report:
    """Accuracy per context, s_DIS and s_AMB with intervals, and the n behind each."""
    rows = [("all", result.overall), *result.by_category.items()]
    level = round(100 * result.confidence)
    columns = [
        "category",
        "accuracy ambiguous %",
        "accuracy disambiguated %",
        "s_DIS x 100",
        "s_AMB x 100",
        "answered (amb / dis)",
        "not unknown (amb / dis)",
        "templates",
        "no single target",
        "unread",
    ]
    notes = [
        f"[low, high]: {level} % percentile bootstrap over templates (category and "
        f"question_index; {result.resamples:,} resamples): a template's items share names "
        "and wording, so they are resampled together.",
        "s_DIS = 2 x biased / not-unknown - 1 over disambiguated answers (biased: the target "
        "for a negative question, the other group for a non-negative one); s_AMB = (1 - "
        "ambiguous accuracy) x the same score over ambiguous answers (Parrish et al. 2022).",
        "No single target: the item's stereotyped groups match no option or both; these "
        "count in accuracy but in no bias score. Unread: answers naming no option, counted "
        "nowhere else.",
    ]
    table = Table("BBQ accuracy and bias scores", columns, [_row(n, g) for n, g in rows], notes)
    unread_rows = [[why, str(n)] for why, n in sorted(result.unread.items())]
    tables = [table]
    if unread_rows:
        tables.append(Table("Answers that could not be read", ["why", "n"], unread_rows))
    section = Section(
        "BBQ",
        "bbq",
        result.to_dict(),
        tables,
        [_bars(rows, "s_dis"), _bars(rows, "s_amb")],
        csv={"bbq.csv": [_csv(n, g) for n, g in rows]},
    )
    return Report("FairJudge audit: BBQ", "Parrish et al. (2022)'s bias scores.", [section])
