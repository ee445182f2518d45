"""Audit suites: runs, their answers, analyses of one's own data, and the follow-ups' classes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from server.schemas.base import SOME_TEXT, PageQuery, Strict
from server.usecases.audit_requests import AuditRequest, BbqCategory
from server.usecases.request_base import MAX_ID

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
    suite: str | None = Field(default=None, pattern="^(award|names|bbi|bbq)$")


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


# -- BBQ predictions made elsewhere ---------------------------------------------------------


class BbqAnalysisIn(Strict):
    """BBQ items with a prediction each, as the JSON-lines text `fairjudge audit bbq analyze
    --from-file` reads (one item a line, as the BBQ authors publish them; docs/audits.md),
    scored without calling a model. The whole request is at most the server's
    ``[server] max_body_mb`` (16 MiB by default: the 11,956 items of six categories with
    the authors' UnifiedQA predictions are 13.5 MB as a JSON string); larger: a 413."""

    jsonl: str = Field(min_length=1, description="The items, one JSON object a line.")
    predictions: str = Field(
        default="race",
        min_length=1,
        max_length=200,
        description="The field holding each prediction: race, arc or qonly for the authors' "
        "UnifiedQA-11B fields, else the field's own name.",
    )
    categories: list[BbqCategory] | None = Field(
        default=None, min_length=1, max_length=11, description="Only these categories."
    )
    resamples: int = Field(
        default=2000, ge=100, le=20_000, description="Bootstrap resamples of the templates."
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Bootstrap seed.")


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BbqEstimateOut(_Reply):
    """A figure with its percentile bootstrap interval over templates (null: undefined, e.g.
    no answer that is not unknown; bounds null with fewer than two templates)."""

    value: float | None
    low: float | None
    high: float | None


class BbqGroupOut(_Reply):
    """One category's figures (or all categories'), with the n behind each."""

    items: int = Field(description="Items of the group, read or not.")
    clusters: int = Field(description="Templates (category and question_index) resampled.")
    answered_ambig: int = Field(description="Ambiguous items with a prediction read.")
    answered_disambig: int = Field(description="Disambiguated items with a prediction read.")
    non_unknown_ambig: int = Field(description="n of s_AMB's raw score: not unknown, a target.")
    non_unknown_disambig: int = Field(description="n of s_DIS: not unknown, with a target.")
    accuracy_ambig: BbqEstimateOut
    accuracy_disambig: BbqEstimateOut
    s_dis: BbqEstimateOut = Field(description="Bias score in disambiguated contexts, -1 to 1.")
    s_amb: BbqEstimateOut = Field(
        description="Bias score in ambiguous contexts: (1 - accuracy there) x the raw score."
    )
    no_single_target: int = Field(description="Items whose target is no option or both.")
    unread: int = Field(description="Predictions that name no option.")


class BbqIntervalOut(_Reply):
    method: str
    resamples: int
    confidence: float


class BbqSourceOut(_Reply):
    path: str = Field(description="Always 'the jsonl text' here.")
    predictions: str
    categories: list[str]


class BbqApartOut(_Reply):
    n: int = Field(description="Items with no single bias target: in accuracy, in no bias score.")
    items: list[str] = Field(description="Each as 'body.jsonl:LINE CATEGORY.EXAMPLE_ID'.")


class BbqUnreadExampleOut(_Reply):
    item: str
    why: str


class BbqUnreadOut(_Reply):
    by_reason: dict[str, int] = Field(description="Predictions naming no option, by reason.")
    examples: list[BbqUnreadExampleOut] = Field(description="Up to 20 of them.")


class BbqAnalysisOut(_Reply):
    """BBQ's figures (Parrish et al. 2022) for the predictions sent: what `fairjudge audit
    bbq analyze --json` prints, with ``suite`` and ``note``."""

    suite: Literal["bbq"]
    source: BbqSourceOut
    interval: BbqIntervalOut
    overall: BbqGroupOut
    by_category: dict[str, BbqGroupOut]
    no_single_target: BbqApartOut
    unread: BbqUnreadOut
    note: str | None = Field(description="How many predictions named no option, if any.")
