"""A Label Studio campaign: progress per annotator, the items still short of ratings, the
annotators flagged (offset from the others, low agreement, gold accuracy) and a link into
Label Studio. No Flask here.

The status is ``campaign_status`` read live from Label Studio (what ``fairjudge campaign
status`` prints and ``GET /api/v1/campaigns/NAME`` returns); when Label Studio does not
answer, the page says so and shows what the store holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from server.dashboard.charts import Chart, Point, fmt, intervals, progress_bars
from server.dashboard.web import api_url

if TYPE_CHECKING:
    from sqlmodel import Session

    from judge.config import Settings


@dataclass(frozen=True)
class CampaignPage:
    name: str
    stored: dict[str, Any]  # list_campaigns' row: design and ratings pulled
    project_url: str | None
    status: dict[str, Any] | None
    error: str | None
    progress: Chart | None
    offsets: Chart | None
    links: dict[str, str]


def project_url(ls_url: str | None, project: int | None) -> str | None:
    """The campaign's project in Label Studio's own web interface.

    >>> project_url("http://127.0.0.1:8080/", 7)
    'http://127.0.0.1:8080/projects/7'
    """
    if not ls_url or project is None:
        return None
    return f"{ls_url.rstrip('/')}/projects/{project}"


def progress_chart(status: dict[str, Any]) -> Chart:
    """Complete annotations per annotator against the campaign's tasks."""
    tasks = status["tasks"]
    rows = []
    table = []
    for a in status["annotators"]:
        extra = [f"{a[k]} {k}" for k in ("incomplete", "unreadable", "skipped") if a[k]]
        rows.append((a["email"], a["done"], tasks, ", ".join(extra)))
        table.append(
            [
                a["email"],
                str(a["done"]),
                str(tasks),
                str(a["incomplete"]),
                str(a["unreadable"]),
                str(a["skipped"]),
                fmt(a["median_lead_time_s"], 1),
                ", ".join(a["flags"]),
            ]
        )
    return Chart(
        "Complete annotations per annotator",
        progress_bars("Complete annotations per annotator", rows),
        [
            "annotator",
            "done",
            "tasks",
            "incomplete",
            "unreadable",
            "skipped",
            "median seconds per task",
            "flags",
        ],
        table,
    )


def offsets_chart(status: dict[str, Any]) -> Chart | None:
    """Each annotator's mean offset from the annotator it differs least from, with its
    interval, around 0 (a flag needs the whole interval beyond the margin)."""
    margin = status.get("thresholds", {}).get("offset_margin")
    points, table = [], []
    for a in status["annotators"]:
        o = a.get("offset")
        if o is None:
            points.append(Point(a["email"], None, note="too few items shared with another"))
            continue
        points.append(
            Point(
                a["email"],
                o["mean"],
                o["ci_low"],
                o["ci_high"],
                f"vs {o['other']}, n={o['n_items']}",
            )
        )
        table.append(
            [
                a["email"],
                o["other"],
                fmt(o["mean"]),
                fmt(o["ci_low"]),
                fmt(o["ci_high"]),
                str(o["n_items"]),
            ]
        )
    if not table:
        return None
    axis = "mean score difference from the closest other annotator (levels)"
    if margin is not None:
        axis += f"; flagged beyond ±{margin:g}"
    return Chart(
        "Annotators' offsets from each other (95 % interval)",
        intervals("Annotators' offsets", points, axis=axis, reference=0.0),
        ["annotator", "closest other", "mean offset", "CI low", "CI high", "items shared"],
        table,
    )


def campaign_page(session: Session, settings: Settings, name: str) -> CampaignPage:
    """The campaign as the store has it, and its status from Label Studio (NotFoundError for
    an unknown campaign; a Label Studio that does not answer is named on the page)."""
    from judge.errors import FairJudgeError
    from server.usecases import campaigns
    from server.usecases.context import labelstudio

    row = campaigns.get_campaign(session, name)
    stored = next(c for c in campaigns.list_campaigns(session) if c["name"] == name)
    status: dict[str, Any] | None = None
    error = None
    try:
        client, _ = labelstudio(settings)
        status = campaigns.campaign_status(session, client, name)
    except FairJudgeError as exc:  # Label Studio down, or its token missing
        error = f"Label Studio did not give the campaign's status: {exc}"
    links = {
        "status (JSON)": api_url(f"/campaigns/{name}"),
        "ratings (CSV)": api_url(f"/campaigns/{name}/ratings.csv"),
    }
    return CampaignPage(
        name,
        stored,
        project_url(row.ls_url, row.ls_project_id),
        status,
        error,
        None if status is None else progress_chart(status),
        None if status is None else offsets_chart(status),
        links,
    )
