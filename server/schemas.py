"""The API's request and response models (pydantic). flask-openapi3 validates requests
against them and builds the OpenAPI document from them, so the document cannot drift from
what the server accepts. Every request model forbids unknown fields: a misspelt option is
an error, not silently ignored.

Every JSON response has a model here too. Where the domain already has a read model (a
dataclass such as ``judge.store.queries.JudgeRunInfo``), the response model wraps it
(``RootModel[JudgeRunInfo]``) instead of restating its fields, so the two cannot drift."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from judge.store.queries import GenerationRunInfo
from server.usecases.agreement import GROUP_BY, AgreementOptions, FilesAgreementRequest
from server.usecases.qualify import JudgeRunStanding
from server.usecases.requests import (
    JOB_REQUESTS,
    MAX_ID,
    AuditRequest,
    DiagnosticsRequest,
    NumbersNotBooleans,
)
from server.usecases.shapes import (
    MAX_BATCH_ROWS,
    DatasetDescription,
    DatasetInfo,
    ImportSummary,
    MetricRow,
    ResponseRow,
    ResponsesImport,
)

MAX_PAGE = 500
"""The most rows one page of a list endpoint returns."""

T = TypeVar("T")


SOME_TEXT = r"[^\s\x1c-\x1f\x85\ufeff]"
r"""A pattern for "holds a character other than white space" that Python's and JavaScript's
regular expressions read alike (the document's readers use the latter): each engine's ``\s``
lacks a few characters the other's has (Python's: U+FEFF; JavaScript's: U+001C-U+001F and
U+0085), so the class names them all."""


class Strict(NumbersNotBooleans):
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
    """One page of a list: ``Page[ItemOut]`` is a page of items."""

    items: list[T]
    total: int = Field(description="Rows matching, over all pages.")
    limit: int
    offset: int


class ListOf(RootModel[list[T]], Generic[T]):
    """A whole list (no pages): ``ListOf[DatasetOut]``."""


class RunPath(Strict):
    run_id: int = Field(ge=1, le=MAX_ID)


class JobPath(Strict):
    job_id: int = Field(ge=1, le=MAX_ID)


class NamePath(Strict):
    name: str = Field(min_length=1, max_length=200)


# -- health, keys ---------------------------------------------------------------------------


class WorkerHealthOut(BaseModel):
    healthy: bool
    live: int = Field(description="Job workers whose heartbeat is recent.")
    silent: int = Field(description="Job workers that went quiet without stopping (died).")
    last_beat_at: str | None = Field(description="The newest heartbeat of a running worker.")
    last_beat_age_s: float | None
    waiting_jobs: int = Field(description="Jobs queued or running.")
    reason: str
    queued_jobs: int = Field(default=0, description="Jobs queued.")
    running_jobs: int = Field(default=0, description="Jobs running.")
    oldest_wait_s: float | None = Field(
        default=None,
        description="How long the oldest queued job that never started has waited, in seconds.",
    )
    degraded: bool = Field(
        default=False,
        description="That job has waited more than [server] queue_wait_alert_s: the queue is "
        "not moving.",
    )


class ComputingOut(BaseModel):
    """Figures still being computed, none ever kept for this run with these options (HTTP
    202, with ``Retry-After``): ask the same URL again; it answers with them once they are
    kept."""

    status: str = Field(description="computing")
    page: str = Field(description="What is being computed: report, agreement-json, checks ...")
    judge_run_id: int
    waited_s: float = Field(description="How long this request waited for it, in seconds.")
    retry_after_s: int = Field(description="When to ask again, in seconds.")
    message: str


class StaleOut(BaseModel):
    """Why an answer holds figures kept before the latest writes to the run's rows (HTTP 200
    with ``X-Figures-Stale: true``): they are the latest kept, word for word, while the
    figures as the rows are now are computed; asked again, the route serves those once
    kept."""

    computed_at: str = Field(description="When the figures served were computed (ISO 8601).")
    version: str = Field(description="The digest of the run's rows they were computed at.")
    behind: list[str] | None = Field(
        description="The kinds of rows written since (ratings, judgments, answers, items, "
        "campaigns, judge or generation runs); [] when none (kept too long ago); null when "
        "not known (the figures came from the store, which keeps only the digest)."
    )
    message: str


class HealthOut(BaseModel):
    status: str = Field(
        description="ok; degraded (HTTP 200: a job has waited past [server] "
        "queue_wait_alert_s without starting); or unhealthy (with HTTP 503)"
    )
    schema_revision: str | None = None
    worker: WorkerHealthOut


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


JOB_KINDS = f"^({'|'.join(JOB_REQUESTS)})$"
"""Every kind of job (``server.usecases.requests.JOB_REQUESTS``; server/jobs/tasks.py runs
them)."""


class JobCreate(Strict):
    kind: str = Field(
        pattern=JOB_KINDS,
        description="judge, generate, pull, audit, audit-classify, item-plan, item-generate, "
        "counterfactual or sweep",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="judge: generation_run_id, endpoint, prompt_variant, temperature, samples, "
        "rubric_set, swap_order, max_cost; generate: dataset, endpoint, temperature, max_tokens, "
        "limit, accepted_only, include_drafts, max_cost; pull: campaign; audit: suite, options, "
        "endpoint, temperature, max_tokens, limit, max_cost; audit-classify: run_id, endpoint; "
        "item-plan: endpoint, into, per_cell, stages, factors, scenarios, items_per_call, "
        "temperature, max_tokens; item-generate: endpoint, into, stage, factor, scenario, count "
        "and the same options; counterfactual: judge_run_id, swap, limit, max_cost; sweep: "
        "generation_run_id, temperatures, prompt_variants, samples, endpoint. max_cost: stop "
        "before spending more at the endpoint's prices (refused without them).",
    )
    confirm: StrictBool = Field(
        default=False,
        description="Queue the job even if its dry run is over the server's confirm_calls or "
        "confirm_cost: a member key needs it for such a job (the 403 says the figure), an "
        "admin key does not. POST /jobs/dry-run gives the figure first.",
    )


class DryRunOut(BaseModel):
    """What a job would send and cost (``kind``: judge, generate, audit, audit-classify,
    counterfactual, item-plan or item-generate): the calls to send and those the cache
    answers, and an ``estimate`` of tokens and cost at the endpoint's prices, live
    (``cost_min``, ``cost_typical``, ``cost_max``) and at the batch price (the same with
    ``_batch``), null where the endpoint has no prices; ``prompt_rule`` and
    ``completion_rule`` say whether the tokens were measured or assumed. An award audit with
    follow-ups adds ``followup_estimate``. The other fields are those of the CLI's
    ``--dry-run --json``."""

    model_config = ConfigDict(extra="allow")
    kind: str
    calls_to_send: int | None = Field(
        default=None, description="Calls the job would send (the cache answers the others)."
    )
    estimate: dict[str, Any] | None = None


class JobPartOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    number: int
    items: int = Field(description="Items in the part.")
    status: str = Field(description="queued, running, done or failed")
    worker: str | None
    done: int
    total: int | None
    attempts: int
    error: str | None


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
    worker: str | None = Field(default=None, description="host:pid of the worker on it.")
    created_by: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    parts: list[JobPartOut] | None = Field(
        default=None,
        description="GET /jobs/ID only: the parts Celery workers split a judge or generation "
        "job into (docs/scaling.md); empty for a job run whole.",
    )
    counts: dict[str, Any] | None = Field(
        default=None,
        description="GET /jobs/ID only: its run's rows so far by status (judgments) or flag "
        "(answers), their prompt and completion tokens, and ``cost``: what they cost at the "
        "run's endpoint's prices, live (``cost``) and at the batch price (``cost_batch``), "
        "null with a ``note`` when the endpoint has no prices.",
    )


class JobQuery(PageQuery):
    status: str | None = Field(default=None, pattern="^(queued|running|finished|failed|cancelled)$")
    kind: str | None = Field(default=None, pattern=JOB_KINDS)


# -- datasets, items ------------------------------------------------------------------------


class DatasetOut(RootModel[DatasetInfo]):
    """A dataset and its item count (``judge.data.datasets.DatasetInfo``)."""


class DatasetDescriptionOut(RootModel[DatasetDescription]):
    """Items per stage and factor, and the empty cells of FairMonitor's grid."""


