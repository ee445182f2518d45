"""SQLModel tables: every stored row a report number can be traced back to.

Flow: Dataset -> Item -> GenerationRun -> Response -> JudgeRun -> Judgment; HumanRating holds
what annotators said about the same responses (RatingChange keeps the values an edit or a
withdrawal replaced); Campaign and CampaignTask record which items went to Label Studio and
with what inclusion probability; Annotator lists the people; CallCache holds every paid model
call; RunLease says which process is working on a run. RubricRecord holds the rubrics users
registered.
AuditRun -> AuditAnswer -> AuditLabel hold the audit suites' runs, the model's answers with
what was read from them, and the classes judges and people gave to follow-up explanations.
ItemGenerationCall records each call that asked a model for new items of a dataset.
BatchJob records each batch of a run's calls sent through a provider's Batch API.
JudgeQualification records whether a judge configuration was validated against people, per rubric.
GenerationRun, JudgeRun and AuditRun share their common columns through RunBase (not a table);
their ``status`` holds a ``judge.vocab.RunStatus`` value as plain text.

These are the domain's tables only. The server's own (API keys, sign-ins, workers' heartbeats,
jobs and their parts, kept dashboard figures) are in ``server/tables.py``, on the same
``SQLModel.metadata`` and in the same migrations (``judge/store/migrations``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, Column, Text, UniqueConstraint, event
from sqlmodel import Field, SQLModel

from judge.vocab import RunStatus


def utcnow() -> datetime:
    return datetime.now(UTC)


class Dataset(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    description: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class Item(SQLModel, table=True):
    """One test item; ``fields`` holds the stage-specific texts (see docs/datasets.md)."""

    __table_args__ = (UniqueConstraint("dataset_id", "key"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", index=True)
    key: str = Field(description="The item's id in the dataset file.")
    stage: str
    factor: str
    scenario: str
    fields: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    content_hash: str
    review_status: str | None = Field(
        default=None,
        description="An expert review's decision: accepted, edited or rejected (None: never "
        "reviewed). An edited item keeps its original fields; the edit is in ``review``.",
    )
    review: dict[str, Any] | None = Field(
        default=None,
        sa_column=Column(JSON),
        description="The latest review: decision, reason, reviewer, edits {field: text}, "
        "campaign, time.",
    )
    provenance: dict[str, Any] | None = Field(
        default=None,
        sa_column=Column(JSON),
        description="Where a generated item came from (None: written by hand or imported "
        "without one): source, endpoint, base_url, model, prompt version and hash, "
        "parameters, the call's cache key, the request (stage, factor, scenario, asked), "
        "attempt, position in the reply, time (see judge.authoring.replies).",
    )


class ItemGenerationCall(SQLModel, table=True):
    """One call that asked an endpoint for test items of one cell (stage x factor x
    scenario) of a dataset, with everything read from its reply: the items it added, the ones
    rejected (reason and raw text) and the near-duplicates skipped. ``attempt`` numbers a
    cell's calls and is the call's seed; a rerun skips the attempts stored here and retries
    failed ones (see judge.authoring.cells)."""

    __table_args__ = (UniqueConstraint("dataset_id", "stage", "factor", "scenario", "attempt"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", index=True)
    stage: str
    factor: str
    scenario: str
    attempt: int
    asked: int = Field(description="Items the call asked for.")
    endpoint_name: str
    base_url: str
    model: str
    prompt_version: str
    prompt_hash: str
    params: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=Column(JSON),
        description="temperature, max_tokens, seed, items_per_call.",
    )
    cache_key: str
    cached: bool = Field(default=False, description="The reply came from the call cache.")
    status: str = Field(
        description="ok (a JSON object with an items list), unreadable (no such object: "
        "prose, half a JSON object, an empty reply) or failed (no reply)."
    )
    raw_text: str | None = Field(default=None, sa_column=Column(Text))
    finish_reason: str | None = None
    error: str | None = Field(default=None, sa_column=Column(Text))
    problems: list[dict[str, Any]] = Field(
        default_factory=list,
        sa_column=Column(JSON),
        description="Rejections: {index (None: the whole reply), kind, reason, raw}.",
    )
    added: int = Field(default=0, description="Items stored from this reply.")
    added_keys: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    duplicates: list[dict[str, Any]] = Field(
        default_factory=list,
        sa_column=Column(JSON),
        description="Valid items skipped as near-duplicates: {index, of, similarity, "
        "within_batch, raw}.",
    )
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)


class CallCache(SQLModel, table=True):
    """A finished model call, keyed by the hash of (model, messages, parameters, sample)."""

    key: str = Field(primary_key=True)
    model: str
    text: str | None = Field(default=None, sa_column=Column(Text))
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)
    logprobs: list[dict[str, Any]] | None = Field(
        default=None,
        sa_column=Column(JSON),
        description="The reply's token log-probabilities, when the call asked for them: one "
        "{token, logprob, top: [[token, logprob], ...]} per token.",
    )


class RunBase(SQLModel):
    """The columns every kind of run has (generation, judge and audit runs; not a table): the
    endpoint and model it calls with their sampling, and where it stands. ``judge.runs``
    creates, resumes and finishes any of them the same way."""

    run_kind: ClassVar[str]
    """The kind's name in messages and in ``RunLease.kind``: generation, judge or audit."""

    id: int | None = Field(default=None, primary_key=True)
    endpoint_name: str
    base_url: str
    model: str
    temperature: float
    max_tokens: int
    status: str = Field(
        default=RunStatus.RUNNING.value, description="running, finished, incomplete or unusable"
    )
    # sa_type, not sa_column: a Column object belongs to one table, this field to three.
    status_detail: str | None = Field(default=None, sa_type=Text)
    max_cost: float | None = Field(
        default=None,
        description="The most the run may spend in all (--max-cost), kept across reruns: a "
        "rerun without --max-cost keeps it, one with --max-cost replaces it; None: no bound.",
    )
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


