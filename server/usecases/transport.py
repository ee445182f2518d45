"""How a run's calls reach the model, as a request carries it (``transport`` of
``JudgeRequest``, ``GenerateRequest`` and ``AuditRequest``): live, or through the endpoint's
Batch API with what tunes it. The CLI's ``--batch`` options fill it; the use cases turn it
into the domain's transport (``judge.models.transport``). Its own module, with pydantic
only, so that the requests stay one import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from judge.errors import ConfigError, InvalidInputError
from judge.models.batch_options import POLL_S, BatchOptions

if TYPE_CHECKING:
    from judge.config import Settings
    from judge.models.transport import Transport as CallTransport


class Transport(BaseModel):
    """How a run's calls reach the model: ``live`` (one call each, the default) or ``batch``
    (through the endpoint's Batch API, at the batch price: the endpoint needs ``batch =
    true``; docs/judging.md, "The Batch API"). The other fields tune a batch and are
    refused with ``live``. Read strictly (a ``retry_live`` of 1 or "yes" is refused, not
    taken for true), since an API body reaches it as it was sent."""

    model_config = ConfigDict(extra="forbid", strict=True)

    mode: Literal["live", "batch"] = Field(
        default="live", description="live: one call each; batch: the endpoint's Batch API."
    )
    retry_live: bool = Field(
        default=False,
        description="Send the calls a batch did not answer live in the same command (else "
        "the run ends incomplete and the next command sends them in a new batch).",
    )
    wait: bool = Field(
        default=True,
        description="Wait for the batches; false submits them (or looks at those running) "
        "and returns, and the same request run again collects them.",
    )
    poll_s: float = Field(
        default=POLL_S,
        gt=0,
        allow_inf_nan=False,
        description="Seconds between two looks at a running batch.",
    )

    @field_validator("poll_s", mode="before")
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {str(value).lower()}")
        return value

    @model_validator(mode="after")
    def _tuning_needs_batch(self) -> Transport:
        if self.mode == "live":
            tuned = [
                name
                for name, field in type(self).model_fields.items()
                if name != "mode" and getattr(self, name) != field.default
            ]
            if tuned:
                # InvalidInputError, not ValueError: pydantic passes it on, so the API answers
                # a 400 (the body matches its document; the combination is what is wrong).
                raise InvalidInputError(
                    f"transport: {', '.join(tuned)} only apply with mode 'batch'"
                )
        return self

    @property
    def batch(self) -> bool:
        return self.mode == "batch"


class JudgeTransport(Transport):
    """A judge run's transport: ``Transport``, and where repair calls go."""

    repairs: Literal["live", "batch"] = Field(
        default="live",
        description="With batch: an unreadable reply's repair call goes live at once (live) "
        "or in a second batch (batch: no live price, two waits).",
    )


def batch_refuses_max_cost(request: Any, command: str) -> Any:
    transport = request.transport
    if transport is not None and transport.batch and request.max_cost is not None:
        raise InvalidInputError(
            "--max-cost cannot be used with --batch (a batch's cost is known only when it "
            f"is done); estimate it with --dry-run --batch, or {command} live"
        )
    return request


transport_help = (
    "How the calls reach the model (default: live). A job with mode 'batch' submits its "
    "batches, goes back to the queue without holding a worker slot while the provider works "
    "(looking again every poll_s seconds; it never waits in a slot, whatever wait says), and "
    "shows the batches' state in its result; the server's own worker runs it (not Celery's)."
)


def options_of(transport: Transport) -> BatchOptions:
    """The Batch API's tuning, as the domain takes it."""
    return BatchOptions(
        retry_live=transport.retry_live, wait=transport.wait, poll_s=transport.poll_s
    )


def check_batch_endpoint(settings: Settings, endpoint: str) -> None:
    """Refuse, in one line naming the setting, an endpoint not marked as offering the Batch
    API."""
    if not settings.endpoint(endpoint).batch:
        raise ConfigError(
            f"endpoint {endpoint!r} is not set up for the Batch API: set `batch = true` under "
            f"[endpoints.{endpoint}] in the config (only for a provider that serves /v1/files "
            "and /v1/batches), or judge without --batch"
        )


def call_transport(settings: Settings, endpoint: str, transport: Transport | None) -> CallTransport:
    """The domain's transport for a request's (``judge.models.transport``): ``LIVE``, or a
    ``BatchTransport`` on ``endpoint``'s Batch API (refused when the endpoint does not offer
    it), made for this one command."""
    from judge.models.transport import LIVE, BatchTransport

    if transport is None or not transport.batch:
        return LIVE
    from judge.models.batch import BatchApi

    check_batch_endpoint(settings, endpoint)
    repairs = transport.repairs if isinstance(transport, JudgeTransport) else "live"
    api = BatchApi(endpoint, settings.endpoint(endpoint))
    return BatchTransport(api, options_of(transport), repairs=repairs)


def transport_choices(settings: Settings) -> list[tuple[str, str]]:
    """What a job form offers for ``transport``: live, and batch where an endpoint of the
    config offers the Batch API (``batch = true``) and jobs run on the server's own worker
    (not the Celery workers')."""
    offered = [("live", "live")]
    batch = [name for name, e in sorted(settings.endpoints.items()) if e.batch]
    if batch and not settings.workers.broker_url:
        offered.append(("batch", f"batch (the Batch API at the batch price: {', '.join(batch)})"))
    return offered
