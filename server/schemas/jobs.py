"""Jobs: what queueing one takes (one body per kind, its parameters generated from the job's
typed request), a dry run's reply, and a job as read back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
)

from server.schemas.base import PageQuery, Strict
from server.usecases.requests import JOB_REQUESTS

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
