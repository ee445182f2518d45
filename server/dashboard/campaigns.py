"""Annotation campaigns: every campaign as the store has it, and one campaign's status read
live from Label Studio."""

from __future__ import annotations

from flask import render_template
from flask.typing import ResponseReturnValue

from server.dashboard import bp, campaign_page
from server.dashboard.access import login_required
from server.dashboard.web import settings
from server.db import get_session


@bp.get("/campaigns")
@login_required
def campaigns() -> ResponseReturnValue:
    from server.usecases.campaigns import list_campaigns

    return render_template("dashboard/campaigns.html", campaigns=list_campaigns(get_session()))


@bp.get("/campaigns/<name>")
@login_required
def campaign(name: str) -> ResponseReturnValue:
    page = campaign_page.campaign_page(get_session(), settings(), name)
    return render_template("dashboard/campaign.html", page=page)
