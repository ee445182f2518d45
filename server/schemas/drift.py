"""A drift series over HTTP (``GET /api/v1/drift?runs=1,2,3``): the query and the reply,
which is what ``fairjudge drift --json`` prints (``judge.reports.drift.DriftSeries``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from judge.errors import NotFoundError
from server.schemas.base import Strict
from server.usecases.requests import MAX_ID

RUNS = r"^[1-9][0-9]{0,9}(,[1-9][0-9]{0,9}){0,199}$"
"""Run ids from 1, at most ten digits: one past the largest id is a 404 (no such run)."""


class DriftQuery(Strict):
    """The series, in release order, and the options of ``fairjudge drift``."""

    runs: str = Field(
        pattern=RUNS,
        max_length=2200,
        description="The judge runs of the series in release order, comma-separated (e.g. "
        "1,2,3): one judge configuration on the same anchor items, at most 200 runs.",
    )
    figure: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="A figure to watch, e.g. 'S2 TCS mean' (points) or 'S2 TCS>=4' (percent); "
        "repeat for several. Without it: every rubric mean.",
    )
    baseline: int = Field(
        default=1, ge=1, le=199, description="How many of the first runs form the baseline."
    )
    alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="The largest chance of any false alarm over the whole series (split "
        "equally over the figures).",
    )

    @property
    def run_ids(self) -> list[int]:
        """The ids; NotFoundError for one past the largest a row can have (no such run)."""
        ids = [int(part) for part in self.runs.split(",")]
        beyond = [str(i) for i in ids if i > MAX_ID]
        if beyond:
            raise NotFoundError(
                f"no judge run {', '.join(beyond)} (ids run from 1 to {MAX_ID}); see GET "
                "/api/v1/judge-runs"
            )
        return ids


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SeriesRunOut(_Out):
    judge_run_id: int
    generation_run_id: int
    model: str = Field(description="The model under test (the release).")
    status: str


class DriftFigureOut(_Out):
    name: str
    stage: str
    rubric: str
    kind: str = Field(description="mean (score points) or share (percent of items).")
    threshold: int = Field(description="A share's threshold (0 for a mean).")


class DriftRowOut(_Out):
    """One run of one figure; the baseline's runs have no look."""

    judge_run_id: int
    model: str
    look: int | None
    value: float | None = Field(description="The figure in this run, over its scored anchors.")
    pairs: int
    dropped: int = Field(description="Anchors unscored in this run or in a baseline run.")
    estimate: float | None = Field(description="The drift: mean paired difference.")
    low: float | None = Field(description="The anytime-valid interval's lower bound.")
    high: float | None
    alpha: float | None = Field(description="The share of the figure's alpha spent here.")
    alarm: bool
    note: str


class FigureDriftOut(_Out):
    figure: DriftFigureOut
    alpha: float = Field(description="This figure's share of the series' alpha.")
    rows: list[DriftRowOut]
    first_alarm_run: int | None = Field(description="The judge run of the first alarm.")


class DriftOut(_Out):
    """A drift series (``fairjudge drift --json``'s shape)."""

    runs: list[SeriesRunOut]
    baseline: int
    alpha: float
    anchors: int = Field(description="Item x rubric pairs in every run.")
    figures: list[FigureDriftOut]
    method: str
    notes: list[str]