class DatasetCreate(Strict):
    """Items in the shape of a dataset file's lines (docs/datasets.md); all or nothing."""

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")
    items: list[dict[str, Any]] = Field(min_length=1, max_length=20_000)
    allow_unmapped: bool = False


class ImportOut(RootModel[ImportSummary]):
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


class GenerationRunOut(RootModel[GenerationRunInfo]):
    """A generation run with its answers counted (``judge.store.queries.GenerationRunInfo``)."""


class JudgeRunOut(RootModel[JudgeRunStanding]):
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


class AgreementQuery(RatingScopeQuery, AgreementOptions):
    """Which ratings agreement uses, and how its coefficients are computed (the options of
    ``fairjudge agreement``, with its defaults)."""

    group_by: str | None = GROUP_BY


class ReportQuery(RatingScopeQuery):
    """A judge run's report: whose ratings, and whether to refuse an unqualified judge."""

    require_qualified: bool = Field(
        default=False,
        description="Answer 409, naming the rubric and why, unless the judge is validated "
        "for every rubric the report uses (`fairjudge judge-audit qualify`).",
    )


class CsvQuery(RatingScopeQuery):
    table: str | None = Field(
        default=None, max_length=100, description="Which CSV of the report (default: the first)."
    )


class ReportCsvQuery(ReportQuery, CsvQuery):
    """One CSV of a judge run's report, refused (409) with ``require_qualified`` as the
    report is."""


