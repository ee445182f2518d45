"""Datasets and items, endpoints, generation and judge runs with their answers and
judgments, answers produced elsewhere, human ratings and rubrics."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
)

from server.schemas.base import PageQuery, ReplyOf, Strict
from server.usecases.requests import MAX_ID
from server.usecases.shapes import (
    MAX_BATCH_ROWS,
    DatasetDescription,
    DatasetInfo,
    GenerationRunInfo,
    ImportSummary,
    MetricRow,
    ResponseRow,
    ResponsesImport,
)
from server.usecases.standing import JudgeRunStanding

# -- datasets, items ------------------------------------------------------------------------


class DatasetOut(ReplyOf[DatasetInfo]):
    """A dataset and its item count (``judge.data.datasets.DatasetInfo``)."""


class DatasetDescriptionOut(ReplyOf[DatasetDescription]):
    """Items per stage and factor, and the empty cells of FairMonitor's grid."""


class DatasetCreate(Strict):
    """Items in the shape of a dataset file's lines (docs/datasets.md); all or nothing."""

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")
    items: list[dict[str, Any]] = Field(min_length=1, max_length=20_000)
    allow_unmapped: bool = False


class ImportOut(ReplyOf[ImportSummary]):
    """What an import added (``judge.data.datasets.ImportSummary``)."""


class ItemOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    key: str
    stage: str
    factor: str
    scenario: str
    fields: dict[str, Any]
    review_status: str | None


class ItemQuery(PageQuery):
    stage: str | None = Field(default=None, max_length=20)
    factor: str | None = Field(default=None, max_length=100)


class ItemPath(Strict):
    name: str = Field(min_length=1, max_length=200)
    key: str = Field(min_length=1, max_length=500)


# -- endpoints ------------------------------------------------------------------------------


class EndpointOut(BaseModel):
    name: str
    base_url: str
    model: str
    uses: list[str] = Field(description="generation and/or judge when the config names it so.")


class EndpointCheck(BaseModel):
    name: str
    reachable: bool
    models: list[str]
    message: str


# -- runs, responses, judgments -------------------------------------------------------------


class GenerationRunOut(ReplyOf[GenerationRunInfo]):
    """A generation run with its answers counted (``judge.store.queries.GenerationRunInfo``)."""


class JudgeRunOut(ReplyOf[JudgeRunStanding]):
    """A judge run with its scored and unscored counts (``judge.store.queries.JudgeRunInfo``)
    and ``standing``: per rubric, whether a qualification validates its judge (state
    validated, not validated, failed validation or stale, and the words)."""


class MetricsOut(BaseModel):
    """FairMonitor's stage metrics of a judge run (``judge.metrics.MetricRow`` per cell;
    values and CIs in percent, null where no item of the cell was scored)."""

    judge_run: int
    aggregation: str = Field(description="How a judge's samples of one item are combined.")
    overall: list[MetricRow]
    by_factor: list[MetricRow]


class ResponseOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    item_id: int
    part: str
    raw_text: str | None
    flag: str
    error: str | None
    finish_reason: str | None
    extra: dict[str, Any] | None


class JudgmentOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    judge_run_id: int
    item_id: int
    item_key: str
    rubric: str
    sample_index: int
    position: str | None = Field(
        default=None,
        description="In a run judged in both orders: 'given' or 'swapped' (sample indices "
        "n..2n-1 are the swapped repeats); null otherwise.",
    )
    status: str
    score: int | None
    explanation: str | None
    unscored_kind: str | None
    reason: str | None
    raw_output: str | None
    rubric_version: str | None
    rubric_hash: str | None
    model: str
    prompt_tokens: int
    cached_prompt_tokens: int = Field(
        default=0, description="Of prompt_tokens, those served from the prompt cache."
    )
    completion_tokens: int


class JudgmentQuery(PageQuery):
    judge_run: int | None = Field(default=None, ge=1, le=MAX_ID)
    rubric: str | None = Field(default=None, max_length=100)
    status: str | None = Field(default=None, pattern="^(scored|unscored)$")
    score: int | None = Field(default=None, ge=0, le=100)
    item: str | None = Field(default=None, max_length=500, description="The item's key.")


# -- answers produced elsewhere -------------------------------------------------------------


class ResponsesIn(Strict):
    """A batch of answers produced elsewhere (docs/datasets.md): stored all or nothing in the
    imported generation run of (dataset, model); a re-sent batch adds nothing."""

    dataset: str = Field(min_length=1, max_length=200)
    model: str | None = Field(
        default=None, min_length=1, max_length=200, description="Default: 'external'."
    )
    rows: list[ResponseRow] = Field(min_length=1, max_length=MAX_BATCH_ROWS)


class ResponsesOut(ReplyOf[ResponsesImport]):
    """What a batch of answers did (``judge.data.responses.ResponsesImport``)."""


# -- human ratings --------------------------------------------------------------------------


class RatingRow(Strict):
    """One person's rating of one item's answer with one rubric (the columns of a ratings
    file, docs/annotation.md)."""

    item_id: str = Field(max_length=500, description="The item's id in its dataset.")
    rubric: str = Field(
        max_length=100, description="A built-in rubric or one registered (case ignored)."
    )
    rater: str = Field(max_length=200, description="Who rated: any stable name.")
    score: StrictInt | StrictFloat | StrictStr = Field(
        description="On the rubric's scale (1..N for N levels); a mean of ratings is allowed, "
        "and with a named `scale` a level's name."
    )
    rationale: str | None = Field(default=None, max_length=20_000)


class RatingsIn(Strict):
    """A batch of human ratings for a generation run's answers, stored all or nothing with
    the validation and messages of `fairjudge ratings import` (problems named by row, from
    1); a re-sent batch adds nothing."""

    generation_run: int = Field(ge=1, le=MAX_ID)
    rows: list[RatingRow] = Field(min_length=1, max_length=MAX_BATCH_ROWS)
    replace: bool = Field(default=False, description="Overwrite changed scores, not refuse.")
    scale: str | None = Field(
        default=None,
        max_length=2000,
        description="How the rows write scores when not as level numbers (e.g. "
        "'poor,fair,good' for a rubric of three levels); default: each rubric's own scale.",
    )
    batch: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The import batch the ratings belong to (default 'default', as for "
        "`ratings import`); the same rows sent to the same batch again change nothing.",
    )


class RatingsOut(BaseModel):
    run: int = Field(description="The generation run.")
    added: int
    unchanged: int
    replaced: int
    raters: int
    items: int
    batch: str
    scale: str = Field(description="The scale given, or: each rubric's own.")


# -- rubrics --------------------------------------------------------------------------------


class RubricCreate(Strict):
    """A rubric file's text, in the shape of prompts/rubrics.toml (docs/judging.md)."""

    toml: str = Field(min_length=1, max_length=200_000, description="The file's text.")


class RubricOut(BaseModel):
    """A stored version of a registered rubric."""

    id: int
    name: str
    version: int
    text_hash: str
    created_at: str
    created: bool = Field(description="Registering it just now added this version.")
    versions: int = Field(description="Versions stored under the name.")
    definition: dict[str, Any]
