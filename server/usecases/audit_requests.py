"""The audit suites' requests: each suite's design options (``SUITE_OPTIONS``), the request
that sends a suite to the model under test (``AuditRequest``: the API's ``POST /audits``
body, an audit job's parameters, the dashboard job form's fields; the CLI's
``AuditRunRequest`` in ``server.usecases.audits`` adds input files and ``new``) and the one
that has the judge classify an award run's follow-ups. Re-exported by
``server.usecases.requests``, which holds every other request.

Options naming input files (item banks, name lists, designs, BBQ's items) are the CLI's
only: over HTTP they would let any key holder make the server read a file of its choosing.
The BBQ suite, whose items are not bundled, reads them over HTTP from the file or folder the
server's config names (``[audits] bbq_data``; ``suite_inputs``), never from a path a request
gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from judge.errors import InvalidInputError
from server.usecases.request_base import MAX_ID, Request
from server.usecases.transport import Transport, batch_refuses_max_cost, transport_help

if TYPE_CHECKING:
    from judge.config import Settings

BbqCategory = Literal[
    "Age",
    "Disability_status",
    "Gender_identity",
    "Nationality",
    "Physical_appearance",
    "Race_ethnicity",
    "Race_x_SES",
    "Race_x_gender",
    "Religion",
    "SES",
    "Sexual_orientation",
]
"""BBQ's eleven categories as its files spell them (``judge.audits.bbq_data.CATEGORIES``;
tests/server/api/test_bbq_api.py holds the two to the same list)."""


class AwardOptions(Request):
    """The award audit's design (the bundled item bank and names)."""

    levels: list[int] | None = Field(
        default=None,
        min_length=1,
        max_length=21,
        description="Performance levels: correct answers out of the bank's items (default "
        "5, 10, 15, 20).",
    )
    pairs_per_level: int | None = Field(
        default=None, ge=1, le=500, description="Response-vector pairs per level (default 125)."
    )
    seed: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="Seed of the design's draws (0)."
    )
    followup: bool | None = Field(
        default=None, description="Also ask why, after every answer that chose a student."
    )


class NamesOptions(Request):
    """The name-based advice audit's design (the bundled design file)."""

    repeats: int | None = Field(
        default=None, ge=1, le=1000, description="Answers per name and template (default 100)."
    )


class BbiOptions(Request):
    """The BBI audit's design (the bundled StereoSet and CrowS-Pairs samples)."""

    per_type: int | None = Field(
        default=None, ge=1, le=1000, description="Items of each bias type per prompt (20)."
    )
    repeats: int | None = Field(
        default=None, ge=1, le=100, description="Times each batch is asked (5)."
    )
    seed: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="Seed of the shuffles (0)."
    )
    bias_types: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=20,
        description="Bias types (default: gender, race, religion, as in seed 004).",
    )
    max_per_type: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="At most N items of each dataset and bias type, drawn with the seed.",
    )


class BbqOptions(Request):
    """The BBQ audit's design: the items of the file or folder ``[audits] bbq_data`` names
    (over HTTP; the CLI's ``--data`` otherwise), each asked once, its options in an order
    drawn from the seed and stored."""

    categories: list[BbqCategory] | None = Field(
        default=None,
        min_length=1,
        max_length=11,
        description="Only these BBQ categories (default: every category in the data).",
    )
    seed: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="Seed of each item's option order (0)."
    )


SUITE_OPTIONS: dict[str, type[Request]] = {
    "award": AwardOptions,
    "names": NamesOptions,
    "bbi": BbiOptions,
    "bbq": BbqOptions,
}
"""The design options a job or the API may set, per suite. Options naming input files (item
banks, name lists, designs, datasets) are the CLI's only: over HTTP they would let any key
holder make the server read a file of its choosing."""

BBQ_DATA_UNSET = (
    "the bbq suite needs BBQ's items, which are not bundled: set [audits] bbq_data = PATH "
    "(a BBQ .jsonl(.gz) file or a folder of them) in the config (docs/configuration.md), "
    "or give `fairjudge audit bbq run --data PATH` on the command line"
)


def suite_inputs(settings: Settings | None, suite: str) -> dict[str, str]:
    """The input files the server's config names for ``suite`` (the BBQ suite's
    ``[audits] bbq_data``; the other suites read their bundled designs): what a job, the
    API's audits and the dashboard's run with. InvalidInputError saying what to set when
    the BBQ suite is asked for and the config names no data."""
    if suite != "bbq":
        return {}
    data = settings.audits.bbq_data if settings is not None else ""
    if not data:
        raise InvalidInputError(BBQ_DATA_UNSET)
    return {"data": data}


class AuditRequest(Request):
    """Send an audit suite's design to the model under test (resumes the run with the same
    settings and design)."""

    suite: Literal["award", "names", "bbi", "bbq"] = Field(
        description="award, names, bbi or bbq (BBQ's items: the file [audits] bbq_data names)"
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="The suite's design. award: levels, pairs_per_level, seed, followup; "
        "names: repeats; bbi: per_type, repeats, seed, bias_types, max_per_type; bbq: "
        "categories, seed. Unset: the suite's default.",
    )
    endpoint: str | None = Field(
        default=None, description="Model under test (default: [generation] endpoint)."
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="Sampling temperature (default 1.0)."
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=32_768,
        description="Longest answer (default: award 300, names 200, bbi 2048, bbq 100).",
    )
    limit: int | None = Field(default=None, ge=1, description="Only the design's first N prompts.")
    max_cost: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Stop before spending more, at the endpoint's prices (refused without them).",
    )
    transport: Transport | None = Field(default=None, description=transport_help)

    @model_validator(mode="after")
    def _batch_and_budget(self) -> AuditRequest:
        return batch_refuses_max_cost(self, "audit")

    @field_validator("options")
    @classmethod
    def _suite_options(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        suite = info.data.get("suite")
        if suite not in SUITE_OPTIONS:  # the suite itself is wrong: that error says so
            return value
        model = SUITE_OPTIONS[suite]
        try:
            return model.model_validate(value).model_dump(exclude_none=True)
        except ValidationError as exc:
            known = ", ".join(model.model_fields)
            problems = []
            for e in exc.errors():
                where = ".".join(str(p) for p in e["loc"]) or "options"
                if e["type"] == "extra_forbidden":
                    problems.append(f"{where} is not an option of the {suite} suite ({known})")
                else:
                    problems.append(f"{where}: {e['msg']}")
            raise PydanticCustomError(
                "audit_options", "{problems}", {"problems": "; ".join(problems)}
            ) from None


class AuditClassifyRequest(Request):
    """Have the judge classify an award audit run's follow-up explanations (resumable)."""

    run_id: int = Field(ge=1, le=MAX_ID, description="The award audit run.")
    endpoint: str | None = Field(
        default=None, description="Judge endpoint (default: [judge] endpoint)."
    )