class FilesAgreementIn(FilesAgreementRequest):
    """``fairjudge agreement compute``'s files and options."""


class FilesAgreementOut(RootModel[dict[str, Any]]):
    """What ``fairjudge agreement compute --json`` prints: ``n_items``, ``human_vs_human``
    (each coefficient's value, CI, p-value and n, null when undefined), ``settings``, and
    with a judge file ``judge_vs_human`` and how the two files' items paired."""


class TableQuery(Strict):
    table: str | None = Field(
        default=None, max_length=100, description="Which CSV of the report (default: the first)."
    )


class DiagnosticsQuery(DiagnosticsRequest):
    """``fairjudge judge-audit show``'s options (the use case's request, as a query)."""

    require_qualified: bool = Field(
        default=False,
        description="Answer 409, naming the rubric and why, unless the judge is validated "
        "for every rubric it scored (`fairjudge judge-audit qualify`).",
    )


class DiagnosticsCsvQuery(DiagnosticsQuery, TableQuery):
    pass


class CompareQuery(Strict):
    judge_run: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(
        min_length=2,
        max_length=20,
        description="A judge run to compare (repeat the parameter: at least two).",
    )


class CompareCsvQuery(CompareQuery, TableQuery):
    pass


class ReportOut(RootModel[dict[str, Any]]):
    """A report's data, what report.json holds: each section's payload under its key (e.g.
    ``metrics_overall``, ``agreement``, ``diagnostics``); figures that are not numbers are
    null. A judge run's report or diagnostics served from before the latest writes to its
    rows also holds ``stale`` (``StaleOut``)."""


class AgreementFlagOut(BaseModel):
    """A warning that an agreement figure flatters the judge (``judge.stats.baseline``)."""

    code: Literal["kappa_covers_zero", "no_better_than_majority"] = Field(
        description="Stable: kappa_covers_zero (kappa's interval reaches 0) or "
        "no_better_than_majority (exact agreement does not exceed always answering the "
        "humans' most frequent category)."
    )
    message: str = Field(description="The same in words, with the figures.")


class JudgeAgreementOut(BaseModel):
    """One judge run against the humans on one rubric; a judge that scored none of the
    rated items has ``reading`` and no coefficients."""

    model_config = ConfigDict(extra="allow")
    judge_run: int
    label: str
    prompt_variant: str
    temperature: float
    n: int
    judge_unscored_on_rated_items: int
    judge_checks_flagged: list[str]
    reading: str
    coefficients: dict[str, dict[str, Any]] | None = Field(
        default=None,
        description="Per coefficient: value, ci_low, ci_high, p_value, n and "
        "undefined_reason (numbers, null when undefined). Beside kappa: ac1 (Gwet), "
        "ac2_linear, ac2_quadratic, majority_baseline (exact agreement of always answering "
        "the humans' most frequent category) and majority_baseline_ac1.",
    )
    majority_category: int | None = Field(
        default=None, description="The humans' most frequent category (the lowest on a tie)."
    )
    flags: list[AgreementFlagOut] | None = Field(
        default=None,
        description="When the agreement flatters the judge; empty when it does not, absent "
        "without coefficients.",
    )


class RubricAgreementOut(BaseModel):
    n_rated_items: int
    n_raters: int
    n_ratings: int
    scale: str
    human_vs_human: dict[str, Any] = Field(
        description="The humans among themselves: Krippendorff's alphas, Fleiss' kappa, "
        "pairwise kappa (the ceiling)."
    )
    judges: list[JudgeAgreementOut]


class AgreementOut(BaseModel):
    """Judge-human and human-human agreement (``server.usecases.agreement``): the same shape
    as ``fairjudge agreement --json``."""

    judge_run: int | None = Field(description="The judge run asked about; null: all of them.")
    generation_run: int
    ratings_used: dict[str, Any] = Field(
        description="The campaigns and import batches whose ratings were used."
    )
    weighted_absent: str = Field(description="Why there is no whole-run estimate, or empty.")
    human_score: str
    n_bootstrap: int
    seed: int | None
    target_half_width: float
    scale: str
    rubrics: dict[str, RubricAgreementOut]
    stale: StaleOut | None = Field(
        default=None,
        description="Present when the answer was computed before the latest writes to the "
        "run's rows (served while it is computed again).",
    )


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


# -- answers produced elsewhere -------------------------------------------------------------


