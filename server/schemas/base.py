"""What every area of the API shares: the strict base of request models, the error shape,
pages and lists, path parameters, and the replies that say figures are being computed or
are stale."""

from __future__ import annotations

import inspect
from typing import Generic, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    RootModel,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from server.usecases.requests import (
    MAX_ID,
    NumbersNotBooleans,
)

MAX_PAGE = 500
"""The most rows one page of a list endpoint returns."""

T = TypeVar("T")


SOME_TEXT = r"[^\s\x1c-\x1f\x85\ufeff]"
r"""A pattern for "holds a character other than white space" that Python's and JavaScript's
regular expressions read alike (the document's readers use the latter): each engine's ``\s``
lacks a few characters the other's has (Python's: U+FEFF; JavaScript's: U+001C-U+001F and
U+0085), so the class names them all."""


class Strict(NumbersNotBooleans):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    status: int
    message: str = Field(description="What went wrong and what to do about it.")
    problems: list[str] | None = Field(
        default=None, description="Each bad field or row with its reason, when there are several."
    )


class ErrorOut(BaseModel):
    """The one shape of every error the API returns."""

    error: ErrorBody


class PageQuery(Strict):
    limit: int = Field(default=50, ge=1, le=MAX_PAGE, description=f"Rows per page (1-{MAX_PAGE}).")
    offset: int = Field(default=0, ge=0, le=MAX_ID, description="Rows to skip.")


class Page(BaseModel, Generic[T]):
    """One page of a list: ``Page[ItemOut]`` is a page of items."""

    items: list[T]
    total: int = Field(description="Rows matching, over all pages.")
    limit: int
    offset: int


class ListOf(RootModel[list[T]], Generic[T]):
    """A whole list (no pages): ``ListOf[DatasetOut]``."""


class ReplyOf(RootModel[T], Generic[T]):
    """A reply that is a domain read model (a dataclass) as it is: ``class DatasetOut(
    ReplyOf[DatasetInfo])`` answers the dataclass's fields, never restated here. The
    document describes it as a named object with those fields, not as a bare reference to
    the dataclass's schema: a client generated from the document (openapi-python-client)
    drops a reply that is only a reference."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)  # {"$ref": ...} to the dataclass's schema
        target = dict(handler.resolve_ref_schema(schema))
        target["title"] = cls.__name__
        if cls.__doc__:
            target["description"] = inspect.cleandoc(cls.__doc__)
        return target


class RunPath(Strict):
    run_id: int = Field(ge=1, le=MAX_ID)


class JobPath(Strict):
    job_id: int = Field(ge=1, le=MAX_ID)


class NamePath(Strict):
    name: str = Field(min_length=1, max_length=200)


class ComputingOut(BaseModel):
    """Figures still being computed, none ever kept for this run with these options (HTTP
    202, with ``Retry-After``): ask the same URL again; it answers with them once they are
    kept."""

    status: str = Field(description="computing")
    page: str = Field(description="What is being computed: report, agreement-json, checks ...")
    judge_run_id: int
    waited_s: float = Field(description="How long this request waited for it, in seconds.")
    retry_after_s: int = Field(description="When to ask again, in seconds.")
    message: str


class StaleOut(BaseModel):
    """Why an answer holds figures kept before the latest writes to the run's rows (HTTP 200
    with ``X-Figures-Stale: true``): they are the latest kept, word for word, while the
    figures as the rows are now are computed; asked again, the route serves those once
    kept."""

    computed_at: str = Field(description="When the figures served were computed (ISO 8601).")
    version: str = Field(description="The digest of the run's rows they were computed at.")
    behind: list[str] | None = Field(
        description="The kinds of rows written since (ratings, judgments, answers, items, "
        "campaigns, judge or generation runs); [] when none (kept too long ago); null when "
        "not known (the figures came from the store, which keeps only the digest)."
    )
    message: str


class StandingOut(BaseModel):
    """A judge run's standing on one rubric (``server.usecases.standing.Standing``), as
    report.json's ``standing`` gives it."""

    rubric: str
    state: str = Field(description="validated, not validated, failed validation or stale.")
    says: str = Field(description="The same in words: how, when, on how many ratings; or why not.")
    qualification: int | None = Field(description="The qualification record that decided.")
    answers_model: str | None = Field(
        description="The model whose answers the judge was qualified on (null: no record)."
    )
