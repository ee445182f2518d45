"""The base of every use case's request (``server.usecases.requests`` holds them): unknown
fields refused, booleans refused where a number is asked for, the config keys a request
overrides (``OVERRIDES``) and the fields a job may not carry (``NOT_FOR_JOBS``).

``apply_overrides`` puts a request's overrides on the loaded settings, validated as the
config file would be. Bounds of the override fields are the config's own
(``judge.config``): whatever the config accepts, the CLI, the job API and the dashboard
accept, and nothing more.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from judge.config import Settings
from judge.errors import InvalidInputError

MAX_ID = 2**31 - 1
"""The largest id a row can have on every store: PostgreSQL's ``integer`` id columns are
32-bit (SQLite's are 64-bit). Ids above it are refused where they enter, as bad input,
instead of overflowing in the database driver."""

R = TypeVar("R", bound="Request")


def problems_of(exc: ValidationError) -> list[str]:
    """Each bad field of ``exc`` as ``field: reason``."""
    return [f"{'.'.join(str(p) for p in e['loc']) or 'params'}: {e['msg']}" for e in exc.errors()]


def _numeric(annotation: Any) -> bool:
    """Whether a field's annotation is int or float (alone or with None)."""

    if annotation in (int, float):
        return True
    args = typing.get_args(annotation)
    return (
        bool(args)
        and all(a in (int, float, type(None)) for a in args)
        and any(a in (int, float) for a in args)
    )


class NumbersNotBooleans(BaseModel):
    """Refuses ``true``/``false`` where a number is asked for: pydantic would read them as
    1 and 0, and a client that sent a boolean for a seed or a temperature made a mistake
    it should hear about."""

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, field in cls.model_fields.items():
                key = field.alias or name
                if isinstance(data.get(key), bool) and _numeric(field.annotation):
                    raise ValueError(f"{key}: expected a number, got {str(data[key]).lower()}")
        return data


class Request(NumbersNotBooleans):
    """A use case's request: unknown fields are refused (a misspelt option is an error)."""

    model_config = ConfigDict(extra="forbid")

    OVERRIDES: ClassVar[dict[str, str]] = {}
    """Field -> the dotted config key it overrides for this request."""
    NOT_FOR_JOBS: ClassVar[dict[str, str]] = {}
    """Field -> why a job may not set it (such fields are never stored)."""

    @classmethod
    def build(cls: type[R], **fields: Any) -> R:
        """The request from keyword fields; InvalidInputError lists every bad field."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise InvalidInputError("; ".join(problems_of(exc))) from None

    @classmethod
    def overrides_of(cls, fields: Mapping[str, Any]) -> dict[str, object]:
        """The dotted config overrides that ``fields`` set (None: the config's value)."""
        return {dotted: fields.get(name) for name, dotted in cls.OVERRIDES.items()}

    def overrides(self) -> dict[str, object]:
        return self.overrides_of(dict(self))

    def to_params(self) -> dict[str, Any]:
        """What a job stores: the fields that are set (None left out), as JSON."""
        return self.model_dump(mode="json", exclude_none=True, exclude=set(self.NOT_FOR_JOBS))

    def job_problems(self) -> list[str]:
        """The fields set here that a job may not carry."""
        return [
            f"{name}: {why}"
            for name, why in self.NOT_FOR_JOBS.items()
            if getattr(self, name) != type(self).model_fields[name].default
        ]


def apply_overrides(settings: Settings, request: Request) -> Settings:
    """``settings`` with the request's overrides (unset ones change nothing), validated as
    the config file would be; InvalidInputError names each bad value."""

    given = {k: v for k, v in request.overrides().items() if v is not None}
    if not given:
        return settings
    data = settings.model_dump()
    for dotted, value in given.items():
        section, key = dotted.split(".")
        data[section][key] = value
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise InvalidInputError("; ".join(problems_of(exc))) from None