class ResponsesIn(Strict):
    """A batch of answers produced elsewhere (docs/datasets.md): stored all or nothing in the
    imported generation run of (dataset, model); a re-sent batch adds nothing."""

    dataset: str = Field(min_length=1, max_length=200)
    model: str | None = Field(
        default=None, min_length=1, max_length=200, description="Default: 'external'."
    )
    rows: list[ResponseRow] = Field(min_length=1, max_length=MAX_BATCH_ROWS)


class ResponsesOut(RootModel[ResponsesImport]):
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


# -- audits ---------------------------------------------------------------------------------


class AnalysisPath(Strict):
    suite: Literal["award", "names", "bbi"]


class AnalysisIn(Strict):
    """A suite's answers (or labels) of one's own, as CSV text in the columns its `fairjudge
    audit SUITE analyze --from-csv` reads (docs/audits.md)."""

    csv: str = Field(min_length=1, description="The CSV text, header first.")


class AnalysisOut(RootModel[dict[str, Any]]):
    """What `fairjudge audit SUITE analyze --json` prints, with ``suite`` and ``note`` (why a
    test is missing, say); numbers that are not finite are null."""


class FollowupCampaignIn(Strict):
    annotators: int = Field(
        default=2, ge=1, le=100, description="People each follow-up is asked of."
    )
    title: str | None = Field(default=None, min_length=1, max_length=200)
    project: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ID,
        description="Add only the missing follow-ups to this existing project instead.",
    )


class FollowupCampaignOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    run_id: int
    project: int = Field(description="The Label Studio project (the pull needs it).")
    created: bool
    imported: int
    already_there: int
    tasks: int
    url: str


class FollowupPullIn(Strict):
    project: int = Field(ge=1, le=MAX_ID, description="The project the campaign created.")


class FollowupPullOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    run_id: int
    project: int
    added: int
    changed: int
    unchanged: int
    skipped: int


class AuditCreate(AuditRequest):
    """An audit suite to send to the model under test, run as a job (docs/audits.md): the
    ``server.usecases.audits`` request the CLI's ``audit SUITE run`` builds too. The
    suites' bundled designs only: options naming input files are the CLI's."""

    @field_validator("options")
    @classmethod
    def _suite_options(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        # Which options are valid depends on ``suite``, which the document's schema for this
        # body cannot say; they are checked when the job is queued, a 400 naming each one.
        return value

    confirm: StrictBool = Field(
        default=False,
        description="Queue the audit even if its dry run is over the server's confirm_calls or "
        "confirm_cost: a member key needs it for such an audit (the 403 says the figure), an "
        "admin key does not.",
    )


class AuditClassify(Strict):
    """Which judge classifies the follow-up explanations (an empty or absent body: the
    [judge] endpoint)."""

    endpoint: str | None = Field(
        default=None, min_length=1, max_length=200, description="Default: [judge] endpoint."
    )
    confirm: StrictBool = Field(
        default=False,
        description="Queue the job even if its dry run is over the server's confirm_calls or "
        "confirm_cost (one call per explanation): a member key needs it for such a job, an "
        "admin key does not.",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_body(cls, value: Any) -> Any:
        return {} if value is None else value


class AuditRunQuery(PageQuery):
    suite: str | None = Field(default=None, pattern="^(award|names|bbi)$")


class AuditRunInfoOut(BaseModel):
    id: int
    suite: str
    endpoint: str
    model: str
    temperature: float
    max_tokens: int
    params: dict[str, Any] = Field(description="The design's settings, input files' hashes.")
    status: str = Field(description="running, finished, incomplete or unusable")
    status_detail: str | None
    created_at: str | None
    finished_at: str | None


class AuditRunOut(AuditRunInfoOut):
    answers: int = Field(description="Answers stored, both turns, every status.")


class AuditResultOut(BaseModel):
    """One audit run read back (``server.usecases.audits.AuditResult``)."""

    run: AuditRunInfoOut
    cost: dict[str, Any] | None = Field(
        default=None,
        description="The answers' tokens and their cost at the endpoint's prices, live "
        "(cost) and at the batch price (cost_batch); null costs with a note when the "
        "endpoint has no prices.",
    )
    answers: dict[str, dict[str, int]] = Field(description="Answers by turn and status.")
    analysis: dict[str, Any] | None = Field(description="The suite's figures, when it has any.")
    analysis_error: str | None = Field(description="Why there are no figures yet.")
    followup: dict[str, Any] = Field(
        description="Award runs: the follow-up classes, their tests and agreement."
    )
    unread_examples: list[dict[str, Any]] = Field(
        description="Up to 20 answers that gave no reading, verbatim."
    )


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
        min_length=1, max_length=200, pattern=SOME_TEXT, description="Who classified them."
    )
    labels: list[AuditLabelIn] = Field(min_length=1, max_length=20_000)


class AuditLabelsOut(BaseModel):
    added: int
    changed: int
    unchanged: int
