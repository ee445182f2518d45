"""SQLModel tables: every stored row a report number can be traced back to.

Flow: Dataset -> Item -> GenerationRun -> Response -> JudgeRun -> Judgment; HumanRating holds
what annotators said about the same responses; CallCache holds every paid model call;
RunLease says which process is working on a run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


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


class GenerationRun(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", index=True)
    endpoint_name: str
    base_url: str
    model: str
    temperature: float
    max_tokens: int
    template_version: str
    status: str = Field(default="running", description="running, finished or incomplete")
    status_detail: str | None = Field(
        default=None,
        sa_column=Column(Text),
        description="For an incomplete run: how many answers are missing and why.",
    )
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


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


class JudgeRun(SQLModel, table=True):
    """One judge configuration applied to one generation run."""

    __table_args__ = (UniqueConstraint("generation_run_id", "config_hash"),)
    id: int | None = Field(default=None, primary_key=True)
    generation_run_id: int = Field(foreign_key="generationrun.id", index=True)
    endpoint_name: str
    base_url: str
    model: str
    prompt_variant: str
    temperature: float
    samples: int
    aggregation: str
    max_tokens: int
    config_hash: str
    status: str = Field(default="running", description="running, finished or incomplete")
    status_detail: str | None = Field(
        default=None,
        sa_column=Column(Text),
        description="For an incomplete run: how many judgments are missing and why.",
    )
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


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
    model: str
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    calls: int = Field(default=1, description="Model calls made: 1, or 2 after a repair.")
    cache_key: str
    created_at: datetime = Field(default_factory=utcnow)


class HumanRating(SQLModel, table=True):
    """A human's score for one response (item x rubric) of a generation run."""

    __table_args__ = (UniqueConstraint("generation_run_id", "item_id", "rubric", "rater"),)
    id: int | None = Field(default=None, primary_key=True)
    generation_run_id: int = Field(foreign_key="generationrun.id", index=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    rubric: str
    rater: str
    score: float
    rationale: str | None = Field(default=None, sa_column=Column(Text))
    source: str = "import"
    created_at: datetime = Field(default_factory=utcnow)


class RunLease(SQLModel, table=True):
    """The process working on one run; a second process refuses the run while it is held.

    ``expires_at`` (seconds since the epoch) is pushed forward by the holder's heartbeat, so
    the lease of a killed process lapses (see ``judge.runs.run_lease``).
    """

    kind: str = Field(primary_key=True, description="'generation' or 'judge'.")
    run_id: int = Field(primary_key=True)
    pid: int
    host: str
    token: str = Field(description="Unique per holder, so only the holder renews or frees it.")
    expires_at: float
