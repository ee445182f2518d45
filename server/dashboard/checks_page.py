"""The judge's own checks on one run: self-preference, counterfactual shifts by swap
direction with their intervals, position consistency and fairness (a run judged in both
orders), length and cost. No Flask here.

The page is the "Judge diagnostics" report of ``diagnostics_report`` (what ``fairjudge
checks show`` prints and ``GET .../diagnostics.json`` returns), with the same options:
its bar charts drawn as dots with whiskers, its tables under them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from server.dashboard.charts import Chart, Point, fmt, intervals
from server.dashboard.figures import section_charts
from server.dashboard.web import api_url
from server.usecases.dashboard import ChecksPageOptions

if TYPE_CHECKING:
    from server.kept.cache import Computed
    from server.usecases.reports import Report, Section


def direction_chart(payload: Mapping[str, Any], csv: str) -> Chart | None:
    """Every counterfactual copy's shifts by swap direction (oriented, toward each side,
    mixed), each with its interval and pairs: the direction table's numbers as a picture."""
    points, rows = [], []
    for copy in payload["counterfactual"]:
        for d in copy["directions"]:
            if not d["n"]:
                continue
            label = f"{d['kind']} {d['scope']}: {d['label'].split(' (')[0]}"
            note = f"n={d['n']}" + (f", p={d['p_value']:.3g}" if d["p_value"] is not None else "")
            points.append(Point(label, d["mean"], d["ci_low"], d["ci_high"], note, d["direction"]))
            rows.append(
                [
                    d["kind"],
                    d["scope"],
                    d["label"],
                    str(d["n"]),
                    fmt(d["mean"]),
                    fmt(d["ci_low"]),
                    fmt(d["ci_high"]),
                    "—" if d["p_value"] is None else f"{d['p_value']:.3g}",
                    d["equivalence"] or "",
                    "yes" if d["flagged"] else "no",
                ]
            )
    if not points:
        return None
    return Chart(
        "Counterfactual shifts by swap direction (score points, 95 % interval)",
        intervals(
            "Counterfactual shifts by direction",
            points,
            axis="score change of the swapped copy",
            reference=0.0,
        ),
        [
            "swaps",
            "rubric",
            "direction",
            "pairs",
            "mean",
            "CI low",
            "CI high",
            "p",
            "equivalence",
            "flagged",
        ],
        rows,
        csv,
    )


def position_chart(payload: Mapping[str, Any], csv: str) -> Chart | None:
    """Position consistency per rubric (share of pairs scored the same in both orders) with
    its interval, against the flag's threshold."""
    order = payload.get("order")
    if not order:
        return None
    points, rows = [], []
    for r in order["rubrics"]:
        low, high = r["position_consistency_ci"] or (None, None)
        points.append(
            Point(
                r["rubric"],
                r["position_consistency"],
                low,
                high,
                f"{r['consistent']} of {r['pairs']} pairs",
            )
        )
        rows.append(
            [
                r["rubric"],
                str(r["pairs"]),
                str(r["consistent"]),
                "n/a" if r["primacy_preferring"] is None else str(r["primacy_preferring"]),
                "n/a" if r["recency_preferring"] is None else str(r["recency_preferring"]),
                fmt(r["position_consistency"]),
                fmt(low),
                fmt(high),
                fmt(r["preference_fairness"]),
            ]
        )
    return Chart(
        "Position consistency per rubric (share of pairs, 95 % interval)",
        intervals(
            "Position consistency",
            points,
            axis="share of pairs scored alike in both orders",
            reference=order["min_consistency"],
            domain=(0, 1),
        ),
        [
            "rubric",
            "pairs",
            "consistent",
            "primacy",
            "recency",
            "consistency",
            "CI low",
            "CI high",
            "preference fairness",
        ],
        rows,
        csv,
    )


@dataclass(frozen=True)
class ChecksPage:
    run_id: int
    options: ChecksPageOptions
    computed: Computed[Report]
    section: Section
    charts: list[Chart]
    payload: dict[str, Any]
    links: dict[str, str]
    standing: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Rubric -> the judge's standing (state, says), as the report page shows it."""
    standing_line: str = ""

    @property
    def all_validated(self) -> bool:
        return bool(self.standing) and all(
            s.get("state") == "validated" for s in self.standing.values()
        )


def checks_page(run_id: int, o: ChecksPageOptions, computed: Computed[Report]) -> ChecksPage:
    # The diagnostics come after the judge's standing (server.usecases.qualify), last.
    section = computed.value.sections[-1]
    from server.schemas import DiagnosticsQuery

    default = DiagnosticsQuery()
    query = {
        "tolerance": None if o.tolerance == default.tolerance else o.tolerance,
        "margin": None if o.margin == default.margin else o.margin,
    }
    csv = api_url(f"/judge-runs/{run_id}/diagnostics.csv", query)
    links = {
        "diagnostics (JSON)": api_url(f"/judge-runs/{run_id}/diagnostics.json", query),
        "diagnostics (HTML)": api_url(f"/judge-runs/{run_id}/diagnostics.html", query),
    }
    extra = [direction_chart(section.payload, csv), position_chart(section.payload, csv)]
    charts = [c for c in extra if c is not None] + section_charts(section, csv)
    # The standing the report computed beside these figures (its first section).
    first = computed.value.sections[0] if computed.value.sections else None
    standing: dict[str, Any] = {}
    if first is not None and first.json_key == "standing":
        standing = first.payload
    return ChecksPage(
        run_id, o, computed, section, charts, section.payload, links,
        dict(standing.get("rubrics", {})), str(standing.get("summary", "")),
    )  # fmt: skip
