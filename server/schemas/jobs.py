"""Jobs: what queueing one takes (one body per kind, its parameters generated from the job's
typed request), a dry run's reply, and a job as read back."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StrictBool,
    TypeAdapter,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from judge.errors import InvalidInputError
from server.schemas.base import PageQuery, Strict
from server.usecases.audit_requests import SUITE_OPTIONS, AuditRequest
from server.usecases.jobs import check_params
from server.usecases.requests import JOB_REQUESTS, Request

# -- jobs -----------------------------------------------------------------------------------


JOB_KINDS = f"^({'|'.join(JOB_REQUESTS)})$"
"""Every kind of job (``server.usecases.requests.JOB_REQUESTS``; server/jobs/tasks.py runs
them)."""

CONFIRM_FIELD = Field(
    default=False,
    description="Queue the job even if its dry run is over the server's confirm_calls or "
    "confirm_cost: a member key needs it for such a job (the 403 says the figure), an "
    "admin key does not. POST /jobs/dry-run gives the figure first.",
)


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _camel(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("-"))


def _model_of(
    name: str, request: type[Request], doc: str, replace: dict[str, Any] | None = None
) -> type[BaseModel]:
    """A model named ``name`` with ``request``'s fields (type, bounds, default, description)
    less those a job may not carry (``NOT_FOR_JOBS``), ``replace`` putting (type, field) in
    place of some; unknown fields refused, as the request refuses them."""
    fields: dict[str, Any] = {
        field: (info.annotation, copy.copy(info))
        for field, info in request.model_fields.items()
        if field not in request.NOT_FOR_JOBS
    }
    fields.update(replace or {})
    return create_model(  # type: ignore[call-overload, no-any-return]
        name, __config__=ConfigDict(extra="forbid"), __doc__=doc, __module__=__name__, **fields
    )


def job_params_model(kind: str, request: type[Request]) -> Any:
    """The parameters a job of ``kind`` takes, made from its request model; an audit job's
    are one model per suite (``_audit_params``)."""
    if request is AuditRequest:
        return _audit_params()
    refused = "".join(f" {name}: {why}." for name, why in request.NOT_FOR_JOBS.items())
    doc = f"The parameters of {_a(kind)} job: ``{request.__name__}`` as a job stores it."
    if refused:
        doc += " Not for a job:" + refused
    return _model_of(f"{_camel(kind)}JobParams", request, doc)


def _audit_params() -> Any:
    """An audit job's parameters, one model per suite told apart by ``suite``: its
    ``options`` are that suite's design options (``SUITE_OPTIONS``), which the job queue
    checks them against, in place of the request's free-form object."""
    variants = []
    for suite, design in SUITE_OPTIONS.items():
        name = _camel(suite)
        options = _model_of(
            f"{name}AuditOptions",
            design,
            f"The {suite} suite's design options (``{design.__name__}``); unset ones take "
            "the suite's defaults.",
        )
        tag: Any = Literal[suite]
        replace = {
            "suite": (tag, Field(description=f"The suite: {suite}.")),
            "options": (options, Field(default_factory=dict, description=options.__doc__)),
        }
        doc = f"The parameters of an audit job of the {suite} suite (``AuditRequest``)."
        variants.append(_model_of(f"{name}AuditJobParams", AuditRequest, doc, replace))
    return Annotated[
        Union[tuple(variants)],  # noqa: UP007  (a Union of classes made at load time)
        Field(discriminator="suite"),
    ]


JOB_PARAMS: dict[str, Any] = {
    kind: job_params_model(kind, request) for kind, request in JOB_REQUESTS.items()
}
"""Every kind of job -> the model of its parameters (for an audit, a union of one model per
suite), generated, never written by hand."""


