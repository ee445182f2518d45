"""What the jury page shows (no Flask here): judge runs of the same answers picked from the
list (the comparison page's form), combined into a jury by the use case ``fairjudge jury``
calls (``server.usecases.juries``): per rubric, each judge's and the jury's agreement with
people with their intervals, the paired interval of jury minus best judge with its verdict,
and the jury's cost beside its gain; under them the command's own tables and lines.

One interval method per chart: the agreement chart and the jury-minus-best chart both give
the use case's percentile bootstrap over the rated items (the second paired: the same
resample for the jury and the judges). The statistic's name and n (rated items) are written
beside every mark.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from judge.errors import InvalidInputError
from server.dashboard.charts import Chart, Point, fmt, intervals
from server.dashboard.web import api_url

if TYPE_CHECKING:
    from sqlmodel import Session

    from judge.config import Settings
    from server.dashboard.compare_page import RunChoice
    from server.usecases.juries import JuryRequest

COMBINE = ("mean", "median", "majority", "learnt")
STATISTICS = ("spearman", "pearson", "kendall", "kappa_quadratic")


@dataclass(frozen=True)
class RubricView:
    name: str
    agreement: Chart
    versus: Chart
    verdict: str  # the command's verdict line for the rubric


@dataclass(frozen=True)
class JuryPage:
    choices: list[RunChoice]
    picked: list[int]
    combine: str
    statistic: str
    message: str  # what to do (too few runs) or why the jury could not be made
    rubrics: list[RubricView]
    cost: list[list[str]]  # run, label, cost
    cost_line: str
    tables: list[Any]  # the command's report tables
    api: str  # the same numbers from the API


def _n(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def _agreement(name: str, rubric: dict[str, Any], statistic: str, level: str) -> Chart:
    """Each judge, then the jury: the statistic against people with its bootstrap interval."""
    points, rows = [], []
    for member in [*rubric["judges"], rubric["jury"]]:
        c = member["coefficients"][statistic]
        label = member["label"] if member["judge_run"] is None else (
            f"run {member['judge_run']}: {member['label']}")  # fmt: skip
        note = f"n={c['n']}" if c["value"] is not None else (c["undefined_reason"] or "undefined")
        points.append(Point(label, _n(c["value"]), _n(c["ci_low"]), _n(c["ci_high"]), note))
        rows.append([label, fmt(c["value"], 3), fmt(c["ci_low"], 3), fmt(c["ci_high"], 3),
                     str(c["n"])])  # fmt: skip
    svg = intervals(
        f"{name}: agreement with people ({statistic})",
        points,
        axis=f"{statistic} with people ({level} percentile bootstrap over rated items); n items",
    )
    return Chart(
        f"{name}: each judge and the jury against people ({statistic}, {level} bootstrap "
        "intervals, n rated items)",
        svg, ["member", statistic, "CI low", "CI high", "n items"], rows,
        notes=[f"{rubric['n_items']} of {rubric['n_rated_items']} rated items were scored by "
               "every judge: the items used."],
    )  # fmt: skip


def _versus(name: str, rubric: dict[str, Any], level: str) -> Chart:
    """Jury minus its best judge, paired over the rated items, with the verdict."""
    v = rubric["versus_best"]
    note = f"n={v['n']}, {v['verdict']}" if v["difference"] is not None else v["reason"]
    point = Point(f"jury - best (run {v['best_judge_run']})", _n(v["difference"]),
                  _n(v["ci_low"]), _n(v["ci_high"]), note)  # fmt: skip
    svg = intervals(
        f"{name}: jury minus its best judge",
        [point],
        axis=f"jury - best judge, {v['statistic']} ({level} paired percentile bootstrap); n items",
        reference=0.0,
    )
    return Chart(
        f"{name}: jury minus its best judge ({v['statistic']}, {level} paired bootstrap)",
        svg, ["difference", "CI low", "CI high", "n items", "verdict", "best judge chosen"],
        [[fmt(v["difference"], 3), fmt(v["ci_low"], 3), fmt(v["ci_high"], 3), str(v["n"]),
          v["verdict"], v["best_judge_chosen"]]],
    )  # fmt: skip


def jury_page(
    session: Session,
    settings: Settings | None,
    picked: Sequence[int],
    combine: str,
    statistic: str,
) -> JuryPage:
    """The form, and with two or more runs picked their jury (or why there is none)."""
    from server.dashboard.compare_page import _choices
    from server.usecases.juries import JuryRequest

    distinct = list(dict.fromkeys(picked))
    pick = "Pick two or more judge runs of the same answers."
    page = JuryPage(_choices(session, distinct), distinct, combine, statistic, pick, [], [], "",
                    [], "")  # fmt: skip
    if len(distinct) < 2:
        return page
    request = JuryRequest(runs=distinct, combine=combine, statistic=statistic)  # type: ignore[arg-type]
    try:
        return _made(session, settings, request, page)
    except InvalidInputError as exc:  # a jury the data cannot make: said on the page
        return JuryPage(page.choices, distinct, combine, statistic, str(exc), [], [], "", [], "")


def _made(
    session: Session, settings: Settings | None, request: JuryRequest, page: JuryPage
) -> JuryPage:
    from server.usecases.juries import jury, jury_summary

    found = jury(session, request, settings)
    data = found.to_dict()
    tables, lines = jury_summary(found)
    level = f"{100 * data['confidence']:g} %"
    views = [
        RubricView(name, _agreement(name, r, request.statistic, level), _versus(name, r, level),
                   lines[k])
        for k, (name, r) in enumerate(data["rubrics"].items())
    ]  # fmt: skip
    labels = {str(r["id"]): r["label"] for r in data["judge_runs"]}
    cost = [[run, labels[run], "unknown" if c is None else f"{c:.4f}"]
            for run, c in data["cost"]["runs"].items()]  # fmt: skip
    query = {"runs": ",".join(map(str, request.runs)), "combine": request.combine,
             "statistic": request.statistic}  # fmt: skip
    return JuryPage(page.choices, page.picked, page.combine, page.statistic, "", views, cost,
                    lines[-1], tables, api_url("/juries", query))  # fmt: skip
