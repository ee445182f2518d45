"""The API's request and response models (pydantic). flask-openapi3 validates requests
against them and builds the OpenAPI document from them, so the document cannot drift from
what the server accepts. Every request model forbids unknown fields: a misspelt option is
an error, not silently ignored."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

from judge.data.responses import MAX_BATCH_ROWS, ResponseRow
from server.jobs.tasks import TASKS, AuditParams

MAX_ID = 2**63 - 1
"""The largest id a database row can have (a signed 64-bit integer)."""
MAX_PAGE = 500
"""The most rows one page of a list endpoint returns."""

T = TypeVar("T")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    status: int
    message: str = Field(description="What went wrong and what to do about it.")
    problems: list[str] | None = Field(
        default=None, description="Each bad field or row with its reason, when there are several."
    )


class ErrorOut(BaseModel):
    """The one shape of every error the API returns."""

    error: ErrorBody


class PageQuery(Strict):
    limit: int = Field(default=50, ge=1, le=MAX_PAGE, description=f"Rows per page (1-{MAX_PAGE}).")
    offset: int = Field(default=0, ge=0, le=MAX_ID, description="Rows to skip.")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int = Field(description="Rows matching, over all pages.")
    limit: int
    offset: int


class RunPath(Strict):
    run_id: int = Field(ge=1, le=MAX_ID)


class JobPath(Strict):
    job_id: int = Field(ge=1, le=MAX_ID)


class NamePath(Strict):
    name: str = Field(min_length=1, max_length=200)


# -- health, keys ---------------------------------------------------------------------------


class HealthOut(BaseModel):
    status: str
    schema_revision: str | None = None


class KeyCreate(Strict):
    name: str = Field(min_length=1, max_length=100)
    role: str = Field(default="member", pattern="^(admin|member)$")


class KeyOut(BaseModel):
    id: int
    name: str
    role: str
    prefix: str = Field(description="The key's first characters, to tell keys apart.")
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(BaseModel):
    name: str
    role: str
    key: str = Field(description="The key itself: shown this once, only its hash is stored.")


# -- jobs -----------------------------------------------------------------------------------


JOB_KINDS = f"^({'|'.join(TASKS)})$"
"""Every kind of job (server/jobs/tasks.py)."""


class JobCreate(Strict):
    kind: str = Field(
        pattern=JOB_KINDS, description="judge, generate, pull, audit or audit-classify"
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="judge: generation_run_id, endpoint, prompt_variant, temperature, samples, "
        "rubric_set, swap_order; generate: dataset, endpoint, temperature, max_tokens, limit, "
        "accepted_only, include_drafts; pull: campaign; audit: suite, options, endpoint, "
        "temperature, max_tokens, limit; audit-classify: run_id, endpoint.",
    )


class JobOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    kind: str
    params: dict[str, Any]
    status: str = Field(description="queued, running, finished, failed or cancelled")
    done: int
    total: int | None
    result: dict[str, Any] | None
    error: str | None
    attempts: int
    cancel_requested: bool
    created_by: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    counts: dict[str, Any] | None = Field(
        default=None,
        description="GET /jobs/ID only: its run's rows so far by status (judgments) or flag "
        "(answers), and their prompt and completion tokens.",
    )


class JobQuery(PageQuery):
    status: str | None = Field(default=None, pattern="^(queued|running|finished|failed|cancelled)$")
    kind: str | None = Field(default=None, pattern=JOB_KINDS)


# -- datasets, items ------------------------------------------------------------------------


class DatasetOut(BaseModel):
    name: str
    items: int
    created_at: str


class DatasetDescriptionOut(BaseModel):
    name: str
    items: int
    stages: dict[str, int]
    factors: dict[str, int]
    scenarios: int
    empty_cells: list[str]


class DatasetCreate(Strict):
    """Items in the shape of a dataset file's lines (docs/datasets.md); all or nothing."""

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")
    items: list[dict[str, Any]] = Field(min_length=1, max_length=20_000)
    allow_unmapped: bool = False


class ImportOut(BaseModel):
    dataset: str
    added: int
    unchanged: int
    total: int
    warnings: list[str]


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


class GenerationRunOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    dataset: str
    endpoint: str
    base_url: str = ""
    model: str
    temperature: float
    answers: int
    status: str
    source: str
    created_at: str


class JudgeRunOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    generation_run: int
    endpoint: str = ""
    base_url: str = ""
    model: str
    prompt_variant: str
    temperature: float
    samples: int
    scored: int
    unscored: int
    status: str
    rubric_set: str


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
    completion_tokens: int