def _job_body(kind: str, params: Any) -> type[BaseModel]:
    tag: Any = Literal[kind]  # a Literal of a value known when the module loads
    about = getattr(params, "__doc__", None) if isinstance(params, type) else None
    return create_model(  # type: ignore[call-overload, no-any-return]
        f"{_camel(kind)}JobCreate",
        __config__=ConfigDict(extra="forbid"),
        __doc__=f"Queue {_a(kind)} job.",
        __module__=__name__,
        kind=(tag, Field(description="The kind of job.")),
        params=(params, Field(description=about or f"The parameters of {_a(kind)} job.")),
        confirm=(StrictBool, copy.copy(CONFIRM_FIELD)),
    )


JOB_PARAM_TYPES: dict[str, TypeAdapter[Any]] = {
    kind: TypeAdapter(params) for kind, params in JOB_PARAMS.items()
}

JOB_BODIES: dict[str, type[BaseModel]] = {
    kind: _job_body(kind, params) for kind, params in JOB_PARAMS.items()
}
"""Every kind of job -> the body that queues one, as the OpenAPI document names it."""

JobBody: Any = Annotated[
    Union[tuple(JOB_BODIES.values())],  # noqa: UP007  (a Union of classes made at load time)
    Field(discriminator="kind"),
]
"""One body per kind of job, told apart by ``kind``: what the document says the job routes
take."""


class JobCreate(Strict):
    """A job to queue: ``{"kind": ..., "params": {...}, "confirm": false}``.

    The document describes this body as ``JobBody``, one model per kind whose parameters
    are generated from the kind's request (``JOB_PARAMS``). The server reads ``kind`` here
    and checks ``params`` with the job queue's own check (``server.usecases.jobs``), then
    by their documented types: bad parameters get a 400 that names the kind and each bad
    field, as they did before the document described them (not the 422 of a body that
    does not match its schema)."""

    kind: str = Field(pattern=JOB_KINDS, description=", ".join(JOB_REQUESTS))
    params: dict[str, Any] = Field(default_factory=dict)
    confirm: StrictBool = copy.copy(CONFIRM_FIELD)

    @model_validator(mode="after")
    def _params_as_documented(self) -> JobCreate:
        """The job queue's check first (its 400s, as they always were); then the parameters
        read strictly by their documented types, so that nothing the document refuses is
        queued: the check reads JSON leniently (``0`` as false, ``false`` as 0.0 inside a
        list), which would store a value the client did not mean. Both raise
        InvalidInputError, which pydantic passes on: a 400 naming each bad field."""
        check_params(self.kind, self.params)
        try:
            JOB_PARAM_TYPES[self.kind].validate_python(self.params, strict=True)
        except ValidationError as exc:
            problems = []
            for e in exc.errors():
                loc = list(e["loc"])
                if self.kind == "audit" and loc and loc[0] == self.params.get("suite"):
                    loc = loc[1:]  # the suite's tag, which the union adds
                problems.append(f"{'.'.join(str(p) for p in loc) or 'params'}: {e['msg']}")
            raise InvalidInputError(
                f"bad parameters for {_a(self.kind)} job: " + "; ".join(problems)
            ) from None
        return self

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(TypeAdapter(JobBody).core_schema)
        schema["title"] = cls.__name__
        schema["description"] = (
            "A job to queue, one body per kind (told apart by `kind`): its `params` are "
            "those of the kind's request; unset ones take the server's config."
        )
        return schema


class DryRunOut(BaseModel):
    """What a job would send and cost (``kind``: judge, generate, audit, audit-classify,
    counterfactual, item-plan, item-generate or judge-pairs, this one per pair of runs under
    ``pairs``): the calls to send and those the cache answers, and an ``estimate`` of tokens
    and cost at the endpoint's prices, live
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
    not_before: float | None = Field(
        default=None,
        description="Seconds since the epoch before which no worker takes the queued job: one "
        "whose batches run at the provider (transport mode batch) waits so, off the worker "
        "slots, its batches' state under ``result.batch``; null: at once.",
    )
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
