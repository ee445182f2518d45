"""A jury of judge runs over HTTP (``GET /api/v1/juries?runs=1,2,3``): the query and the reply,
which is what ``fairjudge jury --json`` prints (``annotation.jury.Jury.to_dict``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judge.errors import NotFoundError
from server.schemas.agreement import AgreementFlagOut, RatingScopeQuery
from server.usecases.juries import JuryOptions
from server.usecases.requests import MAX_ID

RUNS = r"^[1-9][0-9]{0,9}(,[1-9][0-9]{0,9}){0,19}$"
"""Run ids from 1, at most ten digits: one past the largest id is a 404 (no such run)."""


class JuryQuery(RatingScopeQuery, JuryOptions):
    """The judge runs of the jury, comma-separated, and the options of ``fairjudge jury``."""

    runs: str = Field(
        pattern=RUNS,
        max_length=220,
        description="The judge runs of the jury, comma-separated (e.g. 1,2,3): two or more "
        "runs of the same answers, at most 20.",
    )

    @property
    def run_ids(self) -> list[int]:
        """The ids; NotFoundError for one past the largest a row can have (no such run): a
        schema-valid id is never a 422."""
        ids = [int(part) for part in self.runs.split(",")]
        beyond = [str(i) for i in ids if i > MAX_ID]
        if beyond:
            raise NotFoundError(
                f"no judge run {', '.join(beyond)} (ids run from 1 to {MAX_ID}); see GET "
                "/api/v1/judge-runs"
            )
        return ids


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CoefficientOut(_Out):
    """One coefficient: null numbers where undefined, with the reason."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n: int
    undefined_reason: str | None


class MemberOut(_Out):
    """The jury (``judge_run`` null) or one of its judges against people."""

    label: str
    judge_run: int | None
    coefficients: dict[str, CoefficientOut] = Field(
        description="spearman, pearson, kendall, kappa_quadratic, mean_difference (judge - "
        "human), alpha_interval (Krippendorff's, the two as coders), and beside chance: "
        "exact_agreement, majority_baseline (exact agreement of always answering the "
        "people's most frequent category), kappa and ac1 (Gwet)."
    )
    majority_category: int | None = Field(
        description="The people's most frequent category (null without items)."
    )
    flags: list[AgreementFlagOut] = Field(
        description="When the agreement flatters the judge (kappa's interval covers 0, or no "
        "better than the majority class); empty when it does not."
    )


class VersusBestOut(_Out):
    """The jury minus its best single judge, paired over the rated items."""

    statistic: Literal["spearman", "pearson", "kendall", "kappa_quadratic"]
    n: int
    jury: float | None
    judges: list[float | None] = Field(description="Each judge's value, in the runs' order.")
    best: int | None = Field(description="The best judge's position among the judges.")
    best_judge_run: int | None
    difference: float | None = Field(description="Jury minus the best judge on all items.")
    ci_low: float | None
    ci_high: float | None
    confidence: float
    n_bootstrap: int
    best_judge_chosen: str = Field(description="How the best judge is picked in resamples.")
    verdict: Literal["better", "not shown better", "worse", "undefined"]
    reason: str = Field(description="Why the verdict is undefined, or empty.")


class WeightsOut(_Out):
    """Learnt weights per judge run (keys are run ids)."""

    folds: int
    held_out: str
    mean: dict[str, float]
    per_fold: list[dict[str, float]]
    all_items: dict[str, float]


class RubricJuryOut(_Out):
    scale: str
    n_rated_items: int
    n_items: int = Field(description="Rated items every judge scored: the items used.")
    left_out_unscored: dict[str, int] = Field(
        description="Per judge run: rated items it left unscored (left out for all)."
    )
    jury: MemberOut
    judges: list[MemberOut]
    versus_best: VersusBestOut
    weights: WeightsOut | None = Field(description="With combine learnt; null otherwise.")
    same_as_judge_run: int | None = Field(
        description="A judge run whose scores the jury's equal on every item, or null."
    )


class JuryCostOut(_Out):
    runs: dict[str, float | None] = Field(description="Each run's cost; null without prices.")
    total: float | None = Field(description="The sum; null when a run's cost is unknown.")
    note: str


class JuryRunOut(_Out):
    id: int
    label: str


class JuryOut(_Out):
    """A jury against people, beside each judge (``fairjudge jury --json``'s shape)."""

    generation_run: int
    judge_runs: list[JuryRunOut]
    combine: Literal["mean", "median", "majority", "learnt"]
    statistic: Literal["spearman", "pearson", "kendall", "kappa_quadratic"]
    human_score: Literal["mean", "median"]
    n_bootstrap: int
    seed: int | None
    confidence: float
    ratings_used: dict[str, Any]
    ratings_note: str
    cost: JuryCostOut
    rubrics: dict[str, RubricJuryOut]