class GenerationRun(RunBase, table=True):
    """The model under test's answers to a dataset's items, asked with one endpoint and
    sampling (or imported: ``source``)."""

    run_kind: ClassVar[str] = "generation"
    dataset_id: int = Field(foreign_key="dataset.id", index=True)
    template_version: str
    # The base's column, restated for its own description (so in JudgeRun).
    status_detail: str | None = Field(
        default=None,
        sa_type=Text,
        description="For an incomplete run: how many answers are missing and why.",
    )
    source: str = Field(
        default="generated",
        description="generated (FairJudge asked the model) or imported (answers produced "
        "elsewhere, see judge.data.responses)",
    )
    derived_from: int | None = Field(
        default=None,
        index=True,
        description="The generation run whose answers this run's answers are copies of (a "
        "counterfactual copy with sensitive words swapped); None for a run of its own.",
    )
    derivation: dict[str, Any] | None = Field(
        default=None,
        sa_column=Column(JSON),
        description="How the copy was made: kind, swap kinds, the swap list's sha256, the "
        "items copied and skipped (see judge.grading.counterfactual_runs).",
    )


class Response(SQLModel, table=True):
    """The model under test's answer to one prompt of an item (part 'answer', 'A' or 'B')."""

    __table_args__ = (UniqueConstraint("run_id", "item_id", "part"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="generationrun.id", index=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    part: str
    prompt: str = Field(sa_column=Column(Text))
    raw_text: str | None = Field(default=None, sa_column=Column(Text))
    flag: str = Field(
        description="ok, truncated (stopped at max_tokens, still judged), refusal, empty or error"
    )
    error: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_key: str
    created_at: datetime = Field(default_factory=utcnow)
    extra: dict[str, Any] | None = Field(
        default=None,
        sa_column=Column(JSON),
        description="An imported answer's own metadata, kept as given.",
    )


class JudgeRun(RunBase, table=True):
    """One judge configuration applied to one generation run."""

    __table_args__ = (UniqueConstraint("generation_run_id", "config_hash"),)
    run_kind: ClassVar[str] = "judge"
    generation_run_id: int = Field(foreign_key="generationrun.id", index=True)
    prompt_variant: str
    samples: int
    aggregation: str
    rubric_set: str = Field(
        default="fairmonitor",
        description="The rubrics applied: 'fairmonitor' (the built-in set) or the names of "
        "registered rubrics, comma-separated.",
    )
    config_hash: str
    status_detail: str | None = Field(
        default=None,
        sa_type=Text,
        description="For an incomplete run: how many judgments are missing and why.",
    )
    swap_order: bool = Field(
        default=False,
        description="The pairwise rubrics were judged with their two texts in both orders.",
    )


class Judgment(SQLModel, table=True):
    """One judge sample for one item and rubric: a score, or unscored with the reason."""

    __table_args__ = (UniqueConstraint("judge_run_id", "item_id", "rubric", "sample_index"),)
    id: int | None = Field(default=None, primary_key=True)
    judge_run_id: int = Field(foreign_key="judgerun.id", index=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    rubric: str
    sample_index: int = 0
    status: str = Field(description="scored or unscored")
    score: int | None = None
    explanation: str | None = Field(default=None, sa_column=Column(Text))
    unscored_kind: str | None = Field(
        default=None, description="Why a judgment is unscored, as a kind (UnscoredKind)."
    )
    reason: str | None = Field(default=None, description="Why a judgment is unscored.")
    raw_output: str | None = Field(default=None, sa_column=Column(Text))
    repair_output: str | None = Field(default=None, sa_column=Column(Text))
    template_version: str
    prompt_hash: str
    rubric_version: str | None = Field(default=None, description="The rubric's version.")
    rubric_hash: str | None = Field(
        default=None, description="sha256 of the rubric's definition text as used."
    )
    model: str
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    calls: int = Field(default=1, description="Model calls made: 1, or 2 after a repair.")
    cache_key: str
    created_at: datetime = Field(default_factory=utcnow)
    position: str | None = Field(
        default=None,
        description="In a run judged in both orders: 'given' (the texts in the rubric's "
        "order) or 'swapped'; None for a rubric that compares no pair.",
    )
    score_probs: dict[str, float] | None = Field(
        default=None,
        sa_column=Column(JSON),
        description="With --aggregation logprob: the probability of each score level, "
        "read from the score token's log-probabilities.",
    )
    expected_score: float | None = Field(
        default=None, description="With --aggregation logprob: sum of p(level) x level."
    )


class HumanRating(SQLModel, table=True):
    """A human's score for one response (item x rubric) of a generation run.

    Ratings pulled from Label Studio carry their campaign and annotation id; an annotation
    edited there updates the row (the old value goes to RatingChange) and one deleted there
    sets ``withdrawn_at`` instead of deleting the row. Withdrawn ratings are not used.

    A rating belongs to its ``scope``: ``campaign:<id>`` for one pulled from a campaign,
    ``import:<batch>`` for one imported from a CSV file. Two campaigns (or a campaign and an
    import) over the same answers keep separate rows, so pulling one never touches the
    other's ratings or history; ``judge.store.rating_scope`` decides which count when several
    scopes rated the same item.
    """

    __table_args__ = (
        UniqueConstraint(
            "generation_run_id", "item_id", "rubric", "rater", "scope", name="uq_humanrating_scope"
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    generation_run_id: int = Field(foreign_key="generationrun.id", index=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    rubric: str
    rater: str
    score: float
    rationale: str | None = Field(default=None, sa_column=Column(Text))
    source: str = Field(default="import", description="import (a CSV file) or labelstudio")
    scope: str = Field(
        default="",
        description="campaign:<campaign id> or import:<batch name>: the ratings it belongs with.",
    )
    created_at: datetime = Field(default_factory=utcnow)
    campaign_id: int | None = Field(
        default=None, index=True, description="The campaign it was pulled from (a Campaign id)."
    )
    annotation_id: int | None = Field(default=None, description="Label Studio's annotation id.")
    updated_at: datetime | None = None
    lead_time_s: float | None = Field(
        default=None, description="Seconds the annotator spent on the task (Label Studio's)."
    )
    withdrawn_at: datetime | None = Field(
        default=None, description="When the pull found the annotation deleted in Label Studio."
    )


@event.listens_for(HumanRating, "before_insert")
def _default_scope(_mapper: Any, _connection: Any, rating: HumanRating) -> None:
    """A rating stored without a scope gets its campaign's, or the default import batch's (the
    scope revision 0011 gives such rows), so the unique key always tells scopes apart."""
    if not rating.scope:
        rating.scope = (
            f"campaign:{rating.campaign_id}" if rating.campaign_id is not None else "import:default"
        )


class RatingChange(SQLModel, table=True):
    """A value a HumanRating held before an edit or a withdrawal replaced it."""

    id: int | None = Field(default=None, primary_key=True)
    rating_id: int = Field(foreign_key="humanrating.id", index=True)
    change: str = Field(description="edited, withdrawn or restored")
    score: float
    rationale: str | None = Field(default=None, sa_column=Column(Text))
    valid_until: datetime = Field(default_factory=utcnow)


class Campaign(SQLModel, table=True):
    """One Label Studio project: answers of a judge run rated by humans (kind 'rating') or
    dataset items reviewed by experts (kind 'review')."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    kind: str = Field(description="rating or review")
    dataset_id: int = Field(foreign_key="dataset.id", index=True)
    generation_run_id: int | None = Field(default=None, foreign_key="generationrun.id")
    judge_run_id: int | None = Field(default=None, foreign_key="judgerun.id")
    rubrics: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    strategy: str = Field(description="random, stratified, disagreement, or all (review)")
    seed: int = 0
    population: int = Field(description="Items the sample was drawn from.")
    size: int = Field(description="Items sampled.")
    annotators: int = Field(description="Distinct annotators each item needs.")
    design: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=Column(JSON),
        description="Strata (population, drawn), notes, and how the size was chosen.",
    )
    ls_url: str
    ls_project_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    pulled_at: datetime | None = None


class CampaignTask(SQLModel, table=True):
    """One item of a campaign: the Label Studio task that shows it, and the probability with
    which the campaign's design drew it (for weighting agreement back to the whole run)."""

    __table_args__ = (UniqueConstraint("campaign_id", "item_id"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign_id: int = Field(foreign_key="campaign.id", index=True)
    item_id: int = Field(foreign_key="item.id")
    task_key: str = Field(unique=True, description="Our id, carried in the task's data.")
    stratum: str = ""
    inclusion_probability: float = 1.0
    ls_task_id: int | None = None


class Annotator(SQLModel, table=True):
    """A person who rates in Label Studio (identified there by e-mail)."""

    id: int | None = Field(default=None, primary_key=True)
    email: str = Field(index=True, unique=True)
    name: str = ""
    ls_user_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow)


class RunLease(SQLModel, table=True):
    """The process working on one run; a second process refuses the run while it is held.

    ``expires_at`` (seconds since the epoch) is pushed forward by the holder's heartbeat, so
    the lease of a killed process lapses (see ``judge.runs.run_lease``).
    """

    kind: str = Field(
        primary_key=True,
        description="'generation', 'judge', 'audit', 'dataset_generation' (items a model "
        "writes, ``run_id`` the dataset's id), 'job', or 'figures' (a judge run's pages "
        "being computed ahead).",
    )
    run_id: int = Field(primary_key=True)
    pid: int
    host: str
    token: str = Field(description="Unique per holder, so only the holder renews or frees it.")
    expires_at: float


class RubricRecord(SQLModel, table=True):
    """A rubric a user registered (``fairjudge rubrics add``): its definition as parsed and
    the file text it came from. A changed definition under the same name is a new version."""

    __tablename__ = "rubric"
    __table_args__ = (UniqueConstraint("name", "version"),)
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    version: int = 1
    text_hash: str = Field(description="sha256 of the definition (see grading.rubrics).")
    spec: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    source: str = Field(default="", sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)


class BatchJob(SQLModel, table=True):
    """One batch of a run's model calls sent through a provider's Batch API, written down
    before each step so that an interrupted command resumes it and never sends its calls
    twice (``judge.models.batching``): ``state`` goes intent (its calls chosen) -> uploaded
    (``input_file_id``) -> submitted (``batch_id``) -> collected (answers in the call cache,
    failures kept), or abandoned (an intent whose calls were all answered elsewhere)."""

    id: int | None = Field(default=None, primary_key=True)
    run_kind: str = Field(description="'judge', 'generation' or 'audit': the run's kind.")
    run_id: int = Field(index=True)
    purpose: str = Field(
        default="first",
        description="first (the calls), repair (a judge run's repairs) or followup (an "
        "audit's second turn).",
    )
    endpoint_name: str
    base_url: str
    model: str
    state: str = Field(default="intent", index=True)
    input_name: str = Field(
        index=True,
        unique=True,
        description="The name the input file is uploaded under (unique): finds an upload "
        "whose file id was never written down.",
    )
    keys: list[str] = Field(
        default_factory=list,
        sa_column=Column(JSON),
        description="The calls' cache keys, each the custom_id of its line.",
    )
    calls: int = 0
    input_file_id: str | None = None
    batch_id: str | None = Field(default=None, index=True)
    batch_status: str | None = Field(default=None, description="The provider's, last seen.")
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_counts: dict[str, int] | None = Field(default=None, sa_column=Column(JSON))
    answered: int = Field(default=0, description="Calls whose answer reached the call cache.")
    failures: dict[str, str] | None = Field(
        default=None,
        sa_column=Column(JSON),
        description="Call key -> why the batch gave no answer (an error line, an unreadable "
        "or missing line, an expired or failed batch).",
    )
    detail: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)
    uploaded_at: datetime | None = None
    submitted_at: datetime | None = None
    collected_at: datetime | None = None


class AuditRun(RunBase, table=True):
    """One audit suite (award, names, bbi) sent to one model: the design's settings
    (``params``) and the endpoint. Asking for the same settings again resumes the run."""

    run_kind: ClassVar[str] = "audit"
    suite: str = Field(index=True, description="award, names or bbi")
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    config_hash: str = Field(
        index=True, description="sha256 of suite, design settings, prompt version, sampling."
    )


class AuditAnswer(SQLModel, table=True):
    """The model's answer to one audit prompt (``turn`` 'main', or 'followup' for the award
    audit's second question), its raw text, and what was read from it: ``status`` parsed,
    unparsed (``reason`` says why), refusal, empty or error; ``value`` the reading."""

    __table_args__ = (UniqueConstraint("run_id", "key", "turn"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="auditrun.id", index=True)
    key: str = Field(description="The prompt's id in the design, stable across reruns.")
    turn: str = "main"
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    prompt: str = Field(sa_column=Column(Text))
    raw_text: str | None = Field(default=None, sa_column=Column(Text))
    status: str
    value: Any = Field(default=None, sa_column=Column(JSON))
    reason: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_key: str
    created_at: datetime = Field(default_factory=utcnow)


class AuditLabel(SQLModel, table=True):
    """A class given to one audit answer by a judge model or a person (the award audit's
    follow-up explanations: indecisive, justified or irrational). ``label`` is None when the
    judge's reply could not be read (``status`` unparsed or error, ``raw_text`` kept)."""

    __table_args__ = (UniqueConstraint("answer_id", "source"),)
    id: int | None = Field(default=None, primary_key=True)
    answer_id: int = Field(foreign_key="auditanswer.id", index=True)
    run_id: int = Field(foreign_key="auditrun.id", index=True)
    source: str = Field(description="'judge:<endpoint>/<model>' or 'human:<annotator>'.")
    status: str = Field(description="labelled, unparsed or error")
    label: str | None = None
    explanation: str | None = Field(default=None, sa_column=Column(Text))
    raw_text: str | None = Field(default=None, sa_column=Column(Text))
    cache_key: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class JudgeQualification(SQLModel, table=True):
    """One qualification of a judge configuration for one rubric against human ratings
    (``fairjudge checks qualify``): the configuration it covers (base URL as stored,
    model, prompt variant, template hash, rubric, scale, temperature), the evidence
    (agreement with intervals, baseline, ceiling, alt-test, judge checks), the rule applied
    and its outcome. A judge run whose configuration matches is validated by the newest
    record, unless ratings of the rubric changed after ``ratings_through`` (stale)."""

    id: int | None = Field(default=None, primary_key=True)
    judge_run_id: int = Field(foreign_key="judgerun.id", index=True)
    generation_run_id: int = Field(foreign_key="generationrun.id")
    base_url: str
    model: str = Field(index=True)
    prompt_variant: str
    template_hash: str = Field(
        description="sha256 of the judge templates' version and the rubric's definition hash."
    )
    rubric: str = Field(index=True)
    scale: str = Field(description="The rubric's scale, as '1-5'.")
    temperature: float
    epsilon: float = Field(description="The alt-test's margin.")
    n_ratings: int = Field(description="Rated items the judge scored (the pairs used).")
    n_raters: int
    outcome: str = Field(description="qualified or failed")
    line: str = Field(sa_column=Column(Text, nullable=False))
    rule: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    ratings_through: datetime | None = Field(
        default=None, description="The newest time a rating used was stored or edited."
    )
    created_at: datetime = Field(default_factory=utcnow)
