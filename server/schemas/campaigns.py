"""Label Studio: rating and review campaigns, gold items and annotator accounts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from server.schemas.base import Strict
from server.usecases.requests import MAX_ID

# -- campaigns ------------------------------------------------------------------------------


class CampaignOut(BaseModel):
    """A campaign's design and the ratings pulled so far."""

    name: str
    kind: str = Field(description="rating or review")
    judge_run: int | None
    dataset: int
    strategy: str
    size: int
    population: int
    annotators: int
    project: int | None = Field(description="Its Label Studio project.")
    ratings: int
    pulled_at: str | None


class CampaignCreated(BaseModel):
    """What creating (or finishing the creation of) a campaign did."""

    model_config = ConfigDict(extra="allow")
    campaign: str
    created: bool
    strategy: str
    population: int
    size: int
    annotators: int
    project: int | None
    url: str
    imported: int
    already_there: int
    strata: dict[str, Any]
    shortfall: dict[str, Any]
    gold_items: int
    notes: list[str]
    size_plan: str | None = Field(
        description="Why this size, when it was planned for a target half width."
    )


class CampaignStatusOut(BaseModel):
    """Progress read live from Label Studio: per annotator, items short of ratings."""

    campaign: str
    kind: str
    strategy: str
    tasks: int
    needed_per_item: int
    gold_items: int
    thresholds: dict[str, float]
    annotators: list[dict[str, Any]]
    items_short: dict[str, int]
    items_incomplete: dict[str, list[str]]
    rated_twice: list[list[str]]
    skipped_items: dict[str, int]


class CampaignCreate(Strict):
    """Sample a judge run's answers into a Label Studio project (docs/annotation.md)."""

    judge_run: int = Field(ge=1, le=MAX_ID)
    rubrics: list[str] = Field(default_factory=list, description="Default: all of the run's.")
    size: Annotated[int, Field(gt=0)] | Annotated[float, Field(gt=0)] | None = Field(
        default=None, description="A count (a whole number) or a fraction of the run (<= 1)."
    )
    annotators: int = Field(default=3, ge=1, le=100)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    strategy: str = Field(default="random", pattern="^(random|stratified|disagreement)$")
    target_half_width: float | None = Field(default=None, gt=0, le=1)
    pilot: str | None = Field(default=None, max_length=200)
    name: str | None = Field(default=None, min_length=1, max_length=200)


class GoldRowIn(Strict):
    item_id: str = Field(min_length=1, max_length=200, description="An item of the dataset.")
    rubric: str = Field(min_length=1, max_length=200)
    score: int = Field(ge=0, le=1000, description="The right score, a level of the rubric.")


class GoldIn(Strict):
    """Gold items for a rating campaign (``fairjudge campaign gold``): items outside its
    sample with a known right score, to measure each annotator's accuracy."""

    rows: list[GoldRowIn] = Field(min_length=1, max_length=5000)


class GoldOut(BaseModel):
    campaign: str
    added: int = Field(description="Gold items new to the campaign.")
    imported: int = Field(description="Their tasks sent to Label Studio.")
    gold_items: int = Field(description="The campaign's gold items in all.")


class ReviewCreate(Strict):
    """Put a dataset's items before experts (``fairjudge campaign review``), who accept, edit
    or reject each with a reason; again with the same options adds what matches now."""

    dataset: str = Field(min_length=1, max_length=200)
    items: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=5000, description="Only these item ids."
    )
    statuses: list[Literal["draft", "unreviewed", "accepted", "edited", "rejected"]] = Field(
        default_factory=list, max_length=5, description="Only items with these review statuses."
    )
    reviewers: int = Field(default=1, ge=1, le=100, description="Reviewers each item needs.")
    name: str | None = Field(default=None, min_length=1, max_length=200)


class AnnotatorOut(BaseModel):
    email: str
    name: str
    user_id: int | None = Field(description="Their Label Studio user id.")
    campaigns: dict[str, str] = Field(description="Campaign -> items rated/size at the last pull.")


class AnnotatorCreate(Strict):
    email: str = Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")
    name: str = Field(default="", max_length=200)


class AnnotatorCreated(BaseModel):
    email: str
    user_id: int
    url: str = Field(description="Where the person logs in.")
    password: str | None = Field(
        description="Set on FairJudge's own Label Studio: shown this once, never stored."
    )
    created: bool = Field(description="False when the account already existed.")
    login: str = Field(description="How the person logs in, in words.")
