"""Which human ratings count, reports and the judge's own checks as queries, and agreement
between the judge and the humans."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
)

from server.schemas.base import StaleOut, StandingOut, Strict
from server.usecases.agreement import GROUP_BY, AgreementOptions, FilesAgreementRequest
from server.usecases.requests import DiagnosticsRequest


class RatingScopeQuery(Strict):
    """Which human ratings agreement uses (docs/annotation.md, "Ratings belong to their
    campaign")."""

    campaign: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="A campaign's name, or import:BATCH, whose ratings count (repeat the "
        "parameter for several); without it every campaign and import batch of the run counts, "
        "the newest winning per rater, item and rubric.",
    )


class AgreementQuery(RatingScopeQuery, AgreementOptions):
    """Which ratings agreement uses, and how its coefficients are computed (the options of
    ``fairjudge agreement``, with its defaults)."""

    group_by: str | None = GROUP_BY


class ReportQuery(RatingScopeQuery):
    """A judge run's report: whose ratings, and whether to refuse an unqualified judge."""

    require_qualified: bool = Field(
        default=False,
        description="Answer 409, naming the rubric and why, unless the judge is validated "
        "for every rubric the report uses (`fairjudge checks qualify`).",
    )


class CsvQuery(RatingScopeQuery):
    table: str | None = Field(
        default=None, max_length=100, description="Which CSV of the report (default: the first)."
    )


class ReportCsvQuery(ReportQuery, CsvQuery):
    """One CSV of a judge run's report, refused (409) with ``require_qualified`` as the
    report is."""


class FilesAgreementIn(FilesAgreementRequest):
    """``fairjudge agreement compute``'s files and options."""


class FilesAgreementOut(RootModel[dict[str, Any]]):
    """What ``fairjudge agreement compute --json`` prints: ``n_items``, ``human_vs_human``
    (each coefficient's value, CI, p-value and n, null when undefined), ``settings``, and
    with a judge file ``judge_vs_human`` and how the two files' items paired."""


class TableQuery(Strict):
    table: str | None = Field(
        default=None, max_length=100, description="Which CSV of the report (default: the first)."
    )


class DiagnosticsQuery(DiagnosticsRequest):
    """``fairjudge checks show``'s options (the use case's request, as a query)."""

    require_qualified: bool = Field(
        default=False,
        description="Answer 409, naming the rubric and why, unless the judge is validated "
        "for every rubric it scored (`fairjudge checks qualify`).",
    )


class DiagnosticsCsvQuery(DiagnosticsQuery, TableQuery):
    pass


class ReportOut(RootModel[dict[str, Any]]):
    """A report's data, what report.json holds: each section's payload under its key (e.g.
    ``metrics_overall``, ``agreement``, ``diagnostics``); figures that are not numbers are
    null. A judge run's report or diagnostics served from before the latest writes to its
    rows also holds ``stale`` (``StaleOut``)."""


class AgreementFlagOut(BaseModel):
    """A warning that an agreement figure flatters the judge (``judge.stats.baseline``)."""

    code: Literal["kappa_covers_zero", "no_better_than_majority"] = Field(
        description="Stable: kappa_covers_zero (kappa's interval reaches 0) or "
        "no_better_than_majority (exact agreement does not exceed always answering the "
        "humans' most frequent category)."
    )
    message: str = Field(description="The same in words, with the figures.")


class JudgeAgreementOut(BaseModel):
    """One judge run against the humans on one rubric; a judge that scored none of the
    rated items has ``reading`` and no coefficients."""

    model_config = ConfigDict(extra="allow")
    judge_run: int
    label: str
    prompt_variant: str
    temperature: float
    n: int
    judge_unscored_on_rated_items: int
    judge_checks_flagged: list[str]
    reading: str
    coefficients: dict[str, dict[str, Any]] | None = Field(
        default=None,
        description="Per coefficient: value, ci_low, ci_high, p_value, n and "
        "undefined_reason (numbers, null when undefined). Beside kappa: ac1 (Gwet), "
        "ac2_linear, ac2_quadratic, majority_baseline (exact agreement of always answering "
        "the humans' most frequent category) and majority_baseline_ac1.",
    )
    majority_category: int | None = Field(
        default=None, description="The humans' most frequent category (the lowest on a tie)."
    )
    flags: list[AgreementFlagOut] | None = Field(
        default=None,
        description="When the agreement flatters the judge; empty when it does not, absent "
        "without coefficients.",
    )
    standing: StandingOut | None = Field(
        default=None,
        description="The judge run's standing on the rubric (validated or not, how, on whose "
        "answers); null where the run has none to give.",
    )


class RubricAgreementOut(BaseModel):
    n_rated_items: int
    n_raters: int
    n_ratings: int
    scale: str
    human_vs_human: dict[str, Any] = Field(
        description="The humans among themselves: Krippendorff's alphas, Fleiss' kappa, "
        "pairwise kappa (the ceiling)."
    )
    judges: list[JudgeAgreementOut]


class AgreementOut(BaseModel):
    """Judge-human and human-human agreement (``server.usecases.agreement``): the same shape
    as ``fairjudge agreement --json``."""

    judge_run: int | None = Field(description="The judge run asked about; null: all of them.")
    generation_run: int
    ratings_used: dict[str, Any] = Field(
        description="The campaigns and import batches whose ratings were used."
    )
    weighted_absent: str = Field(description="Why there is no whole-run estimate, or empty.")
    human_score: str
    n_bootstrap: int
    seed: int | None
    target_half_width: float
    scale: str
    rubrics: dict[str, RubricAgreementOut]
    stale: StaleOut | None = Field(
        default=None,
        description="Present when the answer was computed before the latest writes to the "
        "run's rows (served while it is computed again).",
    )
