"""``/api/v1/health``: is the server up, and is its database reachable (no key needed)."""

from __future__ import annotations

from typing import Any

from flask import current_app
from flask_openapi3 import APIBlueprint, Tag

from server.errors import declared_errors
from server.schemas import HealthOut

bp = APIBlueprint(
    "health",
    __name__,
    abp_tags=[Tag(name="health")],
    # No key is asked for, and a 503 here is the health answer itself (HealthOut).
    abp_responses=declared_errors(without=(401, 403, 404, 409, 413, 424, 503)),
)


@bp.get("/health", responses={200: HealthOut, 503: HealthOut}, security=[])
def health() -> Any:
    """Whether the server answers, its database is reachable, and its job workers are
    alive: 503 with `status: unhealthy` when no worker has beaten recently while one went
    quiet without stopping or jobs wait for one (`worker.reason` says which); `status:
    degraded` (200) when the oldest queued job has waited past `[server] queue_wait_alert_s`
    without starting (`worker.oldest_wait_s`)."""
    from dataclasses import asdict

    from server.usecases.browse import schema_revision
    from server.usecases.jobs import worker_health

    engine = current_app.extensions["fairjudge_engine"]
    revision = schema_revision(engine)
    cfg = current_app.config["SETTINGS"].server
    workers = worker_health(
        engine, stale_after_s=stale_after_s(cfg.job_lease_s), wait_alert_s=cfg.queue_wait_alert_s
    )
    status = "unhealthy" if not workers.healthy else "degraded" if workers.degraded else "ok"
    body = {
        "status": status,
        "schema_revision": revision,
        "worker": asdict(workers),
    }
    return body, 200 if workers.healthy else 503


def stale_after_s(job_lease_s: float) -> float:
    """A worker that has not beaten for this long is taken for dead: its jobs' leases have
    lapsed by then, so another worker would already have taken them over."""
    return max(job_lease_s, 10.0)