class JudgmentQuery(PageQuery):
    judge_run: int | None = Field(default=None, ge=1, le=MAX_ID)
    rubric: str | None = Field(default=None, max_length=100)
    status: str | None = Field(default=None, pattern="^(scored|unscored)$")
    score: int | None = Field(default=None, ge=0, le=100)
    item: str | None = Field(default=None, max_length=500, description="The item's key.")


class RatingScopeQuery(Strict):
    """Which human ratings agreement uses (docs/annotation.md, "Ratings belong to their
    campaign")."""

    campaign: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="A campaign's name, or import:BATCH, whose ratings count (repeat the "
        "parameter for several); without it every campaign and import batch of the run counts, "
        "the newest winning per rater, item and rubric.",
    )


class CsvQuery(RatingScopeQuery):
    table: str | None = Field(
        default=None, max_length=100, description="Which CSV of the report (default: the first)."
    )


# -- campaigns ------------------------------------------------------------------------------


class CampaignCreate(Strict):
    """Sample a judge run's answers into a Label Studio project (docs/annotation.md)."""

    judge_run: int = Field(ge=1, le=MAX_ID)
    rubrics: list[str] = Field(default_factory=list, description="Default: all of the run's.")
    size: int | float | None = Field(
        default=None, gt=0, description="A count (a whole number) or a fraction of the run (<= 1)."
    )
    annotators: int = Field(default=3, ge=1, le=100)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    strategy: str = Field(default="random", pattern="^(random|stratified|disagreement)$")
    target_half_width: float | None = Field(default=None, gt=0, le=1)
    pilot: str | None = Field(default=None, max_length=200)
    name: str | None = Field(default=None, min_length=1, max_length=200)


# -- answers produced elsewhere -------------------------------------------------------------


class ResponsesIn(Strict):
    """A batch of answers produced elsewhere (docs/datasets.md): stored all or nothing in the
    imported generation run of (dataset, model); a re-sent batch adds nothing."""

    dataset: str = Field(min_length=1, max_length=200)
    model: str | None = Field(
        default=None, min_length=1, max_length=200, description="Default: 'external'."
    )
    rows: list[ResponseRow] = Field(min_length=1, max_length=MAX_BATCH_ROWS)


class ResponsesOut(BaseModel):
    generation_run_id: int
    added: int
    unchanged: int
    items: int
    created_run: bool
    dataset: str
    model: str


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


# -- audits ---------------------------------------------------------------------------------


class AuditCreate(AuditParams):
    """An audit suite to send to the model under test, run as a job (docs/audits.md). The
    suites' bundled designs only: options naming input files are the CLI's."""


class AuditClassify(Strict):
    """Which judge classifies the follow-up explanations (an empty or absent body: the
    [judge] endpoint)."""

    endpoint: str | None = Field(
        default=None, min_length=1, max_length=200, description="Default: [judge] endpoint."
    )

    @model_validator(mode="before")
    @classmethod
    def _no_body(cls, value: Any) -> Any:
        return {} if value is None else value


class AuditRunQuery(PageQuery):
    suite: str | None = Field(default=None, pattern="^(award|names|bbi)$")


class AuditRunOut(BaseModel):
    id: int
    suite: str
    endpoint: str
    model: str
    temperature: float
    max_tokens: int
    params: dict[str, Any] = Field(description="The design's settings, input files' hashes.")
    status: str = Field(description="running, finished or incomplete")
    status_detail: str | None
    created_at: str | None
    finished_at: str | None
    answers: int = Field(description="Answers stored, both turns, every status.")


class FollowupOut(BaseModel):
    """One follow-up explanation to classify; which group the chosen student is in is left
    out, so that it cannot sway the reader."""

    answer_id: int
    level: int
    winner: str = Field(description="The student the model chose.")
    other: str
    explanation: str | None
    label: str = Field(description="Always empty here: the class to give.")


class AuditLabelIn(Strict):
    answer_id: int = Field(ge=1, le=MAX_ID, description="A follow-up's answer_id.")
    label: str = Field(
        min_length=1, max_length=50, description="indecisive, justified or irrational"
    )


class AuditLabelsIn(Strict):
    """One person's classes for an award run's follow-up explanations: stored all or
    nothing; a class given again replaces that person's earlier one."""

    annotator: str = Field(
        min_length=1, max_length=200, pattern=r"\S", description="Who classified them."
    )
    labels: list[AuditLabelIn] = Field(min_length=1, max_length=20_000)


class AuditLabelsOut(BaseModel):
    added: int
    changed: int
    unchanged: int
