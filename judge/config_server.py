"""The [server] and [workers] sections of the config (``judge.config.Settings.server``,
``.workers``): how ``fairjudge serve`` serves the API, dashboard and job worker, and how
jobs spread over Celery workers on other machines."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # as every section of judge.config


class ServerConfig(_Strict):
    """``fairjudge serve``: the web API and dashboard under gunicorn, and its job worker."""

    host: str = Field(
        default="127.0.0.1",
        description="Address to listen on; the default serves this machine only.",
    )
    port: int = Field(default=5000, ge=1, le=65535, description="Port to listen on.")
    workers: int = Field(default=2, ge=1, le=64, description="gunicorn worker processes.")
    threads: int = Field(
        default=8, ge=1, le=256, description="Threads per gunicorn worker (requests at once)."
    )
    max_body_mb: float = Field(
        default=16.0,
        gt=0,
        description="Largest request body, in MiB; a larger one gets 413 naming this limit.",
    )
    confirm_calls: int = Field(
        default=10_000,
        ge=0,
        description="A judge, generate, audit, counterfactual, item-plan or sweep job that would "
        "send more model calls than this (its dry run's figure) is queued only when confirmed: the "
        "dashboard's form shows the figure and asks; over the API a member key must send "
        '`"confirm": true` (an admin key need not).',
    )
    confirm_cost: float = Field(
        default=10.0,
        ge=0,
        description="The same for cost: a job whose dry run could cost more than this at its "
        "endpoint's prices (every reply at max_tokens; in the unit of `input_price_per_mtok`) "
        "needs confirming too. An endpoint with no prices is limited by `confirm_calls` alone.",
    )
    job_slots: int = Field(
        default=2, ge=1, le=32, description="Jobs the worker runs at once (each a thread)."
    )
    job_poll_s: float = Field(
        default=0.25,
        gt=0,
        le=60,
        description="How often an idle worker looks for queued jobs, in seconds.",
    )
    job_lease_s: float = Field(
        default=15.0,
        ge=3,
        le=600,
        description="How long a job's lease outlives its worker's last heartbeat; a job "
        "whose worker died is taken over after this at most (at once on the same host).",
    )
    warm_figures: bool = Field(
        default=True,
        description="The job worker computes dashboard pages ahead on a thread of its own (never "
        "in a job's slot): those of the judge runs a job touched when it ends, and those of "
        "runs whose rows changed by any other path (an import, a command, an API post), and "
        "keeps them in the store, so the first person to open them does not wait "
        "(docs/dashboard.md).",
    )
    queue_wait_alert_s: float = Field(
        default=60.0,
        gt=0,
        le=86400,
        description="Health says `degraded` once a job has waited this long, in seconds, "
        "without starting (every slot busy, or no worker taking jobs).",
    )


class WorkersConfig(_Strict):
    """Jobs on Celery workers across machines (docs/scaling.md). Unset ``broker_url`` (the
    default): jobs run in ``fairjudge serve``'s own worker thread and nothing needs Redis."""

    broker_url: str = Field(
        default="",
        description="Celery broker: redis://HOST:6379/0 or amqp://USER:PASSWORD@HOST:5672// "
        "('' = no Celery: the server's own worker runs jobs). Needs a PostgreSQL "
        "`database_url` that every worker reaches.",
    )
    limiter_url: str = Field(
        default="",
        description="Redis holding each endpoint's shared quota (`concurrency` and "
        "`requests_per_minute` across every worker); '' = the broker's URL when it is "
        "redis://, else no shared quota (each process limits itself).",
    )
    chunk_size: int = Field(
        default=500,
        ge=1,
        le=1_000_000,
        description="Items per Celery task: a judge or generation run is split into tasks of "
        "this many items, spread over the workers.",
    )
    task_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Calls one Celery task (a part of a run) keeps in flight at once; unset = "
        "the endpoint's `concurrency`. The endpoint's `concurrency` stays the quota all "
        "workers share: with N workers, set this to about concurrency / N, so that no thread "
        "waits on the shared quota.",
    )
    visibility_timeout_s: int = Field(
        default=3600,
        ge=60,
        description="Redis broker only: seconds before a task not yet acknowledged is "
        "delivered again. Keep it above the longest task and any retry delay, or a task "
        "still running is handed to a second worker.",
    )

    def quota_url(self) -> str:
        """The Redis that keeps the endpoints' shared quota: ``limiter_url``, else the broker
        when it is Redis, else '' (each process limits itself; judge.models.limiter).

        >>> WorkersConfig(broker_url="redis://q:6379/0").quota_url()
        'redis://q:6379/0'
        >>> WorkersConfig(broker_url="amqp://guest@q:5672//").quota_url()
        ''
        """
        if self.limiter_url:
            return self.limiter_url
        if self.broker_url.lower().startswith(("redis://", "rediss://")):
            return self.broker_url
        return ""
