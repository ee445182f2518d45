"""What the drift page shows (no Flask here): judge runs of one configuration on the same
anchor items picked from the list, in the order they were judged (their ids), watched for
drift by the use case ``fairjudge drift`` calls (``server.usecases.drift``): per figure, a
chart of every run's drift against the baseline with its anytime-valid interval, the alarm
marked, the unit and n (pairs) beside each mark; under it the command's tables and lines.

One interval method: the anytime-valid confidence sequence of ``judge.stats.sequential``
(its method is written under each chart), the same for every mark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from judge.errors import InvalidInputError
from server.dashboard.charts import Chart, Point, fmt, intervals, shape_legend
from server.dashboard.web import api_url

if TYPE_CHECKING:
    from markupsafe import Markup
    from sqlmodel import Session

    from server.dashboard.compare_page import RunChoice


@dataclass(frozen=True)
class DriftPage:
    choices: list[RunChoice]
    picked: list[int]  # in series order
    figures: list[str]
    message: str  # what to do, or why the series was refused
    charts: list[Chart]
    tables: list[Any]  # the command's report tables
    lines: list[str]
    api: str
    legend: Markup | None = None


def _unit(kind: str) -> str:
    return "score points" if kind == "mean" else "percentage points"


def _chart(f: dict[str, Any], method: str) -> Chart:
    """One figure: a mark per run after the baseline (the baseline's runs say so), the alarm
    and n written beside each mark."""
    fig, unit = f["figure"], _unit(f["figure"]["kind"])
    points, rows = [], []
    for r in f["rows"]:
        label = f"run {r['judge_run_id']} ({r['model']})"
        if r["look"] is None:
            note = "baseline"
        else:
            note = f"n={r['pairs']}" + (" ALARM" if r["alarm"] else "")
            note += f" ({r['note']})" if r["note"] and r["estimate"] is not None else ""
            if r["estimate"] is None:
                note = r["note"] or "no estimate"
        points.append(Point(label, r["estimate"], r["low"], r["high"], note,
                            "alarm" if r["alarm"] else "no alarm"))  # fmt: skip
        rows.append([str(r["judge_run_id"]), r["model"], "—" if r["look"] is None else
                     str(r["look"]), fmt(r["value"], 3), fmt(r["estimate"], 3),
                     fmt(r["low"], 3), fmt(r["high"], 3), str(r["pairs"]), str(r["dropped"]),
                     "yes" if r["alarm"] else "no"])  # fmt: skip
    first = f["first_alarm_run"]
    said = f"first alarm at judge run {first}" if first is not None else "no alarm"
    svg = intervals(
        f"{fig['name']}: drift against the baseline",
        points,
        axis=f"run - baseline, {unit} (anytime-valid interval); n pairs; ALARM: the alarm rang",
        reference=0.0,
    )
    return Chart(
        f"{fig['name']}: drift per run ({unit}, anytime-valid intervals, n pairs; {said})",
        svg,
        ["judge run", "model", "look", "value", "drift", "low", "high", "pairs", "dropped",
         "alarm"],
        rows,
        notes=[f"alpha for this figure: {f['alpha']:g}.", method],
    )  # fmt: skip


def drift_page(session: Session, picked: Sequence[int], figures: Sequence[str]) -> DriftPage:
    """The form, and with two or more runs picked their drift series (or why not)."""
    from server.dashboard.compare_page import _choices
    from server.usecases.drift import drift, drift_summary

    order = sorted(set(picked))
    wanted = [f for f in dict.fromkeys(x.strip() for x in figures) if f]
    page = DriftPage(_choices(session, order), order, wanted,
                     "Pick two or more judge runs of one configuration on the same items; the "
                     "first (lowest id) is the baseline.", [], [], [], "")  # fmt: skip
    if len(order) < 2:
        return page
    try:
        series = drift(session, order, figures=wanted)
    except InvalidInputError as exc:  # a series the data cannot make: said on the page
        return DriftPage(page.choices, order, wanted, str(exc), [], [], [], "")
    data = series.to_json()
    tables, lines = drift_summary(series)
    charts = [_chart(f, data["method"]) for f in data["figures"]]
    api = api_url("/drift", {"runs": ",".join(map(str, order)), "figure": wanted})
    legend = shape_legend(["no alarm", "alarm"])  # the baseline (no alarm) comes first
    return DriftPage(page.choices, order, wanted, "", charts, tables, lines, api, legend)
