"""``/api/v1/campaigns``: annotation campaigns in Label Studio (create, status, pull)."""

from __future__ import annotations

from typing import Any

from flask import current_app, g

from server import usecases
from server.api import blueprint, dump
from server.db import get_session
from server.jobs import queue
from server.schemas import (
    CampaignCreate,
    CampaignCreated,
    CampaignOut,
    CampaignStatusOut,
    JobOut,
    ListOf,
    NamePath,
)
from server.usecases import campaigns

bp = blueprint("campaigns", __name__, "campaigns")


@bp.get("/campaigns", responses={200: ListOf[CampaignOut]})
def list_campaigns() -> Any:
    """Every campaign with its design and the ratings pulled so far."""
    return campaigns.list_campaigns(get_session())


@bp.post("/campaigns", responses={201: CampaignCreated})
def create_campaign(body: CampaignCreate) -> Any:
    """Sample the judge run and send the tasks to Label Studio (blind: no judge output)."""
    options = body.model_dump(exclude={"judge_run", "target_half_width", "pilot"})
    session = get_session()
    result, plan = usecases.create_campaign(
        session,
        current_app.config["SETTINGS"],
        judge_run_id=body.judge_run,
        target_half_width=body.target_half_width,
        pilot=body.pilot,
        **options,
    )
    session.commit()
    return {**result.to_dict(), "size_plan": plan}, 201


@bp.get("/campaigns/<name>", responses={200: CampaignStatusOut})
def campaign_status(path: NamePath) -> Any:
    """Progress per annotator and the items still short of ratings."""
    campaigns.get_campaign(get_session(), path.name)  # unknown: a 404 before Label Studio
    client, _ = usecases.labelstudio(current_app.config["SETTINGS"])
    return campaigns.campaign_status(get_session(), client, path.name)


@bp.post("/campaigns/<name>/pull", responses={202: JobOut})
def pull_campaign(path: NamePath) -> Any:
    """Queue a job that brings the campaign's ratings into the store."""
    campaigns.get_campaign(get_session(), path.name)  # unknown: a 404 now, not a failed job
    engine = current_app.extensions["fairjudge_engine"]
    job = queue.submit(engine, "pull", {"campaign": path.name}, created_by=g.key.name)
    return dump(JobOut, job), 202
