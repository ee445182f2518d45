"""An audit run: its answers by status, each suite's groups with their intervals (the
report's bar charts drawn as dots with whiskers), the tests and their p-values, and the
award audit's follow-up classes. No Flask here.

Everything is ``audit_result`` (what ``fairjudge audit show`` prints and ``GET
/api/v1/audit-runs/ID`` returns); the charts are its report's figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from server.dashboard.charts import Chart
from server.dashboard.figures import section_charts
from server.dashboard.web import api_url

if TYPE_CHECKING:
    from server.usecases.audits import AuditResult
    from server.usecases.reports import Section


@dataclass(frozen=True)
class ShownSection:
    section: Section
    charts: list[Chart]


@dataclass(frozen=True)
class AuditPage:
    run_id: int
    result: AuditResult
    sections: list[ShownSection]
    links: dict[str, str]


def audit_page(run_id: int, result: AuditResult) -> AuditPage:
    csv = api_url(f"/audit-runs/{run_id}/report.csv")
    shown = [ShownSection(s, section_charts(s, csv)) for s in result.report.sections]
    links = {
        "run (JSON)": api_url(f"/audit-runs/{run_id}"),
        "report (JSON)": api_url(f"/audit-runs/{run_id}/report.json"),
        "report (HTML)": api_url(f"/audit-runs/{run_id}/report.html"),
    }
    links.update(estimate_links(run_id, result))
    return AuditPage(run_id, result, shown, links)


def estimate_links(run_id: int, result: AuditResult) -> dict[str, str]:
    """The follow-up estimates' links, only where they answer: an award run a judge has
    classified (one link per judge when several have; with none the route is a 404)."""
    if result.info["suite"] != "award":
        return {}
    judges = sorted(s for s in (result.followup or {}).get("classes", {}) if s.startswith("judge:"))
    url = f"/audit-runs/{run_id}/estimates"
    if len(judges) == 1:
        return {"follow-up estimates (JSON)": api_url(url)}
    return {f"follow-up estimates, {j} (JSON)": api_url(url, {"judge": j}) for j in judges}
