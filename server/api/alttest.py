"""The alt-test verdict over HTTP (issue 27): ``GET /api/v1/judge-runs/RUN/alt-test`` on the
stored ratings of the run's answers, ``POST /api/v1/alt-test`` on ratings and judge scores
sent as CSV text (nothing is stored). Both answer what ``fairjudge agreement alt-test
--json`` prints (``server.usecases.alttest``); a test the data cannot support is a 400 whose
message says why."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.api import blueprint
from server.db import get_session
from server.schemas import RatingScopeQuery, RunPath, Strict
from server.usecases.alttest import AltTestOptions, FilesAltTestRequest

bp = blueprint("alttest", __name__, "agreement")


class AltTestQuery(RatingScopeQuery, AltTestOptions):
    """Which ratings the test uses, of which rubric, and how it is run (the options of
    ``fairjudge agreement alt-test``)."""

    rubric: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Only this rubric (default: every rubric with ratings).",
    )


class AltTestFilesIn(FilesAltTestRequest, Strict):
    """``fairjudge agreement alt-test --human --judge``'s files and options."""


class AltTestAnnotatorOut(BaseModel):
    """The judge against one left-out annotator."""

    model_config = ConfigDict(extra="forbid")
    annotator: str
    n_items: int = Field(description="Items this annotator rated that another one rated too.")
    rho_f: float = Field(description="Share of them where the judge is at least as close to "
                         "the other annotators as this one (ties count for both).")  # fmt: skip
    rho_h: float = Field(description="Share where this annotator is at least as close.")
    test: Literal["t-test", "wilcoxon"] = Field(
        description="t-test from 30 items, Wilcoxon signed-rank below."
    )
    statistic: float | None = Field(
        description="t, or Wilcoxon's W; null when not finite (every item gives the same "
        "difference)."
    )
    p_value: float = Field(description="One-sided, before correction.")
    p_corrected: float = Field(description="Benjamini-Yekutieli adjusted.")
    rejected: bool = Field(description="p_corrected <= alpha: the judge wins against them.")


class RubricAltTestOut(BaseModel):
    """One rubric's test, or why it was refused (then the result's fields are null and
    ``annotators`` is empty)."""

    model_config = ConfigDict(extra="forbid")
    rubric: str | None = Field(description="The rubric; null for posted files.")
    n_items: int = Field(description="Rated items the judge scored: the test's rows.")
    n_annotators: int
    judge_unscored: int = Field(description="Rated items the judge has no score for.")
    refused: str | None = Field(description="Why the data cannot support the test, or null.")
    passed: bool | None = Field(description="omega >= 0.5; null when refused.")
    verdict: str | None = Field(description="The verdict in words; null when refused.")
    omega: float | None = Field(description="Winning rate: share of annotators rejected.")
    rho: float | None = Field(description="Mean of rho_f: compares judges, higher is better.")
    annotators: list[AltTestAnnotatorOut]


class ItemCountsOut(BaseModel):
    """How the posted files' items paired."""

    model_config = ConfigDict(extra="forbid")
    paired: int
    human_only: int
    judge_only: int
    judge_unscored_items: int
    judge_unscored_rows: int


class AltTestOut(BaseModel):
    """The alt-test per rubric: what ``fairjudge agreement alt-test --json`` prints."""

    model_config = ConfigDict(extra="forbid")
    source: Literal["judge_run", "files"]
    judge_run: int | None = Field(description="The judge run tested; null for files.")
    generation_run: int | None = Field(description="Its generation run; null for files.")
    ratings_used: dict[str, Any] | None = Field(
        description="The campaigns and import batches whose ratings were used; null for files."
    )
    items: ItemCountsOut | None = Field(description="For files: how their items paired.")
    scale: str | None = Field(description="For files: their rating scale.")
    epsilon: float
    epsilon_preset: Literal["expert", "skilled", "crowd"] | None
    alpha: float
    alignment: Literal["neg_rmse", "neg_mae", "accuracy"]
    min_items: int
    items_rule: str = Field(
        description="Which rule on items per annotator applied: the authors' (30 or more) or "
        "one the user lowered."
    )
    rubrics: list[RubricAltTestOut]


@bp.get("/judge-runs/<int:run_id>/alt-test", responses={200: AltTestOut})
def run_alt_test(path: RunPath, query: AltTestQuery) -> Any:
    """The alt-test: may this judge run replace the annotators who rated its answers?

    Per rubric, each annotator left out in turn against the judge (Calderon et al., ACL
    2025); the judge passes when it wins against half of them or more. A 400 says why when
    no rubric has the data (three annotators or more, min_items each)."""
    from server.usecases.alttest import AltTestRequest, alt_test_run

    fields = query.model_dump(exclude={"campaign"})
    request = AltTestRequest(judge_run=path.run_id, campaigns=query.campaign, **fields)
    return alt_test_run(get_session(), request).to_dict()


@bp.post("/alt-test", responses={200: AltTestOut})
def files_alt_test(body: AltTestFilesIn) -> Any:
    """The alt-test on ratings and judge scores of one's own, sent as CSV text.

    Nothing is stored. The shape of `fairjudge agreement alt-test --human --judge --json`; a
    bad line of either text, or data that cannot support the test, is a 400 naming it."""
    from server.usecases.alttest import alt_test_text

    return alt_test_text(body)
