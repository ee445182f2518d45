"""``/api/v1/campaigns``: annotation campaigns in Label Studio (create, status, pull, export,
gold items), review campaigns of a dataset's items (``/api/v1/reviews``) and the people who
rate (``/api/v1/annotators``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import Response, current_app, g

from server import usecases
from server.api import CSV_TABLE, admin, blueprint, dump
from server.db import get_session
from server.jobs import queue
from server.schemas import (
    AnnotatorCreate,
    AnnotatorCreated,
    AnnotatorOut,
    CampaignCreate,
    CampaignCreated,
    CampaignOut,
    CampaignStatusOut,
    GoldIn,
    GoldOut,
    JobOut,
    ListOf,
    NamePath,
    ReviewCreate,
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
    from server.usecases.context import labelstudio

    campaigns.get_campaign(get_session(), path.name)  # unknown: a 404 before Label Studio
    client, _ = labelstudio(current_app.config["SETTINGS"])
    return campaigns.campaign_status(get_session(), client, path.name)


@bp.post("/campaigns/<name>/pull", responses={202: JobOut})
def pull_campaign(path: NamePath) -> Any:
    """Queue a job that brings the campaign's ratings into the store."""
    campaigns.get_campaign(get_session(), path.name)  # unknown: a 404 now, not a failed job
    engine = current_app.extensions["fairjudge_engine"]
    job = queue.submit(
        engine,
        "pull",
        {"campaign": path.name},
        created_by=g.key.name,
        settings=current_app.config["SETTINGS"],
    )
    return dump(JobOut, job), 202


def _settings() -> Any:
    return current_app.config["SETTINGS"]


def _engine() -> Any:
    return current_app.extensions["fairjudge_engine"]


@bp.get("/campaigns/<name>/ratings.csv", responses={200: CSV_TABLE})
def export_campaign(path: NamePath) -> Any:
    """The campaign's current ratings in the long format `POST /ratings` and `fairjudge
    ratings import` read (item_id, rubric, rater, score, rationale), as stored at the last
    pull; no Label Studio needed."""
    text = campaigns.export_campaign_text(_engine(), path.name)
    headers = {"Content-Disposition": f'attachment; filename="{path.name}-ratings.csv"'}
    return Response(text, mimetype="text/csv", headers=headers)


@bp.post("/campaigns/<name>/gold", responses={201: GoldOut, 200: GoldOut})
def add_gold(path: NamePath, body: GoldIn) -> Any:
    """Add gold items to a rating campaign and send their tasks to Label Studio: items outside
    its sample with a known right score, shown to annotators like any other. The same rows
    again add nothing (200)."""
    rows = [row.model_dump() for row in body.rows]
    result = campaigns.add_gold_rows(_engine(), _settings(), path.name, rows)
    return result, 201 if result["added"] else 200


@bp.post("/reviews", responses={201: CampaignCreated})
def create_review(body: ReviewCreate) -> Any:
    """Put a dataset's items before experts, who accept, edit or reject each with a reason
    (pull it like any campaign: `POST /campaigns/NAME/pull`)."""
    result = campaigns.create_review(
        _engine(),
        _settings(),
        dataset=body.dataset,
        item_keys=tuple(body.items),
        statuses=tuple(body.statuses),
        reviewers=body.reviewers,
        name=body.name,
        progress=lambda _: None,
    )
    return {**result, "size_plan": None}, 201


@bp.get("/annotators", responses={200: ListOf[AnnotatorOut]})
def list_annotators() -> Any:
    """Each annotator with their campaigns and progress as of the last pull."""
    return campaigns.list_annotators(_engine())


@bp.post("/annotators", responses={201: AnnotatorCreated, 200: AnnotatorCreated})
def add_annotator(body: AnnotatorCreate) -> Any:
    """Create a Label Studio user for the e-mail address (admins only); on FairJudge's own
    Label Studio the reply holds a password, shown this once. 200 when it already existed."""
    admin()
    made = campaigns.add_annotator(_engine(), _settings(), body.email, body.name)
    return {**asdict(made), "login": made.login_text()}, 201 if made.created else 200
