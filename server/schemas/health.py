"""The health route's reply and API keys."""

from __future__ import annotations

from datetime import datetime

from pydantic import (
    BaseModel,
    Field,
)

from server.schemas.base import Strict

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
