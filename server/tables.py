"""The server's own tables: what the web API, the dashboard and the job workers keep, and no
stage of the domain reads.

ApiKey holds the API's keys (hashes only) and WebSession the dashboard's sign-ins; WorkerBeat
each job worker's heartbeat; Job the background work queued over HTTP, the dashboard or the
CLI, and JobPart the shares of a job that Celery workers split; DashboardFigure a page's
figures as computed at one version of the store.

They sit on the domain's ``SQLModel.metadata`` beside ``judge/store/tables.py`` and are
created and changed by the same migrations (``judge/store/migrations``), so one database and
one schema revision hold both: moving them here changed no table. A process registers them by
importing this module, which every server module that uses them does; the migrations' Alembic
environment imports both modules, so autogenerate compares the whole schema.

Queries on them are in ``server/queries.py``; the use cases call those.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, LargeBinary, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from judge.store.tables import utcnow

__all__ = [
    "ApiKey", "DashboardFigure", "GateVerdict", "Job", "JobPart", "WebSession", "WorkerBeat",
    "utcnow",
]  # fmt: skip


class ApiKey(SQLModel, table=True):
    """A key of the web API. Only the key's sha256 is stored; ``prefix`` (its first
    characters) lets people tell keys apart in listings."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    role: str = Field(description="admin or member")
    prefix: str
    key_hash: str = Field(index=True, unique=True)
    created_at: datetime = Field(default_factory=utcnow)
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


class WebSession(SQLModel, table=True):
    """A dashboard sign-in. The browser's cookie holds a random token; only its sha256 is
    stored here. Signing out sets ``revoked_at``, so a copy of the cookie is worthless from
    then on, as it is once the key is revoked or the session is older than its lifetime."""

    id: int | None = Field(default=None, primary_key=True)
    token_hash: str = Field(index=True, unique=True)
    key_id: int = Field(foreign_key="apikey.id", index=True)
    created_at: datetime = Field(default_factory=utcnow)
    revoked_at: datetime | None = None


class WorkerBeat(SQLModel, table=True):
    """A job worker's heartbeat: written when it starts, renewed while it runs, marked when
    it stops. Health reads the newest beat: a server whose workers all went quiet is not
    healthy, and jobs they held are taken over once their leases lapse."""

    id: int | None = Field(default=None, primary_key=True)
    worker: str = Field(index=True, unique=True, description="host:pid")
    started_at: datetime = Field(default_factory=utcnow)
    beat_at: datetime = Field(default_factory=utcnow)
    stopped_at: datetime | None = None


class Job(SQLModel, table=True):
    """Background work started over HTTP (generation, judging, a campaign pull): queued ->
    running -> finished, failed or cancelled. A worker holds it with a lease it renews; a
    job whose worker died goes back to the queue and resumes from what the store holds."""

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True, description="generate, judge or pull")
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    status: str = Field(default="queued", index=True)
    done: int = Field(default=0, description="Units of work finished (answers, judgments).")
    total: int | None = Field(default=None, description="Units of work planned, when known.")
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    error: str | None = Field(default=None, sa_column=Column(Text))
    attempts: int = Field(default=0, description="Times a worker has started it.")
    cancel_requested: bool = False
    worker: str | None = Field(default=None, description="host:pid of the worker holding it.")
    lease_expires_at: float | None = Field(
        default=None, description="Seconds since the epoch; the worker's heartbeat renews it."
    )
    not_before: float | None = Field(
        default=None,
        description="Seconds since the epoch before which no worker takes the queued job (one "
        "waiting for its batches at the provider); None: at once.",
    )
    created_by: str | None = Field(default=None, description="The API key's name.")
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class JobPart(SQLModel, table=True):
    """One share of a job that Celery workers split (a judge or generation run's items, in
    parts of ``[workers] chunk_size``): which items, where it stands, which worker has it.
    A part found ``running`` under a worker whose heartbeat stopped is sent again."""

    __table_args__ = (UniqueConstraint("job_id", "number"),)
    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="job.id", index=True)
    number: int
    item_ids: list[int] = Field(default_factory=list, sa_column=Column(JSON))
    status: str = Field(default="queued", description="queued, running, done or failed")
    worker: str | None = Field(default=None, description="host:pid of the worker on it.")
    done: int = Field(default=0, description="Calls this part finished.")
    total: int | None = Field(default=None, description="Calls this part planned.")
    attempts: int = Field(default=0, description="Times a worker has started it.")
    error: str | None = Field(default=None, sa_column=Column(Text))
    sent_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class DashboardFigure(SQLModel, table=True):
    """A dashboard page's figures as computed at one version of the store, kept so that any
    web worker, on any machine, and any restart reuses them, and so that a job can compute a
    run's pages as it ends, before anyone opens them (server.usecases.figures). ``data`` is
    the figures pickled and compressed; it is read back only with an allow-list of types."""

    key: str = Field(primary_key=True, description="The page and its arguments, hashed.")
    page: str = Field(description="The page and its arguments, readable.")
    judge_run_id: int | None = Field(default=None, index=True)
    version: str = Field(description="The store's version the figures were computed at, hashed.")
    computed_at: datetime = Field(default_factory=utcnow)
    seconds: float = Field(description="How long computing them took.")
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class GateVerdict(SQLModel, table=True):
    """One evaluation of a release gates file by ``fairjudge gate``: a CI artefact, kept
    under a name (the file's path, or ``--record NAME``) so the API and the dashboard show
    each name's last verdict. ``result`` is the whole verdict as ``fairjudge gate --json``
    prints it (every gate's outcome, figure and threshold); no stage of the domain reads it.
    A file that could not be evaluated (a problem in it) leaves no row."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, description="What the verdict is kept under.")
    source: str = Field(description="The gates file as the command was given it.")
    passed: bool
    n_gates: int
    n_failed: int
    seconds: float = Field(description="How long the evaluation took.")
    evaluated_at: datetime = Field(default_factory=utcnow)
    result: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
